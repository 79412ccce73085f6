package raftzone

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/raftzone/seats"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

const configChangeTimeout = 10 * time.Second

// checkJoin decides whether m may join: it must be a node the cluster's member
// list puts in this zone, at the address the list gives, with the node key its
// own Node registers (only its own agent can register one). While the list is
// not available (cloud outage), only members the zone already knows may rejoin,
// with their pinned key and address.
func (s *Member) checkJoin(m zone.Member) (reason string, err error) {
	cands, ok := s.deps.Members.Candidates()
	if !ok {
		pinned, err := s.store.Member(m.Node)
		if err != nil {
			return "member_list_unavailable", fmt.Errorf("node %s is not a known member and the member list is unavailable", m.Node)
		}
		if pinned.PublicKey != m.PublicKey {
			return "key_mismatch", fmt.Errorf("node %s joins with a node key other than its pinned one, and the member list that could show a new registration is unavailable", m.Node)
		}
		if pinned.RaftAddress != m.RaftAddress {
			return "address_mismatch", fmt.Errorf("node %s joins from %s but the zone knows it at %s", m.Node, m.RaftAddress, pinned.RaftAddress)
		}
		return "", nil
	}
	if pinned, err := s.store.Members(); err == nil {
		if other, taken := addressHolder(pinned, m.Node, m.RaftAddress, m.ProbeAddress); taken {
			return "address_taken", fmt.Errorf("node %s joins from %s, which member %s holds", m.Node, m.RaftAddress, other)
		}
	}
	for _, c := range cands {
		if c.Node != m.Node {
			continue
		}
		if c.RaftAddress != m.RaftAddress {
			return "address_mismatch", fmt.Errorf("node %s joins from %s but its Node object says %s", m.Node, m.RaftAddress, c.RaftAddress)
		}
		if c.PublicKey == nil {
			return "key_not_registered", fmt.Errorf("node %s has registered no node key on its Node (annotation %s); its agent does so at start", m.Node, zone.NodeKeyAnnotation)
		}
		if zone.EncodeNodeKey(c.PublicKey) != m.PublicKey {
			return "key_mismatch", fmt.Errorf("node %s joins with a node key other than the one its Node registers", m.Node)
		}
		return "", nil
	}
	return "not_member", fmt.Errorf("node %s is not in zone %s", m.Node, s.cfg.Zone)
}

// admit records m in the member list; whether it also becomes a Raft server
// (a stand-by, later perhaps a voter) is the reconcile round's choice, which
// admit asks for at once. A node that comes back with a new server ID (wiped
// data dir) replaces its old entry, and its old server leaves the
// configuration.
func (s *Member) admit(ctx context.Context, m zone.Member) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	// The list as last committed: what this leader's own replica still
	// holds back of it is committed again with it, not dropped.
	members, err := s.store.MemberClaims()
	if err != nil {
		return err
	}
	var oldID string
	next := make([]zone.Member, 0, len(members)+1)
	for _, old := range members {
		if old.Node == m.Node {
			oldID = old.ServerID
			if old.ServerID == m.ServerID {
				m.JoinedAt = old.JoinedAt
			}
			continue
		}
		next = append(next, old)
	}
	known := false
	for _, old := range members {
		if old.Node == m.Node && old.ServerID == m.ServerID && old.RaftAddress == m.RaftAddress &&
			old.ProbeAddress == m.ProbeAddress && old.PublicKey == m.PublicKey {
			known, m.Role = true, old.Role
		}
	}
	next = append(next, m)
	if !known {
		if err := s.commitMembers(ctx, next); err != nil {
			return err
		}
	}
	if oldID != "" && oldID != m.ServerID {
		s.log.Info("member came back with a new server ID; retiring the old one", "peer", m.Node, "oldID", oldID, "newID", m.ServerID)
		if err := s.raft.RemoveServer(raft.ServerID(oldID), 0, configChangeTimeout).Error(); err != nil {
			return fmt.Errorf("remove stale server %s of %s: %w", oldID, m.Node, err)
		}
		s.metrics.membershipChanges.WithLabelValues("remove_stale").Inc()
	}
	if !known {
		s.log.Info("admitted member", "peer", m.Node, "peerID", m.ServerID)
	}
	return nil
}

