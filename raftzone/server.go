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
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = errors.New("not the zone leader")

// ErrRunning is returned by a second Run of a Member: one Member is one zone member
// with one data dir, and its parts cannot start twice.
var ErrRunning = errors.New("raftzone: member already running")

// Member is one member of a zone's Raft group: it replicates the zone state,
// reports this member's observations, and while it leads, admits members,
// verifies and commits reports, computes verdicts and places leadership.
type Member struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	clock   clock.WithTicker
	metrics *metrics
	// leadership holds the term this member leads in; writes out of the zone
	// are fenced by it.
	leadership *Leadership

	serverID string
	store    *store.Store
	// lastZoneLevel is the zone's protocol level last found (release.go),
	// so a change is logged once.
	lastZoneLevel atomic.Uint32
	// cleanStart drops the stores' migration copies once (release.go).
	cleanStart sync.Once
	// viewStore is the view a spare copies from a server (spare.go); spare
	// is set while the readers use it instead of store, viewCl holds its
	// cluster part.
	viewStore *store.Store
	spare     atomic.Bool
	viewCl    atomic.Pointer[viewCluster]
	// lastSync is when (Unix nanoseconds of cfg.Clock) a server last answered
	// this spare with a view.
	lastSync atomic.Int64
	// admittedBy is the zone port address of the leader that admitted this
	// member, where a new spare asks for its first view.
	admittedBy atomic.Pointer[string]
	seq        *seqAllocator
	// sigs remembers the report signatures this member verified (at the
	// intake while it leads), so its replica does not verify them again
	// when it applies their batch.
	sigs *zone.SigMemo

	port      *zoneport.Port
	client    *http.Client
	raft      *raft.Raft
	transport *zoneport.RaftTransport
	boltStore *raftboltdb.BoltStore
	intake    *intake
	// follow decides whom this member follows (set once raft runs); forced
	// counts the elections candidates forced; attest vouches for leaders
	// this member's configuration does not list yet.
	follow *zoneport.FollowGuard
	forced *zoneport.ForcedElectionLog
	attest *attestor
	// stall watches whether the leader this member follows commits its
	// reports (stall.go).
	stall stallWatch
	// handovers paces this member's handovers on cloud loss across its
	// terms (placement.go).
	handovers handoverPacer
	// votes are the members' votes gathered for the term this member leads
	// in (leadervote.go).
	votes leaderVotes
	// matrixAnswers keeps the peer API's matrix answer a second
	// (matrix.go).
	matrixAnswers matrixCache
	// repair is what the leader said its replica lacks of this member's
	// row (reporter.go).
	repair reportRepair

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
	// voteKick asks the leader's vote loop for a tally now: a batch that
	// changed a result has committed.
	voteKick chan struct{}
	// recoveryPending is set while a recovery's first act as leader is to do
	// (finishRecovery).
	recoveryPending atomic.Bool

	running atomic.Bool
	started chan struct{}
}

// sigMemoSize is how many verified report signatures a member remembers: more
// than a zone of 129 reports between the intake and the commit of a batch. A
// signature forgotten is only verified again.
const sigMemoSize = 1024

// New validates cfg and prepares a Member from cfg and the parts in deps; Run
// starts it. Nothing is opened or started here.
func New(cfg Config, deps Deps) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Members == nil || deps.Genesis == nil {
		return nil, errors.New("raftzone: Deps.Members and Deps.Genesis are required")
	}
	cfg = cfg.withDefaults()
	if deps.APIHealth == nil {
		deps.APIHealth = alwaysReachable{}
	}
	if deps.Observations == nil {
		deps.Observations = noObservations{}
	}
	if deps.Port == nil {
		p, err := NewPort(cfg, deps.Members)
		if err != nil {
			return nil, err
		}
		deps.Port = p
	}
	if deps.Leadership == nil {
		deps.Leadership = NewLeadership()
	}
	if err := deps.Leadership.claim(); err != nil {
		return nil, err
	}
	s := &Member{
		cfg:        cfg,
		deps:       deps,
		log:        cfg.Logger.With("node", cfg.Node, "zone", cfg.Zone),
		clock:      cfg.Clock,
		metrics:    newMetrics(cfg.Registerer),
		leadership: deps.Leadership,
		port:       deps.Port,
		client:     deps.Port.HTTPClient(),
		started:    make(chan struct{}),
		sigs:       zone.NewSigMemo(sigMemoSize),

		reconcileKick: make(chan struct{}, 1),
		voteKick:      make(chan struct{}, 1),
	}
	s.intake = newIntake(s)
	s.attest = newAttestor(s)
	s.forced = zoneport.NewForcedElectionLog(func(node string, allowed bool) {
		result := "allowed"
		if !allowed {
			result = "refused"
		}
		s.metrics.forcedElections.WithLabelValues(node, result).Inc()
		s.log.Warn("a voter forced an election: it asked for votes with the leadership-transfer flag, which a leader that stops or loses the cloud asks its target to do; a voter that keeps doing so is a stolen or broken box",
			"peer", node, "result", result)
	})
	return s, nil
}

