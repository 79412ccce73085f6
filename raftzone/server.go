package raftzone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = errors.New("not the zone leader")

// Deps are the outside world a Server needs. Members, Genesis and Observations
// are required; APIHealth and Sink may be nil.
type Deps struct {
	Members      MemberSource
	Genesis      Genesis
	APIHealth    APIHealth
	Observations Observations
	Sink         VerdictSink
	// Writes, when set, adds the API writer's progress to Status.
	Writes WriteStatus
}

// Server is one member of a zone's Raft group: it replicates the zone state,
// reports this member's observations, and while it leads, admits members,
// verifies and commits reports, computes verdicts and places leadership.
type Server struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	clock   clock.WithTicker
	metrics *metrics

	serverID string
	store    *store.Store
	seq      *seqAllocator

	net       *secureNet
	client    *http.Client
	raft      *raft.Raft
	transport *countingTransport
	boltStore *raftboltdb.BoltStore
	intake    *intake

	// hadState is true when the data dir held Raft state at start; such a
	// member never bootstraps.
	hadState bool
	members  memberIndex
	// membershipMu serializes the leader's configuration changes (joins and
	// reconcile rounds) so each works from the configuration the last left.
	membershipMu sync.Mutex
	// reconcileKick asks the leader's reconcile loop for a round now (a
	// member joined).
	reconcileKick chan struct{}
	// recoveryPending is set while a recovery's first act as leader is to do
	// (finishRecovery).
	recoveryPending atomic.Bool

	// term is the Raft term captured after this member won leadership and
	// passed a Barrier; 0 while it does not lead. Writes out of the zone are
	// fenced by it.
	term    atomic.Uint64
	started chan struct{}
}

// New validates cfg and prepares a Server; Run starts it.
func New(cfg Config, deps Deps) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Members == nil || deps.Genesis == nil {
		return nil, errors.New("raftzone: Deps.Members and Deps.Genesis are required")
	}
	if deps.APIHealth == nil {
		deps.APIHealth = alwaysReachable{}
	}
	if deps.Observations == nil {
		deps.Observations = noObservations{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Network == nil {
		cfg.Network = hostNetwork{ip: net.ParseIP(cfg.AdvertiseAddress)}
	}
	s := &Server{
		cfg:     cfg,
		deps:    deps,
		log:     cfg.Logger.With("node", cfg.Node, "zone", cfg.Zone),
		clock:   cfg.Clock,
		metrics: newMetrics(cfg.Registerer),
		started: make(chan struct{}),

		reconcileKick: make(chan struct{}, 1),
	}
	// The zone port's TLS identity and the authenticated client exist before
	// Run, so the agent can hand the client to its peer probes up front.
	sn, err := newSecureNet(cfg.Network, cfg.Keys, cfg.raftAddress(), cfg.HandshakeTimeout, s.log, s.metrics)
	if err != nil {
		return nil, err
	}
	s.net = sn
	s.client = sn.httpClient()
	return s, nil
}

// Run opens the data dir, joins or founds the zone's cluster and serves until
// ctx ends. Everything it started is stopped before it returns, and committed
// state is on disk.
func (s *Server) Run(ctx context.Context) error {
	if err := s.open(); err != nil {
		s.closeStores()
		return err
	}
	defer s.closeStores()

	if err := s.net.listen(s.cfg.bindAddress()); err != nil {
		return err
	}
	defer s.net.close()

	if err := s.startRaft(); err != nil {
		return err
	}
	defer func() {
		if err := s.raft.Shutdown().Error(); err != nil {
			s.log.Warn("raft shutdown", "err", err)
		}
		s.transport.Close()
	}()

	api := s.peerServer()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := api.Serve(s.net.peerAPI); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("peer API stopped", "err", err)
		}
	}()
	goRun(s.intake.run)
	goRun(s.joinLoop)
	goRun(s.leadershipLoop)
	goRun(s.reportLoop)
	close(s.started)
	s.log.Info("zone member started", "serverID", s.serverID, "address", s.cfg.raftAddress())

	<-ctx.Done()
	s.handOverOnStop()
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	api.Shutdown(shutdownCtx)
	done()
	cancel()
	wg.Wait()
	return nil
}

