package raftzone

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// Recovery from lost quorum, in the shape of Consul's peers.json: the operator
// names the voters that are gone for good (`edgequorum recover`), which writes
// a request into one surviving member's data dir. When that member's agent
// next starts it checks the request against its own Raft configuration and
// the network, rewrites its configuration to itself alone
// (raft.RecoverCluster), and leads. As its first act it judges the named
// nodes unhealthy and removes them from the zone, so the survivors' quorum
// and verdicts no longer count them; the other survivors are added back by
// the usual reconcile and promoted at once. Nothing is wiped by hand.

// RecoveryRequestFile is the request's name inside --data-dir.
const RecoveryRequestFile = "recover.json"

// recoveryPendingFile marks a recovered member whose first act as leader is
// still to be done.
const recoveryPendingFile = "recover-pending.json"

// RecoveryRequest is what the operator asks for.
type RecoveryRequest struct {
	// Dead are the node names of the voters that are gone for good.
	Dead []string `json:"dead"`
	// RequestedAt is when `edgequorum recover` wrote the request.
	RequestedAt time.Time `json:"requestedAt"`
}

// WriteRecoveryRequest validates req and writes it into dataDir, atomically,
// for the agent to act on at its next start.
func WriteRecoveryRequest(dataDir string, req RecoveryRequest) error {
	if len(req.Dead) == 0 {
		return errors.New("--dead names no node")
	}
	for _, n := range req.Dead {
		if strings.TrimSpace(n) == "" || n != strings.TrimSpace(n) {
			return fmt.Errorf("--dead: %q is not a node name", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft", "raft.db")); err != nil {
		return fmt.Errorf("--data-dir %s holds no Raft state to recover from: %w", dataDir, err)
	}
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, RecoveryRequestFile), append(b, '\n'), 0o600)
}

func readRecoveryFile(path string) (*RecoveryRequest, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var req RecoveryRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &req, nil
}

// recoverIfRequested runs before Raft starts. A request that does not hold is
// refused (and moved aside, so the next start is a normal one); the member
// then starts as it would have without it.
func (s *Server) recoverIfRequested(rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	if _, err := os.Stat(filepath.Join(s.cfg.DataDir, recoveryPendingFile)); err == nil {
		s.recoveryPending.Store(true) // recovered, but stopped before its first act as leader
	}
	path := filepath.Join(s.cfg.DataDir, RecoveryRequestFile)
	req, err := readRecoveryFile(path)
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

func (s *Server) recoverCluster(req *RecoveryRequest, rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
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
	if err := CheckRecovery(s.cfg.Node, voters, names, req.Dead); err != nil {
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

// CheckRecovery refuses a recovery while a quorum may still exist. self, the
// voters of the last configuration and the members are node names. Every node
// named dead must be a member and a voter other than self, self must be a
// voter, and the voters not named must be too few to elect a leader. Both
// `edgequorum recover` (from the agent's status) and the agent at start (from
// its Raft configuration) apply it.
func CheckRecovery(self string, voters, members, dead []string) error {
	if !slices.Contains(voters, self) {
		return fmt.Errorf("%s is not a voter of the last configuration; recover on a surviving voter", self)
	}
	var errs []error
	for _, n := range dead {
		switch {
		case n == self:
			errs = append(errs, fmt.Errorf("--dead names this node, %s", n))
		case !slices.Contains(members, n):
			errs = append(errs, fmt.Errorf("--dead: %s is not a member of this zone", n))
		case !slices.Contains(voters, n):
			errs = append(errs, fmt.Errorf("--dead: %s is not a voter; only lost voters cost a quorum", n))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var alive []string
	for _, v := range voters {
		if !slices.Contains(dead, v) {
			alive = append(alive, v)
		}
	}
	if q := len(voters)/2 + 1; len(alive) >= q {
		return fmt.Errorf("%d of %d voters are not named dead (%s): that is a quorum, the zone can elect a leader by itself",
			len(alive), len(voters), strings.Join(alive, ", "))
	}
	return nil
}

// finishRecovery is a recovered leader's first act: the named nodes are judged
// unhealthy (so the webhook leaves them to eviction) and leave the zone (so
// the survivors' quorum and verdicts no longer count them). Until it succeeds
// every reconcile round tries again; both steps converge, so a retry after a
// partial success is harmless.
func (s *Server) finishRecovery(ctx context.Context, term uint64) error {
	if !s.recoveryPending.Load() {
		return nil
	}
	path := filepath.Join(s.cfg.DataDir, recoveryPendingFile)
	req, err := readRecoveryFile(path)
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
		cmd, err := store.EncodeVerdictBatch(store.VerdictBatch{Verdicts: judge, Basis: in.Applied, VoteTimeout: s.cfg.VoteTimeout, Recovery: true})
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
