package raftzone

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// joinRequest is what a member without a cluster sends to any peer.
type joinRequest struct {
	Zone         string `json:"zone"`
	Node         string `json:"node"`
	ServerID     string `json:"serverID"`
	RaftAddress  string `json:"raftAddress"`
	ProbeAddress string `json:"probeAddress"`
	// PublicKey is the joiner's node key (zone.EncodeNodeKey); it must be the
	// key its connection proved and its Node registers.
	PublicKey string `json:"publicKey"`
}

// joinLoop makes this member part of the zone's cluster and keeps it so: while it
// is not in the Raft configuration it asks peers to admit it, and — only if it
// has no Raft state at all and no peer has a cluster — it tries to win the zone's
// genesis object and bootstrap alone. See doc.go for why this cannot split the
// zone.
func (s *Member) joinLoop(ctx context.Context) {
	lastGenesisWarn := time.Time{}
	for {
		if !s.inConfiguration() && !s.isMember() {
			joined, clusterSeen := s.tryJoin(ctx)
			if !joined && !clusterSeen && !s.hadState {
				if other := s.tryGenesis(ctx); other != nil && s.clock.Since(lastGenesisWarn) > 30*time.Second {
					lastGenesisWarn = s.clock.Now()
					s.log.Warn("zone genesis object names another founder but no member answers with a cluster; "+
						"if the whole zone's data was wiped, delete the genesis Lease to let a new founder bootstrap",
						"founder", other.Founder, "founderID", other.FounderID, "cluster", other.ClusterID,
						"lease", zone.GenesisLeaseName(s.cfg.Zone))
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.cfg.JoinRetry):
		}
	}
}

// tryJoin asks reachable peers, in random order, to admit this member. It
// reports whether one did and whether any peer showed that a cluster exists.
func (s *Member) tryJoin(ctx context.Context) (joined, clusterSeen bool) {
	req := joinRequest{Zone: s.cfg.Zone, Node: s.cfg.Node, ServerID: s.serverID,
		RaftAddress: s.cfg.raftAddress(), ProbeAddress: s.cfg.AdvertiseAddress, PublicKey: zone.EncodeNodeKey(s.port.PublicKey())}
	var peers []string
	for _, p := range s.peers(true) {
		if p.RaftAddress != "" && p.RaftAddress != s.cfg.raftAddress() && !slices.Contains(peers, p.RaftAddress) {
			peers = append(peers, p.RaftAddress)
		}
	}
	rand.Shuffle(len(peers), func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
	for _, addr := range peers {
		err := s.join(ctx, addr, req)
		var pe *PeerError
		leader := addr
		if errors.As(err, &pe) && pe.Status == http.StatusMisdirectedRequest && pe.Leader != "" {
			clusterSeen = true
			leader = pe.Leader
			err = s.join(ctx, pe.Leader, req)
		}
		switch {
		case err == nil:
			s.admittedBy.Store(&leader)
			s.log.Info("asked the zone leader to admit us", "via", addr)
			return true, true
		case errors.As(err, &pe):
			if pe.Reason != reasonNoCluster {
				clusterSeen = true
			}
			if pe.Status == http.StatusForbidden {
				s.log.Warn("zone refused to admit this member", "via", addr, "reason", pe.Reason, "err", pe.Message)
			}
		default:
			s.log.Debug("zone peer unreachable for join", "peer", addr, "err", err)
		}
		if ctx.Err() != nil {
			return false, true
		}
	}
	return false, clusterSeen
}

func (s *Member) join(ctx context.Context, addr string, req joinRequest) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout+2*time.Second)
	defer cancel()
	return s.callPeer(ctx, addr, "/v1/join", req, nil)
}