// handOverOnStop gives leadership to another voter before a leader stops, while
// its transport still serves, so that a rolling upgrade or a drain costs the zone
// one transfer instead of an election timeout without a leader per node.
func (s *Server) handOverOnStop() {
	if s.raft.State() != raft.Leader {
		return
	}
	// Prefer a voter that reaches the apiserver; else raft picks the most
	// caught-up voter.
	target, to := (*raft.ServerID)(nil), "most caught-up voter"
	var addr raft.ServerAddress
	if id, a, node, ok := s.transferTarget(s.clock.Now()); ok {
		sid := raft.ServerID(id)
		target, addr, to = &sid, raft.ServerAddress(a), node
	}
	s.log.Info("stopping as leader; handing leadership over", "to", to, "term", s.raft.CurrentTerm())
	timeout := 2*s.cfg.RaftElectionTimeout + time.Second
	deadline := time.Now().Add(timeout)
	var err error
	for s.raft.State() == raft.Leader && time.Now().Before(deadline) {
		f := s.raft.LeadershipTransfer()
		if target != nil {
			f = s.raft.LeadershipTransferToServer(*target, addr)
		}
		if err = waitFuture(context.Background(), f, time.Until(deadline)); err == nil {
			break
		}
		// raft takes a transfer only while its leader loop waits for one, and
		// one at a time (placement may have one running): ask again shortly.
		if !errors.Is(err, raft.ErrEnqueueTimeout) && !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil && s.raft.State() == raft.Leader {
		s.log.Warn("leadership transfer on stop failed; the zone elects after its election timeout", "err", err)
		s.metrics.transfers.WithLabelValues("stop_failed").Inc()
		return
	}
	s.metrics.transfers.WithLabelValues("stop_ok").Inc()
}

func (s *Server) open() error {
	if err := os.MkdirAll(filepath.Join(s.cfg.DataDir, "raft", "snapshots"), 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", s.cfg.DataDir, err)
	}
	id, err := loadOrCreateServerID(s.cfg.DataDir)
	if err != nil {
		return err
	}
	s.serverID = id
	st, err := store.Open(filepath.Join(s.cfg.DataDir, "state.db"), store.Options{})
	if err != nil {
		return fmt.Errorf("open replicated state in --data-dir %s: %w", s.cfg.DataDir, err)
	}
	s.store = st
	s.seq, err = openSeqAllocator(filepath.Join(s.cfg.DataDir, "report-seq"), s.clock.Now)
	if err != nil {
		return err
	}
	if last := st.LastSeq(s.cfg.Node); last > 0 {
		// A committed seq beyond the reserved block means the seq file was
		// lost; never reuse a seq the zone already saw.
		if err := s.seq.atLeast(last + 1); err != nil {
			return err
		}
	}
	s.intake = newIntake(s)
	return nil
}

func (s *Server) resetStore() error {
	path := s.store.Path()
	if err := s.store.Close(); err != nil {
		return fmt.Errorf("close replicated state: %w", err)
	}
	s.store = nil
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("discard replicated state: %w", err)
	}
	st, err := store.Open(path, store.Options{})
	if err != nil {
		return fmt.Errorf("reopen replicated state: %w", err)
	}
	s.store = st
	return nil
}

func (s *Server) closeStores() {
	if s.boltStore != nil {
		s.boltStore.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
}

func (s *Server) startRaft() error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.serverID)
	rc.HeartbeatTimeout = s.cfg.RaftHeartbeatTimeout
	rc.ElectionTimeout = s.cfg.RaftElectionTimeout
	rc.LeaderLeaseTimeout = s.cfg.RaftLeaderLeaseTimeout
	rc.CommitTimeout = s.cfg.RaftCommitTimeout
	rc.SnapshotInterval = s.cfg.SnapshotInterval
	rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	rc.Logger = newHCLog(s.log)
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
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: addressBook{s},
		Logger:                rc.Logger,
		Stream:                &streamLayer{channelListener: s.net.raft, sn: s.net},
		MaxPool:               3,
		// The pipeline has an open hang bug; one RPC at a time is plenty for
		// a zone's few small commands per second.
		MaxRPCsInFlight: 1,
		Timeout:         10 * time.Second,
	})
	s.transport = &countingTransport{NetworkTransport: nt, rpcs: s.metrics.rpcs}
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
type addressBook struct{ s *Server }

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

// memberIndex caches the member list by server ID, keyed by the store's
// applied index.
type memberIndex struct {
	mu      sync.Mutex
	applied uint64
	byID    map[string]zone.Member
}

func (s *Server) memberByID(id string) (zone.Member, bool) {
	applied, _ := s.store.AppliedIndex()
	c := &s.members
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || c.applied != applied {
		ms, err := s.store.Members()
		if err != nil {
			return zone.Member{}, false
		}
		c.byID = make(map[string]zone.Member, len(ms))
		for _, m := range ms {
			c.byID[m.ServerID] = m
		}
		c.applied = applied
	}
	m, ok := c.byID[id]
	return m, ok
}