// commitMembers commits ms as the member list, each member's Role taken from
// the Raft configuration (a member outside it, a spare, is recorded as a
// nonvoter: replicas of older versions know no other role), so the cached
// list shows suffrage even when read during an outage.
func (s *Member) commitMembers(ctx context.Context, ms []zone.Member) error {
	cfg, err := s.configuration()
	if err != nil {
		return err
	}
	ms = withRoles(ms, cfg)
	cmd, err := s.encode(store.MemberSet{Members: ms})
	if err != nil {
		return err
	}
	if _, err := s.apply(ctx, "members", cmd); err != nil {
		return fmt.Errorf("commit member list: %w", err)
	}
	s.metrics.members.Set(float64(len(ms)))
	s.leadership.setZoneSize(ms)
	return nil
}

func withRoles(ms []zone.Member, cfg map[string]raft.Server) []zone.Member {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Role = zone.Nonvoter
		if cfg[out[i].ServerID].Suffrage == raft.Voter {
			out[i].Role = zone.Voter
		}
	}
	slices.SortFunc(out, func(a, b zone.Member) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// reconcileLoop keeps membership and voters right for as long as this member
// leads; a recovered member's first round finishes its recovery
// (finishRecovery). Besides its tick it runs at once when a member joins (kickReconcile),
// and while the zone is short of voters it could have — a candidate still
// catching up — it looks again after formationRetry, doubling up to the tick:
// a forming zone gets its voters within moments of its members joining, not at
// the next tick, and a zone stuck short costs no more than before.
func (s *Member) reconcileLoop(ctx context.Context, term uint64) {
	p := seats.NewPromoter()
	t := s.clock.NewTicker(s.cfg.ReconcilePeriod)
	defer t.Stop()
	retry := formationRetry
	for {
		if err := s.finishRecovery(ctx, term); err != nil && ctx.Err() == nil {
			s.log.Warn("finishing the zone recovery failed", "term", term, "err", err)
		}
		short, err := s.reconcile(ctx, p)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("membership reconcile failed", "term", term, "err", err)
		}
		var (
			timer clock.Timer
			again <-chan time.Time
		)
		if short || err != nil {
			timer = s.clock.NewTimer(retry)
			again = timer.C()
			retry = min(2*retry, s.cfg.ReconcilePeriod)
		} else {
			retry = formationRetry
		}
		select {
		case <-ctx.Done():
		case <-t.C():
		case <-s.reconcileKick:
			retry = formationRetry
		case <-again:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// formationRetry is the first pause before the leader looks again at a zone
// short of voters.
const formationRetry = 100 * time.Millisecond

// kickReconcile asks the leader's reconcile loop for a round now.
func (s *Member) kickReconcile() {
	select {
	case s.reconcileKick <- struct{}{}:
	default:
	}
}

// reconcile converges four things, in order: the replicated member list onto
// the cluster's member list (removals, address changes, ourselves); the Raft
// configuration onto the member list (servers that left); the voter set onto
// --voters healthy members; and the stand-bys onto --standbys healthy members
// plus a seat for every voter the zone still lacks. Each step is level-triggered, so a failed step is retried next round.
func (s *Member) reconcile(ctx context.Context, p *seats.Promoter) (short bool, err error) {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	// The list as last committed, not as this replica applied it: a change
	// its own view of the cluster has not confirmed yet waits in the store
	// (store.Settle), and committing the list again would not hurry it.
	members, err := s.store.MemberClaims()
	if err != nil {
		return false, err
	}
	cfg, err := s.configuration()
	if err != nil {
		return false, err
	}
	next := withRoles(s.desiredMembers(members), cfg)
	if !slices.Equal(members, next) {
		if err := s.commitMembers(ctx, next); err != nil {
			return false, err
		}
		members = next
	}
	s.metrics.members.Set(float64(len(members)))
	s.leadership.setZoneSize(members)

	byID := map[string]zone.Member{}
	for _, m := range members {
		byID[m.ServerID] = m
	}
	for id, srv := range cfg {
		if id == s.serverID {
			continue
		}
		if _, ok := byID[id]; !ok {
			s.log.Info("removing server that is no longer a member", "peerID", id, "address", srv.Address)
			if err := s.raft.RemoveServer(srv.ID, 0, configChangeTimeout).Error(); err != nil {
				return false, fmt.Errorf("remove server %s: %w", id, err)
			}
			s.metrics.membershipChanges.WithLabelValues("remove").Inc()
			delete(cfg, id)
		}
	}
	// A changed address needs no configuration change: the transport resolves
	// every server ID through the member list (addressBook). Rewriting the
	// address in the configuration would also race in hashicorp/raft v1.7.3
	// (the replication goroutine reads the peer without its lock).
	if short, err = s.balanceVoters(ctx, p, members, cfg); err != nil {
		return false, err
	}
	if cfg, err = s.configuration(); err != nil {
		return false, err
	}
	shortServers, err := s.balanceStandbys(ctx, p, members, cfg)
	if err != nil {
		return false, err
	}
	short = short || shortServers
	// Record the suffrage changes just made in the cached member list.
	if cfg, err = s.configuration(); err != nil {
		return false, err
	}
	if next := withRoles(members, cfg); !slices.Equal(members, next) {
		return short, s.commitMembers(ctx, next)
	}
	return short, nil
}

// desiredMembers applies the cluster's member list to the replicated one. When
// the list is unavailable only our own entry is maintained, so a cloud outage
// never shrinks the zone.
func (s *Member) desiredMembers(current []zone.Member) []zone.Member {
	byNode := map[string]zone.Member{}
	for _, m := range current {
		byNode[m.Node] = m
	}
	self, ok := byNode[s.cfg.Node]
	if !ok || self.ServerID != s.serverID || self.RaftAddress != s.cfg.raftAddress() ||
		self.ProbeAddress != s.cfg.AdvertiseAddress || self.PublicKey != zone.EncodeNodeKey(s.port.PublicKey()) {
		joined := s.clock.Now().UTC()
		if ok && self.ServerID == s.serverID {
			joined = self.JoinedAt
		}
		byNode[s.cfg.Node] = zone.Member{Node: s.cfg.Node, ServerID: s.serverID, Zone: s.cfg.Zone,
			ProbeAddress: s.cfg.AdvertiseAddress, RaftAddress: s.cfg.raftAddress(), JoinedAt: joined,
			PublicKey: zone.EncodeNodeKey(s.port.PublicKey()), KubeletPort: self.KubeletPort}
	}
	if cands, ok := s.deps.Members.Candidates(); ok {
		in := map[string]zoneport.Candidate{}
		for _, c := range cands {
			in[c.Node] = c
		}
		for node, m := range byNode {
			if c, ok := in[node]; ok && c.KubeletPort != 0 && c.KubeletPort != m.KubeletPort {
				// Its kubelet publishes the port; a node can only
				// misdirect probes of itself.
				s.log.Info("member's kubelet port changed", "peer", node, "from", m.KubeletPort, "to", c.KubeletPort)
				m.KubeletPort = c.KubeletPort
				byNode[node] = m
			}
			if node == s.cfg.Node {
				continue
			}
			c, ok := in[node]
			if !ok {
				s.log.Info("member left the zone", "peer", node)
				delete(byNode, node)
				continue
			}
			if reg := zone.EncodeNodeKey(c.PublicKey); c.PublicKey != nil && reg != m.PublicKey {
				// Pinned before node keys existed, or to a key its Node
				// does not register (a leader before replicas checked
				// keys could pin anything): the key its own Node
				// registers, unless another member holds it. Every
				// replica checks it against its own view again.
				if other, held := keyHolder(current, node, reg); held {
					s.log.Warn("member's Node registers a key another member holds; keeping its pinned one",
						"peer", node, "holder", other)
				} else {
					s.log.Info("pinning the node key a member registered", "peer", node)
					m.PublicKey = reg
					byNode[node] = m
				}
			}
			if c.RaftAddress != m.RaftAddress || c.ProbeAddress != m.ProbeAddress {
				// A kubelet sets its own Node's addresses, so a stolen node
				// could claim another member's: it would then draw that
				// member's Raft traffic and probes. An address another
				// member holds is never taken over.
				if other, taken := addressHolder(current, node, c.RaftAddress, c.ProbeAddress); taken {
					s.log.Warn("member's Node claims an address another member holds; keeping its old one",
						"peer", node, "claims", c.RaftAddress, "holder", other)
					continue
				}
				s.log.Info("member address changed", "peer", node, "from", m.RaftAddress, "to", c.RaftAddress)
				m.RaftAddress, m.ProbeAddress = c.RaftAddress, c.ProbeAddress
				byNode[node] = m
			}
		}
	}
	out := make([]zone.Member, 0, len(byNode))
	for _, m := range byNode {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b zone.Member) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// keyHolder returns the member other than node that holds key in ms.
func keyHolder(ms []zone.Member, node, key string) (string, bool) {
	for _, m := range ms {
		if m.Node != node && m.PublicKey == key {
			return m.Node, true
		}
	}
	return "", false
}

// addressHolder returns the member other than node that holds raftAddr or
// probeAddr in ms.
func addressHolder(ms []zone.Member, node, raftAddr, probeAddr string) (string, bool) {
	for _, m := range ms {
		if m.Node != node && (m.RaftAddress == raftAddr || m.ProbeAddress == probeAddr) {
			return m.Node, true
		}
	}
	return "", false
}
