package raftzone

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

// The quorum's evidence toward the cloud: a node the cloud cannot hear from
// while its zone reaches the cloud is protected only on the signed word of a
// majority of its peers that they reach it. Each member signs that word
// itself, with its node key; the leader only gathers the attestations and
// writes them with its zone Lease renewals. The leader's own word counts as
// one member's, no more.

// maxAttestNodes bounds the nodes one attestation request may name.
const maxAttestNodes = 1024

// gatherTimeout bounds one round of gathering: a member that does not answer
// within it is left out of this renewal's evidence.
const gatherTimeout = 2 * time.Second

// gatherParallel bounds the requests one round has in flight.
const gatherParallel = 16

// attestRequest asks a member which of Nodes it reaches.
type attestRequest struct {
	Nodes []string `json:"nodes"`
}

func (s *Member) handleAttest(w http.ResponseWriter, r *http.Request) {
	var req attestRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, http.StatusBadRequest, "bad_request", err)
		return
	}
	if len(req.Nodes) > maxAttestNodes {
		s.writeError(w, http.StatusBadRequest, "too_many_nodes",
			fmt.Errorf("attestation request names %d nodes, at most %d", len(req.Nodes), maxAttestNodes))
		return
	}
	writeJSON(w, http.StatusOK, s.attestReach(req.Nodes))
}

// attestReach is this member's signed word on which of nodes it reaches now
// (those its own probes find healthy) and which it reaches no part of (every
// probe fails: kubelet port and agent alike). It never speaks for itself.
func (s *Member) attestReach(nodes []string) zone.Attestation {
	ok, down := map[string]bool{}, map[string]bool{}
	for _, r := range s.deps.Observations.Results() {
		if r.OK {
			ok[r.Peer] = true
		}
	}
	if d, has := s.deps.Observations.(DownObservations); has {
		for _, n := range d.Down() {
			down[n] = true
		}
	}
	a := zone.Attestation{Zone: s.cfg.Zone, Signer: s.cfg.Node, At: s.clock.Now()}
	for _, n := range nodes {
		switch {
		case n == s.cfg.Node:
		case ok[n]:
			a.Reach = append(a.Reach, n)
		case down[n]:
			a.Down = append(a.Down, n)
		}
	}
	a.Sign(s.port.NodeKey())
	return a
}

// WantEvidence lists the members the cloud needs its peers' word on: those
// that, by their last reports (no older than VoteTimeout), do not reach the
// apiserver, so the cloud cannot hear from them while their peers may; and
// those the zone judges unhealthy, whom the out-of-service failover may act
// on only if a majority of their peers find every probe of theirs failing.
// Only the leader holds everyone's reports and the committed verdicts.
func (s *Member) WantEvidence() []string {
	if s.leadership.Term() == 0 {
		return nil
	}
	now := s.clock.Now()
	want := map[string]bool{}
	for node, lr := range s.lastReports() {
		if !lr.APIReachable && now.Sub(lr.ReceivedAt) <= s.cfg.VoteTimeout {
			want[node] = true
		}
	}
	if vs, err := s.store.Verdicts(); err == nil {
		for node, v := range vs {
			if v.State == zone.Unhealthy {
				want[node] = true
			}
		}
	}
	// The leader itself may need its peers' word too: its kubelet may be
	// cut from the cloud while its agent is not.
	return slices.Sorted(maps.Keys(want))
}

// GatherEvidence asks every member, this one included, for its attestation
// about nodes and returns those that came back in time, signed by the member
// asked for its own zone, sorted by signer. Whether each verifies is the
// webhook's to check, against the key the signer's Node registers.
func (s *Member) GatherEvidence(ctx context.Context, nodes []string) []zone.Attestation {
	out := []zone.Attestation{s.attestReach(nodes)}
	members, err := s.state().Members()
	if err != nil {
		s.log.Info("evidence: members not read", "err", err)
		return out
	}
	var (
		mu    sync.Mutex
		peers []zone.Member
	)
	for _, m := range members {
		if m.Node != s.cfg.Node && m.RaftAddress != "" {
			peers = append(peers, m)
		}
	}
	lost := s.eachMember(ctx, peers, func(ctx context.Context, m zone.Member) bool {
		var a zone.Attestation
		err := s.callPeer(ctx, m.RaftAddress, "/v1/attest", attestRequest{Nodes: nodes}, &a)
		if err != nil || a.Zone != s.cfg.Zone || a.Signer != m.Node {
			return false
		}
		mu.Lock()
		out = append(out, a)
		mu.Unlock()
		return true
	})
	if len(lost) > 0 {
		s.log.Debug("evidence: members did not attest in time", "peers", strings.Join(lost, ","))
	}
	slices.SortFunc(out, func(a, b zone.Attestation) int { return strings.Compare(a.Signer, b.Signer) })
	return out
}

// eachMember runs call for every member of members in parallel, at most
// gatherParallel at once and all within gatherTimeout, and returns, sorted,
// the members whose call did not succeed in time.
func (s *Member) eachMember(ctx context.Context, members []zone.Member, call func(context.Context, zone.Member) bool) []string {
	ctx, cancel := context.WithTimeout(ctx, gatherTimeout)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		sem  = make(chan struct{}, gatherParallel)
		lost []string
	)
	for _, m := range members {
		wg.Go(func() {
			ok := false
			select {
			case sem <- struct{}{}:
				ok = call(ctx, m)
				<-sem
			case <-ctx.Done():
			}
			if !ok {
				mu.Lock()
				lost = append(lost, m.Node)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(lost)
	return lost
}