// tryGenesis claims the zone's genesis object and bootstraps if this member is
// (or already was) its founder. It returns the record when another member is
// the founder.
func (s *Member) tryGenesis(ctx context.Context) *GenesisRecord {
	rec := GenesisRecord{ClusterID: uuid.NewString(), Founder: s.cfg.Node, FounderID: s.serverID, CreatedAt: s.clock.Now().UTC()}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, created, err := s.deps.Genesis.Claim(ctx, s.cfg.Zone, rec)
	if err != nil {
		s.log.Info("no zone cluster reachable and the genesis object is unavailable; waiting", "err", err)
		return nil
	}
	// A founder that crashed between claiming and bootstrapping finds its own
	// record on restart and may finish the job; nobody else ever may.
	if !created && (got.Founder != s.cfg.Node || got.FounderID != s.serverID) {
		return &got
	}
	cfg := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(s.serverID), Address: raft.ServerAddress(s.cfg.raftAddress()),
	}}}
	if err := s.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		s.log.Error("bootstrap zone cluster", "err", err)
		return nil
	}
	s.log.Info("founded the zone's Raft cluster", "cluster", got.ClusterID)
	return nil
}

const (
	reasonNoCluster = "no_cluster"
	reasonNoLeader  = "no_leader"
)

// handleJoin admits a member on the leader, or points the caller at the leader.
func (s *Member) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, http.StatusBadRequest, "malformed", err)
		return
	}
	if req.Zone != s.cfg.Zone {
		s.writeError(w, http.StatusForbidden, "wrong_zone", errors.New("join request for zone "+req.Zone+", this is zone "+s.cfg.Zone))
		return
	}
	if _, err := uuid.Parse(req.ServerID); err != nil || req.Node == "" || req.RaftAddress == "" {
		s.writeError(w, http.StatusBadRequest, "malformed", errors.New("join request needs node, a UUID serverID and raftAddress"))
		return
	}
	// A node joins only as itself: the node, server ID and key of the
	// request must be those its connection proved.
	caller, ok := zoneport.CallerOf(r.Context())
	switch {
	case !ok:
		s.refuseCaller(w, "join", errors.New("unauthenticated connection"))
		return
	case caller.Node != req.Node:
		s.refuseCaller(w, "join", fmt.Errorf("%s may not join as %s", caller.Node, req.Node))
		return
	case caller.ServerID != req.ServerID:
		s.refuseCaller(w, "join", fmt.Errorf("%s proved server ID %s but asks to join as %s", caller.Node, caller.ServerID, req.ServerID))
		return
	case zone.EncodeNodeKey(caller.Key) != req.PublicKey:
		s.refuseCaller(w, "join", fmt.Errorf("%s proved another node key than it asks to join with", caller.Node))
		return
	}
	if s.Term() == 0 {
		switch {
		case s.raft.State() == raft.Leader:
			s.writeError(w, http.StatusServiceUnavailable, reasonNoLeader, errors.New("leadership is being established"))
		case !s.inConfiguration() && s.state() != s.viewStore:
			// A spare with a view knows the cluster and points at its
			// leader below.
			s.writeError(w, http.StatusServiceUnavailable, reasonNoCluster, errors.New("this member has no cluster"))
		default:
			if _, _, ok := s.Leader(); ok {
				s.writeError(w, http.StatusMisdirectedRequest, "not_leader", errors.New("not the leader"))
				return
			}
			s.writeError(w, http.StatusServiceUnavailable, reasonNoLeader, errors.New("no leader elected yet"))
		}
		return
	}
	m := zone.Member{Node: req.Node, ServerID: req.ServerID, Zone: s.cfg.Zone,
		ProbeAddress: req.ProbeAddress, RaftAddress: req.RaftAddress, JoinedAt: s.clock.Now().UTC(),
		PublicKey: req.PublicKey}
	if reason, err := s.checkJoin(m); err != nil {
		s.writeError(w, http.StatusForbidden, reason, err)
		return
	}
	if err := s.admit(r.Context(), m); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			s.writeError(w, http.StatusMisdirectedRequest, "not_leader", err)
			return
		}
		s.writeError(w, http.StatusServiceUnavailable, "commit_failed", err)
		return
	}
	// A new member may complete the zone's voter set: look now, not at the
	// next reconcile tick.
	s.kickReconcile()
	writeJSON(w, http.StatusOK, struct{}{})
}
