package raftzone

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// This file holds the spare's side of the zone's three roles. Voters (at most
// --voters) and stand-bys (--standbys) are Raft servers; every other member is
// a spare: outside the Raft configuration, so the leader replicates nothing to
// it and keeps no connection open for it. A spare still probes and reports to
// the leader like any member. What it needs of the committed state — members,
// verdicts, the leader, its own committed row — it copies from a server over
// the peer API (GET /v1/view) into a store of its own (view.db), which answers
// the same read API as a replica, so `edgequorum status` works and a restart
// during a cloud outage still knows the zone.
//
// A member reads its view store instead of its replica while it is a spare:
// outside the configuration, or out of contact with a leader for spareAfter
// (a standby the leader removed never hears of its removal), and only once a
// server answered it. Its replica is never written outside Raft.

// viewCluster is what a spare knows of the Raft cluster: it rides in the view
// store's opaque Cluster part.
type viewCluster struct {
	Leader        string `json:"leader,omitempty"`
	LeaderAddress string `json:"leaderAddress,omitempty"`
	Term          uint64 `json:"term,omitempty"`
	// Servers maps the configuration's server IDs to their suffrage
	// ("voter" or "nonvoter").
	Servers map[string]string `json:"servers,omitempty"`
	// Tag and RowTag are the source's digests of the shared part (members,
	// verdicts, cluster) and of the spare's row; the spare sends them back so
	// that an unchanged part is not sent again.
	Tag    string `json:"tag,omitempty"`
	RowTag string `json:"rowTag,omitempty"`
}

// viewAnswer is the answer of GET /v1/view. Members, Verdicts and Cluster are
// present only when Shared is set, Row only when RowSent is.
type viewAnswer struct {
	Applied     uint64                `json:"applied"`
	AppliedTerm uint64                `json:"appliedTerm"`
	Shared      bool                  `json:"shared,omitempty"`
	Members     []zone.Member         `json:"members,omitempty"`
	Verdicts    []zone.Verdict        `json:"verdicts,omitempty"`
	Cluster     *viewCluster          `json:"cluster,omitempty"`
	RowSent     bool                  `json:"rowSent,omitempty"`
	Row         map[string]store.Cell `json:"row,omitempty"`
	RowTag      string                `json:"rowTag"`
	Last        *store.LastReport     `json:"last,omitempty"`
}

// viewWriteEvery bounds how long a spare keeps an unchanged view before it
// writes the new last report and applied index anyway: a view whose shared
// part and row did not change is not worth an fsync every report period.
const viewWriteEvery = time.Minute

// spareAfter is how long a member outside a leader's contact waits before it
// reads its view instead of its replica. An election is over well within it.
func (s *Member) spareAfter() time.Duration { return 4 * s.cfg.RaftHeartbeatTimeout }

// isSpare reports whether this member gets no replication: it is outside the
// configuration, or no leader has contacted it for spareAfter.
func (s *Member) isSpare() bool {
	if s.raft.State() == raft.Leader {
		return false
	}
	if !s.inConfiguration() {
		return true
	}
	return time.Since(s.raft.LastContact()) > s.spareAfter()
}

// state is the store this member's readers use: the replica, or the view store
// while it is a spare with a view.
func (s *Member) state() *store.Store {
	if s.spare.Load() && s.raft.State() != raft.Leader {
		return s.viewStore
	}
	return s.store
}

// cluster returns the Raft cluster as the last view showed it.
func (s *Member) cluster() viewCluster {
	if c := s.viewCl.Load(); c != nil {
		return *c
	}
	return viewCluster{}
}

func (s *Member) loadViewCluster() {
	var c viewCluster
	if raw := s.viewStore.ViewCluster(); raw != nil && json.Unmarshal(raw, &c) == nil {
		s.viewCl.Store(&c)
	}
}

