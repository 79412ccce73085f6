package raftzone

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/internal/hclogslog"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

func (s *Member) startRaft() error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.serverID)
	rc.HeartbeatTimeout = s.cfg.RaftHeartbeatTimeout
	rc.ElectionTimeout = s.cfg.RaftElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.RaftLeaderLeaseTimeout
	rc.CommitTimeout = s.cfg.RaftCommitTimeout
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.Logger = hclogslog.New(s.log)
	rc.NoLegacyTelemetry = true
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("raft timers: %w", err)
	}

	dir := filepath.Join(s.cfg.DataDir, "raft")
	bs, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(dir, "raft.db"),
		BoltOptions: &bbolt.Options{
			Timeout:        time.Second,
			NoFreelistSync: true,
			FreelistType:   bbolt.FreelistMapType,
		},
	})
	if err != nil {
		return fmt.Errorf("open raft log in --data-dir %s (is another agent using it?): %w", s.cfg.DataDir, err)
	}
	s.boltStore = bs
	logs, err := raft.NewLogCache(logCacheEntries, bs)
	if err != nil {
		return fmt.Errorf("raft log cache: %w", err)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 2, rc.Logger)
	if err != nil {
		return fmt.Errorf("raft snapshot store: %w", err)
	}
	if err := s.recoverIfRequested(rc, logs, bs, snaps); err != nil {
		return fmt.Errorf("zone recovery in --data-dir %s: %w", s.cfg.DataDir, err)
	}
	hadState, err := raft.HasExistingState(logs, bs, snaps)
	if err != nil {
		return fmt.Errorf("inspect raft state in --data-dir %s: %w", s.cfg.DataDir, err)
	}
	s.hadState = hadState
	if applied, _ := s.store.AppliedIndex(); !hadState && applied > 0 {
		// Raft state is gone but the replicated state survived: its applied
		// index would make it skip the first entries of whatever cluster this
		// member joins now. Start it empty; the leader will fill it.
		s.log.Warn("raft log missing but replicated state present; discarding the state", "applied", applied)
		if err := s.resetStore(); err != nil {
			return err
		}
	}
	// The replicated state is persistent, so a restart need not re-read the
	// latest snapshot; it only must when that state is older than the
	// snapshot (the state file was lost).
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		applied, _ := s.store.AppliedIndex()
		rc.NoSnapshotRestoreOnStart = applied >= metas[0].Index
	}
	s.transport = s.port.RaftTransport(zoneport.RaftTransportConfig{Addresses: addressBook{s}, Logger: rc.Logger, RPCs: s.metrics.rpcs,
		Refused: func(reason string) { s.metrics.raftRefused.WithLabelValues(reason).Inc() }})
	r, err := raft.NewRaft(rc, s.store, logs, bs, snaps, s.transport)
	if err != nil {
		s.transport.Close()
		return fmt.Errorf("start raft: %w", err)
	}
	s.raft = r
	return nil
}

// logCacheEntries is how many recent Raft entries every member keeps in memory
// so the leader replicates to a follower that is just behind without reading
// bbolt. A zone appends about one entry a second, so this is a minute; each
// entry can hold a report from every member, so a larger cache is megabytes of
// heap on every node of a large zone.
const logCacheEntries = 64

// addressBook resolves server IDs to the addresses in the replicated member
// list, so a member whose IP changed is followed without a config change.
// Raft asks for every RPC (a leader of 129 sends over a thousand a second), so
// the answer comes from a cache rebuilt only when the store applied something.
type addressBook struct{ s *Member }

func (a addressBook) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if string(id) == a.s.serverID {
		return raft.ServerAddress(a.s.cfg.raftAddress()), nil
	}
	if m, ok := a.s.memberByID(string(id)); ok {
		return raft.ServerAddress(m.RaftAddress), nil
	}
	// Not (yet) a member: raft falls back to the configuration's address.
	return "", fmt.Errorf("server %s is not in the member list", id)
}

// memberIndex caches the member list by server ID and by node, keyed by the
// store's applied index: the transport asks on every RPC and handshake.
type memberIndex struct {
	mu      sync.Mutex
	src     *store.Store
	applied uint64
	byID    map[string]zone.Member
	byNode  map[string]zone.Member
}

// invalidate drops the cached maps: the member list changed without a new
// applied index (store.Settle).
func (c *memberIndex) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byID, c.byNode = nil, nil
}

func (s *Member) memberByID(id string) (zone.Member, bool) {
	byID, _ := s.memberMaps()
	m, ok := byID[id]
	return m, ok
}

func (s *Member) memberByNode(node string) (zone.Member, bool) {
	_, byNode := s.memberMaps()
	m, ok := byNode[node]
	return m, ok
}

// memberMaps returns the cached maps; callers must not change them.
func (s *Member) memberMaps() (byID, byNode map[string]zone.Member) {
	src := s.state()
	applied, _ := src.AppliedIndex()
	c := &s.members
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || c.src != src || c.applied != applied {
		ms, err := src.Members()
		if err != nil {
			return c.byID, c.byNode
		}
		c.byID = make(map[string]zone.Member, len(ms))
		c.byNode = make(map[string]zone.Member, len(ms))
		for _, m := range ms {
			c.byID[m.ServerID] = m
			c.byNode[m.Node] = m
		}
		c.src, c.applied = src, applied
	}
	return c.byID, c.byNode
}

// inConfiguration reports whether this member is in the latest Raft
// configuration, i.e. has joined a cluster.
func (s *Member) inConfiguration() bool {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == s.serverID {
			return true
		}
	}
	return false
}

// configuration returns the latest Raft configuration by server ID.
func (s *Member) configuration() (map[string]raft.Server, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("read raft configuration: %w", err)
	}
	out := map[string]raft.Server{}
	for _, srv := range f.Configuration().Servers {
		out[string(srv.ID)] = srv
	}
	return out, nil
}
