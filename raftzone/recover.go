package raftzone

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/raftzone/recovery"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// Recovery from lost quorum: the member acts on a recovery.Request found in
// its data dir at start (see package recovery).

// recoveryPendingFile marks a recovered member whose first act as leader is
// still to be done.
const recoveryPendingFile = "recover-pending.json"

// recoverIfRequested runs before Raft starts. A request that does not hold is
// refused (and moved aside, so the next start is a normal one); the member
// then starts as it would have without it.
func (s *Member) recoverIfRequested(rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, recoveryPendingFile)); err == nil {
		s.recoveryPending.Store(true) // recovered, but stopped before its first act as leader
	}
	path := filepath.Join(s.cfg.DataDir, recovery.RequestFile)
	req, err := recovery.Read(path)
	if err == nil && req == nil {
		return nil
	}
	if err == nil {
		err = s.recoverCluster(req, rc, logs, stable, snaps)
	}
	if err != nil {
		s.metrics.recoveries.WithLabelValues("refused").Inc()
		s.log.Error("zone recovery refused; starting without it", "request", path, "err", err)
		return os.Rename(path, path+".refused")
	}
	s.metrics.recoveries.WithLabelValues("recovered").Inc()
	if err := os.Rename(path, filepath.Join(s.cfg.DataDir, recoveryPendingFile)); err != nil {
		return fmt.Errorf("record the recovery: %w", err)
	}
	s.recoveryPending.Store(true)
	return nil
}

func (s *Member) recoverCluster(req *recovery.Request, rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return err
	}
	if !has {
		return errors.New("this member has no Raft state to recover from")
	}
	gc := *rc
	gc.NoSnapshotRestoreOnStart = true // read the configuration only
	_, tr := raft.NewInmemTransport("")
	cfg, err := raft.GetConfiguration(&gc, s.store, logs, stable, snaps, tr)
	if err != nil {
		return fmt.Errorf("read the last Raft configuration: %w", err)
	}
	members, err := s.store.Members()
	if err != nil {
		return err
	}
	byNode := map[string]zone.Member{}
	byID := map[string]string{}
	var names []string
	for _, m := range members {
		byNode[m.Node], byID[m.ServerID] = m, m.Node
		names = append(names, m.Node)
	}
	var voters []string
	for _, srv := range cfg.Servers {
		if srv.Suffrage != raft.Voter {
			continue
		}
		if n, ok := byID[string(srv.ID)]; ok {
			voters = append(voters, n)
		} else {
			voters = append(voters, "server "+string(srv.ID)) // in no member list: never named, always counted
		}
	}
	if err := recovery.Check(s.cfg.Node, voters, names, req.Dead); err != nil {
		return err
	}
	// A named voter that still answers may be part of a quorum elsewhere.
	for _, n := range req.Dead {
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.RaftHeartbeatTimeout)
		var rs replicaState
		err := s.callPeer(ctx, byNode[n].RaftAddress, "/v1/replica", nil, &rs)
		cancel()
		if err == nil {
			return fmt.Errorf("%s answers at %s: it is not gone, and the zone may still have a quorum", n, byNode[n].RaftAddress)
		}
	}
	self := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(s.serverID), Address: raft.ServerAddress(s.cfg.raftAddress()), Suffrage: raft.Voter}}}
	if err := raft.RecoverCluster(rc, s.store, logs, stable, snaps, tr, self); err != nil {
		return fmt.Errorf("rewrite the Raft configuration: %w", err)
	}
	s.log.Warn("zone recovered from lost quorum: this member is now its only voter", "dead", req.Dead, "requestedAt", req.RequestedAt)
	return nil
}

// finishRecovery is a recovered leader's first act: the named nodes are judged
// unhealthy (so the webhook leaves them to eviction) and leave the zone (so
// the survivors' quorum and verdicts no longer count them). Until it succeeds
// every reconcile round tries again; both steps converge, so a retry after a
// partial success is harmless.
func (s *Member) finishRecovery(ctx context.Context, term uint64) error {
	if !s.recoveryPending.Load() {
		return nil
	}
	path := filepath.Join(s.cfg.DataDir, recoveryPendingFile)
	req, err := recovery.Read(path)
	if err != nil || req == nil {
		s.recoveryPending.Store(false)
		return err
	}
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	members, err := s.store.MemberClaims()
	if err != nil {
		return err
	}
	verdicts, err := s.store.Verdicts()
	if err != nil {
		return err
	}
	// The named dead are judged unhealthy — not by a tally, which the
	// survivors, too few for a quorum of the old zone, could never reach,
	// but as members without a vote in the recovered configuration that have
	// been silent for a vote timeout, which every replica checks — and then
	// leave the zone. A named node that still reports, or votes again, is
	// neither: the recovery waits for it.
	var judge []zone.Verdict
	var keep []zone.Member
	var waiting []string
	now := s.clock.Now().UTC()
	for _, m := range members {
		if !slices.Contains(req.Dead, m.Node) {
			keep = append(keep, m)
			continue
		}
		if v, ok := verdicts[m.Node]; ok && v.State == zone.Unhealthy {
			continue // judged: it leaves
		}
		keep = append(keep, m)
		waiting = append(waiting, m.Node)
		judge = append(judge, zone.Verdict{Node: m.Node, State: zone.Unhealthy, Members: len(members), Term: term, Leader: s.cfg.Node, DecidedAt: now})
	}
	if len(judge) > 0 {
		in, err := s.store.TallyInput()
		if err != nil {
			return err
		}
		cmd, err := s.encode(store.VerdictBatch{Verdicts: judge, Basis: in.Applied, VoteTimeout: s.cfg.VoteTimeout, Recovery: true})
		if err != nil {
			return err
		}
		resp, err := s.apply(ctx, "verdicts", cmd)
		if err != nil {
			return fmt.Errorf("commit the verdicts of the lost voters: %w", err)
		}
		if res, ok := resp.(*store.ApplyResult); ok && res.Applied > 0 {
			committed, err := s.store.Verdicts()
			if err != nil {
				return err
			}
			var applied []zone.Verdict
			for _, v := range judge {
				if c, ok := committed[v.Node]; ok && c == v {
					applied = append(applied, v)
				}
			}
			if s.deps.Sink != nil && len(applied) > 0 {
				s.deps.Sink.Verdicts(term, applied, false)
			}
		}
	}
	if len(keep) < len(members) {
		if err := s.commitMembers(ctx, keep); err != nil {
			return fmt.Errorf("remove the lost voters from the zone: %w", err)
		}
	}
	if len(waiting) > 0 {
		s.log.Info("recovery: judging the lost voters, which must have no vote and be silent for a vote timeout, before they leave the zone",
			"waiting", waiting, "term", term)
		return nil
	}
	s.log.Warn("recovery finished: lost voters judged unhealthy and removed from the zone", "dead", req.Dead, "term", term)
	s.recoveryPending.Store(false)
	return os.Rename(path, path+".done")
}