// handleView is GET /v1/view: a server's view for its caller, a pinned member.
// The query's have and row are the digests the caller holds; parts that match
// are left out.
func (s *Member) handleView(w http.ResponseWriter, r *http.Request) {
	// Membership is judged now, not when the connection was made: a spare
	// that asked to join on this connection has been admitted since.
	caller, ok := zoneport.CallerOf(r.Context())
	if !ok {
		s.refuseCaller(w, "view", errors.New("unauthenticated connection"))
		return
	}
	m, ok := s.memberByNode(caller.Node)
	if pub, err := zone.ParseNodeKey(m.PublicKey); !ok || err != nil || !pub.Equal(caller.Key) || m.ServerID != caller.ServerID {
		s.writeError(w, http.StatusForbidden, "not_member", fmt.Errorf("%s is no member of the zone with the key and server ID it proved", caller.Node))
		return
	}
	if s.isSpare() {
		// Misdirected: the answer names the leader, if this member knows
		// it, so a spare that has no view yet finds a server.
		s.writeError(w, http.StatusMisdirectedRequest, "not_server", errors.New("this member is not a Raft server in contact with a leader"))
		return
	}
	c := viewCluster{Term: s.raft.CurrentTerm(), Servers: map[string]string{}}
	c.Leader, c.LeaderAddress, _ = s.Leader()
	if cfg, err := s.configuration(); err == nil {
		for id, srv := range cfg {
			c.Servers[id] = suffrage(srv.Suffrage)
		}
	}
	// The tags come from the stored bytes, so a spare that holds the parts
	// already costs this server no decoding and no encoding of them.
	q := r.URL.Query()
	var ans viewAnswer
	v, err := s.store.ExportViewParts(caller.Node, func(sums store.ViewSums) (bool, bool) {
		c.Tag = clusterTag(sums.Shared, c)
		ans.RowTag = hex.EncodeToString(sums.Row[:tagLen])
		ans.Shared, ans.RowSent = q.Get("have") != c.Tag, q.Get("row") != ans.RowTag
		return ans.Shared, ans.RowSent
	})
	if err != nil {
		s.writeError(w, http.StatusServiceUnavailable, "store", err)
		return
	}
	ans.Applied, ans.AppliedTerm, ans.Last = v.Applied, v.AppliedTerm, v.Last
	if ans.Shared {
		ans.Members, ans.Verdicts, ans.Cluster = v.Members, v.Verdicts, &c
	}
	if ans.RowSent {
		ans.Row = v.Row
	}
	s.metrics.viewsServed.Inc()
	writeJSON(w, http.StatusOK, ans)
}

// tagLen is how many bytes of a SHA-256 sum a view tag keeps: enough that two
// different parts never meet, short enough for a query string.
const tagLen = 12

// clusterTag is the tag of a view's shared part: the stored members and
// verdicts (their sum) and the cluster as this server sees it.
func clusterTag(shared [sha256.Size]byte, c viewCluster) string {
	h := sha256.New()
	h.Write(shared[:])
	// Encoding a struct of strings and a map cannot fail; json sorts map
	// keys, so equal clusters encode equally.
	_ = json.NewEncoder(h).Encode(c)
	return hex.EncodeToString(h.Sum(nil)[:tagLen])
}

// spareLoop keeps the view of a spare fresh: every report period, while this
// member is a spare, it copies the view from a server, in a random slot of the
// zone's grid (gridtick) that the server's other wakeups may share.
func (s *Member) spareLoop(ctx context.Context) {
	t := gridtick.New(s.clock, slots.ZoneGrid(s.cfg.Zone), s.cfg.ReportPeriod, rand.Float64())
	defer t.Stop()
	var lastWrite time.Time
	for {
		if s.isSpare() {
			wrote, err := s.syncView(ctx, s.clock.Since(lastWrite) >= viewWriteEvery)
			switch {
			case err != nil && ctx.Err() == nil:
				s.metrics.viewSyncs.WithLabelValues("failed").Inc()
				s.log.Debug("no server answered for the zone view", "err", err)
			case err == nil:
				s.metrics.viewSyncs.WithLabelValues("ok").Inc()
				if wrote {
					lastWrite = s.clock.Now()
				}
			}
		} else if s.spare.Swap(false) {
			s.log.Info("member is a Raft server again; reading its replica")
		}
		if s.spare.Load() {
			s.metrics.isSpare.Set(1)
		} else {
			s.metrics.isSpare.Set(0)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		}
	}
}

// viewTries bounds how many servers one sync asks, so a spare whose servers
// are mostly gone does not spend its report period on timeouts.
const viewTries = 3