// Run opens the data dir, joins or founds the zone's cluster and serves until
// ctx ends. Everything it started is stopped before it returns, and committed
// state is on disk.
func (s *Member) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	if err := s.open(); err != nil {
		s.closeStores()
		return err
	}
	defer s.closeStores()

	if err := s.port.Listen(s.cfg.bindAddress()); err != nil {
		return err
	}
	defer s.port.Close()

	if err := s.startRaft(); err != nil {
		return err
	}
	s.follow = s.newFollowGuard()
	// A spare restarted (even during a cloud outage) reads the view it last
	// copied until a server answers again.
	s.spare.Store(s.viewCl.Load() != nil && !s.inConfiguration())
	// From here the zone port knows the pinned members and lets the guard
	// decide on Raft connections.
	s.port.Serve(portMember{s})
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
		if err := api.Serve(s.port.PeerAPI()); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			s.log.Error("peer API stopped", "err", err)
		}
	}()
	goRun(s.intake.run)
	goRun(s.joinLoop)
	goRun(s.leadershipLoop)
	goRun(s.reportLoop)
	goRun(s.spareLoop)
	goRun(s.attest.run)
	goRun(s.settleLoop)
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

func (s *Member) open() error {
	if err := os.MkdirAll(filepath.Join(s.cfg.DataDir, "raft", "snapshots"), 0o700); err != nil {
		return fmt.Errorf("--data-dir %s: %w", s.cfg.DataDir, err)
	}
	// NewPort read (or made) the server ID and handed it to the port.
	s.serverID = s.port.ServerID()
	st, err := store.Open(filepath.Join(s.cfg.DataDir, "state.db"), s.replicaOptions())
	if err != nil {
		return fmt.Errorf("open replicated state in --data-dir %s: %w", s.cfg.DataDir, err)
	}
	s.store = st
	s.metrics.replica.Store(st)
	if s.viewStore, err = store.Open(filepath.Join(s.cfg.DataDir, "view.db"), store.Options{Level: s.level(), Release: s.announcement().Release}); err != nil {
		return fmt.Errorf("open the spare's zone view in --data-dir %s: %w", s.cfg.DataDir, err)
	}
	for _, st := range []*store.Store{s.store, s.viewStore} {
		if baks := st.MigrationBackups(); len(baks) > 0 {
			s.log.Info("the data dir is of an earlier release; migrated it, keeping a copy until this member starts cleanly",
				"file", st.Path(), "copies", baks)
		}
	}
	s.loadViewCluster()
	s.seq, err = openSeqAllocator(filepath.Join(s.cfg.DataDir, "report-seq"), s.clock.Now)
	if err != nil {
		return err
	}
	if last := st.LastSeq(s.cfg.Node); last > 0 {
		// A committed seq beyond the reserved block means the seq file was
		// lost; never reuse a seq the zone already saw. The view store's
		// copy does not count: a server could claim any seq there and lock
		// this member out, and the seq file alone covers a spare.
		if err := s.seq.atLeast(last + 1); err != nil {
			return err
		}
	}
	return nil
}

// replicaOptions are the options of this member's replica: it re-checks every
// member list against its own view of the cluster and every verdict against
// the committed evidence, with this member's own vote timeout as the longest
// a leader may use.
func (s *Member) replicaOptions() store.Options {
	return store.Options{SigMemo: s.sigs, Witness: &clusterWitness{s: s}, MaxVoteTimeout: s.cfg.VoteTimeout,
		Voters: s.configurationVoters, Level: s.level(), Release: s.announcement().Release}
}

// configurationVoters is the voters' server IDs of raft's latest
// configuration, for the replica's check of a recovery's verdicts. raft serves
// it from memory; before raft runs there is none.
func (s *Member) configurationVoters() (map[string]bool, bool) {
	if s.raft == nil {
		return nil, false
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		return nil, false
	}
	out := make(map[string]bool, len(servers))
	for _, srv := range servers {
		if srv.Suffrage == raft.Voter {
			out[string(srv.ID)] = true
		}
	}
	return out, true
}

func (s *Member) resetStore() error {
	path := s.store.Path()
	if err := s.store.Close(); err != nil {
		return fmt.Errorf("close replicated state: %w", err)
	}
	s.store = nil
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("discard replicated state: %w", err)
	}
	st, err := store.Open(path, s.replicaOptions())
	if err != nil {
		return fmt.Errorf("reopen replicated state: %w", err)
	}
	s.store = st
	s.metrics.replica.Store(st)
	return nil
}

func (s *Member) closeStores() {
	if s.boltStore != nil {
		s.boltStore.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.viewStore != nil {
		s.viewStore.Close()
	}
}

// ServerID returns this member's persistent Raft server ID, read from the
// data dir when Run starts; empty before.
func (s *Member) ServerID() string {
	if !s.isStarted() {
		return ""
	}
	return s.serverID
}

// Started is closed once Run has opened the data dir and started serving.
func (s *Member) Started() <-chan struct{} { return s.started }

// isStarted reports whether Run has started Raft; what Run set up before is
// visible to the caller once it returns true.
func (s *Member) isStarted() bool {
	select {
	case <-s.started:
		return true
	default:
		return false
	}
}