// leadershipLoop starts leader duties when this member wins leadership and stops
// them when it loses it.
func (s *Server) leadershipLoop(ctx context.Context) {
	var stopLeading func()
	defer func() {
		if stopLeading != nil {
			stopLeading()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case leader := <-s.raft.LeaderCh():
			if stopLeading != nil {
				stopLeading()
				stopLeading = nil
			}
			if leader {
				stopLeading = s.startLeading(ctx)
			} else {
				s.log.Info("lost zone leadership")
			}
		}
	}
}

// startLeading runs lead until the returned function is called; that function
// also clears the fencing term, so nothing is written under a lost term.
func (s *Server) startLeading(ctx context.Context) func() {
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.lead(lctx)
	}()
	return func() {
		s.term.Store(0)
		cancel()
		<-done
		s.term.Store(0)
		s.metrics.isLeader.Set(0)
	}
}

// lead runs while this member leads. A Barrier first makes sure every entry of
// earlier terms is applied, so verdicts continue from what the previous leader
// committed instead of flapping.
func (s *Server) lead(ctx context.Context) {
	if err := s.raft.Barrier(10 * time.Second).Error(); err != nil {
		s.log.Warn("leader barrier failed; stepping back", "err", err)
		return
	}
	term := s.raft.CurrentTerm()
	if s.raft.State() != raft.Leader {
		return
	}
	s.term.Store(term)
	s.metrics.isLeader.Set(1)
	s.metrics.term.Set(float64(term))
	s.log.Info("leading zone", "term", term)

	if s.deps.Sink != nil {
		if vs, err := s.store.Verdicts(); err == nil {
			s.deps.Sink.Verdicts(term, sortedVerdicts(vs), true)
		}
	}
	var wg sync.WaitGroup
	for _, f := range []func(context.Context, uint64){s.voteLoop, s.reconcileLoop, s.placementLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx, term) }()
	}
	wg.Wait()
}

// Term returns the fencing term while this member leads, or 0.
func (s *Server) Term() uint64 { return s.term.Load() }

// VerifyLeader confirms with a quorum that this member still leads and returns
// the term its writes must carry. Callers write to the Kubernetes API only after
// it succeeds, so a deposed leader cannot overwrite its successor.
func (s *Server) VerifyLeader(ctx context.Context) (uint64, error) {
	term := s.term.Load()
	if term == 0 || s.raft == nil {
		return 0, ErrNotLeader
	}
	if err := waitFuture(ctx, s.raft.VerifyLeader(), s.cfg.RaftElectionTimeout*2); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	if s.raft.CurrentTerm() != term || s.term.Load() != term {
		return 0, ErrNotLeader
	}
	return term, nil
}

// waitFuture waits for f with a watchdog: a raft future that never resolves (a
// stuck transfer, say) must not wedge its caller.
func waitFuture(ctx context.Context, f raft.Future, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("raft operation did not finish within %s", timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServerID returns this member's persistent Raft server ID.
func (s *Server) ServerID() string { return s.serverID }

// CommittedVerdict returns the zone's committed verdict on node while this
// member leads, so the leader can put back an annotation the API lost. ok is
// false on a follower and for a node the zone has not judged.
func (s *Server) CommittedVerdict(node string) (v zone.Verdict, ok bool) {
	// A term is set only once Run has opened the store, and the atomic
	// load orders this read after it.
	if s.term.Load() == 0 {
		return zone.Verdict{}, false
	}
	v, err := s.store.Verdict(node)
	return v, err == nil
}

// Store gives read access to the replicated zone state.
func (s *Server) Store() *store.Store { return s.store }

// Started is closed once Run has opened the data dir and started serving.
func (s *Server) Started() <-chan struct{} { return s.started }

// Leader returns the node name and zone-port address of the current leader, if
// one is known.
func (s *Server) Leader() (node, address string, ok bool) {
	if s.raft == nil {
		return "", "", false
	}
	addr, id := s.raft.LeaderWithID()
	if id == "" {
		return "", "", false
	}
	if m, found := s.memberByID(string(id)); found {
		return m.Node, m.RaftAddress, true
	}
	return "", string(addr), addr != ""
}

// inConfiguration reports whether this member is in the latest Raft
// configuration, i.e. has joined a cluster.
func (s *Server) inConfiguration() bool {
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

// hostNetwork is the production Network: real sockets, outgoing connections
// bound to the advertise address so peers (and firewall rules) see who calls.
type hostNetwork struct{ ip net.IP }

func (h hostNetwork) Listen(network, address string) (net.Listener, error) {
	return net.Listen(network, address)
}

func (h hostNetwork) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: h.ip}}
	return d.DialContext(ctx, network, address)
}

// lastReports reads every member's last committed report; on a read error it
// returns none, which makes every member look stale rather than fresh.
func (s *Server) lastReports() map[string]store.LastReport {
	last, err := s.store.LastReports()
	if err != nil {
		s.log.Error("read last reports", "err", err)
		return nil
	}
	return last
}