// syncView asks servers for the view until one answers, and writes it when a
// part changed or force is set. It reports whether it wrote.
func (s *Member) syncView(ctx context.Context, force bool) (bool, error) {
	cur, err := s.viewStore.ExportView(s.cfg.Node)
	if err != nil {
		return false, err
	}
	c := s.cluster()
	var errs []error
	sources := s.viewSources(cur.Members, c)
	tries := viewTries
	for i := 0; i < len(sources) && i < tries; i++ {
		addr := sources[i]
		q := url.Values{"have": {c.Tag}, "row": {c.RowTag}}
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout+time.Second)
		var ans viewAnswer
		err := s.callPeer(callCtx, addr, "/v1/view?"+q.Encode(), nil, &ans)
		cancel()
		var pe *PeerError
		if errors.As(err, &pe) && pe.Status == http.StatusMisdirectedRequest && pe.Leader != "" && !slices.Contains(sources[:i+1], pe.Leader) {
			// Another spare: it names the leader, who is asked next.
			rest := slices.DeleteFunc(slices.Clone(sources[i+1:]), func(a string) bool { return a == pe.Leader })
			sources = append(append(sources[:i+1:i+1], pe.Leader), rest...)
			tries = max(tries, i+2) // the leader it names is always asked
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		next, nc, err := mergeView(cur, c, ans)
		if err != nil {
			s.metrics.viewSyncs.WithLabelValues("refused").Inc()
			errs = append(errs, fmt.Errorf("view from %s: %w", addr, err))
			continue
		}
		write := force || ans.Shared || ans.RowSent
		if write {
			if err := s.viewStore.ImportView(next); err != nil {
				return false, fmt.Errorf("write zone view: %w", err)
			}
			s.viewCl.Store(&nc)
		}
		s.lastSync.Store(s.clock.Now().UnixNano())
		if !s.spare.Swap(true) {
			s.log.Info("member is a spare: reading the zone view a server copies to it", "via", addr)
		}
		return write, nil
	}
	if len(errs) == 0 {
		return false, errors.New("no server of the zone is known")
	}
	return false, errors.Join(errs...)
}

// mergeView applies an answer to the current view: parts the answer left out
// stay, cells about members that left are dropped, and the result must be a
// consistent view (store.View.Validate) or nothing changes.
func mergeView(cur store.View, c viewCluster, ans viewAnswer) (store.View, viewCluster, error) {
	next := store.View{Applied: ans.Applied, AppliedTerm: ans.AppliedTerm, Node: cur.Node,
		Members: cur.Members, Verdicts: cur.Verdicts, Row: cur.Row, Last: ans.Last}
	if ans.Shared {
		if ans.Cluster == nil {
			return store.View{}, c, errors.New("shared part without cluster")
		}
		next.Members, next.Verdicts, c = ans.Members, ans.Verdicts, *ans.Cluster
	}
	if ans.RowSent {
		next.Row = ans.Row
	}
	c.RowTag = ans.RowTag
	members := make(map[string]bool, len(next.Members))
	for _, m := range next.Members {
		members[m.Node] = true
	}
	row := make(map[string]store.Cell, len(next.Row))
	for peer, cell := range next.Row {
		if members[peer] && peer != cur.Node {
			row[peer] = cell
		}
	}
	next.Row = row
	raw, err := json.Marshal(c)
	if err != nil {
		return store.View{}, c, err
	}
	next.Cluster = raw
	if err := next.Validate(); err != nil {
		return store.View{}, c, err
	}
	return next, c, nil
}

// viewSources lists the zone-port addresses to ask for the view, best first:
// the servers of the view other than the leader, in an order that differs
// from spare to spare so that a large zone's spares spread over them, then the
// leader. The view can be stale — a member that was a server for a while and
// turns spare again starts from the view it had before, and a zone recovered
// from a lost quorum has new servers — so a sync's last try goes to a peer
// outside it, in a new order each time (a spare names the leader, who is
// asked next). A spare that never had a view asks the leader that admitted
// it, then every peer it knows.
func (s *Member) viewSources(members []zone.Member, c viewCluster) []string {
	type src struct {
		addr string
		rank uint64
	}
	var out []src
	for _, m := range members {
		if _, ok := c.Servers[m.ServerID]; !ok || m.Node == s.cfg.Node {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(s.cfg.Node + "/" + m.Node))
		r := h.Sum64() >> 1
		if m.Node == c.Leader {
			r |= 1 << 63
		}
		out = append(out, src{m.RaftAddress, r})
	}
	slices.SortFunc(out, func(a, b src) int { return cmp.Compare(a.rank, b.rank) })
	addrs := make([]string, 0, len(out))
	for _, o := range out {
		addrs = append(addrs, o.addr)
	}
	if len(addrs) >= viewTries {
		addrs = addrs[:viewTries-1] // the others are peers too, below
	}
	// Beyond the view: every peer, in a new order every time, except that a
	// spare without a view asks the leader that admitted it first. In a
	// zone of a hundred members mostly spares, three random peers would
	// rarely include a server.
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		seen[a] = true
	}
	if a := s.admittedBy.Load(); a != nil && len(out) == 0 {
		addrs, seen[*a] = append(addrs, *a), true
	}
	peers := s.peers(true)
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	for _, p := range peers {
		if p.RaftAddress != "" && !seen[p.RaftAddress] {
			addrs, seen[p.RaftAddress] = append(addrs, p.RaftAddress), true
		}
	}
	return addrs
}

// isMember reports whether the committed member list this member reads holds
// it, with its own server ID: a spare has joined once its view says so.
func (s *Member) isMember() bool {
	m, err := s.state().Member(s.cfg.Node)
	return err == nil && m.ServerID == s.serverID
}
