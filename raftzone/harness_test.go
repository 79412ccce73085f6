package raftzone

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/faultnet"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/syncbuf"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
	"github.com/edgequorum/edgequorum/zoneport"
)

// The in-process zone harness: N Servers on 127.a.b.x loopback addresses, joined
// by a faultnet fabric, with simulated probes that fail exactly where a node is
// dead or the fabric is cut.

const testZoneName = "zone-a"

func testKeys(t testing.TB) *zonekeys.Ring {
	t.Helper()
	line, err := zonekeys.GenerateLine("k1")
	if err != nil {
		t.Fatal(err)
	}
	k, err := zonekeys.Parse(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// memGenesis is an in-memory genesis object with an atomic Create.
type memGenesis struct {
	mu          sync.Mutex
	recs        map[string]GenesisRecord
	created     atomic.Int32
	unavailable atomic.Bool
}

func (g *memGenesis) Claim(_ context.Context, z string, rec GenesisRecord) (GenesisRecord, bool, error) {
	if g.unavailable.Load() {
		return GenesisRecord{}, false, ErrGenesisUnavailable
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.recs == nil {
		g.recs = map[string]GenesisRecord{}
	}
	if got, ok := g.recs[z]; ok {
		return got, false, nil
	}
	g.recs[z] = rec
	g.created.Add(1)
	return rec, true, nil
}

// memberList is a MemberSource whose list the test edits.
type memberList struct {
	mu    sync.Mutex
	cands []zoneport.Candidate
	ok    bool
}

func (l *memberList) Candidates() ([]zoneport.Candidate, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.cands), l.ok
}

// register records node's key as its Node registration, as its agent does at
// start.
func (l *memberList) register(node string, pub ed25519.PublicKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.cands {
		if l.cands[i].Node == node {
			l.cands[i].PublicKey = pub
		}
	}
}

func (l *memberList) set(cs []zoneport.Candidate, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cands, l.ok = slices.Clone(cs), ok
}

type apiFlag struct{ down atomic.Bool }

func (a *apiFlag) Reachable() bool { return !a.down.Load() }

// recordingSink keeps every verdict delivered on a member.
type recordingSink struct {
	mu  sync.Mutex
	all []zone.Verdict
}

func (r *recordingSink) Verdicts(term uint64, vs []zone.Verdict, resync bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !resync {
		r.all = append(r.all, vs...)
	}
}

func (r *recordingSink) delivered() []zone.Verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

type testZone struct {
	t       *testing.T
	fabric  *faultnet.Fabric
	keys    *zonekeys.Ring
	genesis *memGenesis
	list    *memberList
	prefix  string
	mu      sync.Mutex
	nodes   map[string]*testNode
	dead    map[string]bool
	tweak   func(*Config)
}

type testNode struct {
	z      *testZone
	name   string
	ip     string
	dir    string
	api    *apiFlag
	sink   *recordingSink
	obs    *simObservations
	srv    *Member
	cancel context.CancelFunc
	done   chan error
	logs   *syncbuf.Buffer
	// portReg holds the metrics of the zone port of the node's current run.
	portReg *prometheus.Registry
}

// simObservations derives a member's probe results from the test's truth: a
// peer is OK unless it is dead or the fabric cuts it off from the checker.
type simObservations struct {
	z    *testZone
	self *testNode
	ch   chan struct{}
}

func (o *simObservations) Results() []zone.Result {
	var out []zone.Result
	for _, c := range o.z.candidates() {
		if c.Node == o.self.name {
			continue
		}
		ok := !o.z.isDead(c.Node) && o.z.fabric.Connected(o.self.ip, c.ProbeAddress)
		score := 0.0
		if ok {
			score = 100
		}
		out = append(out, zone.Result{Peer: c.Node, OK: ok, Score: score, Latency: time.Millisecond})
	}
	return out
}

func (o *simObservations) Changes() <-chan struct{} { return o.ch }

// Down: in the simulation a peer that fails fails every probe.
func (o *simObservations) Down() []string {
	var out []string
	for _, r := range o.Results() {
		if !r.OK {
			out = append(out, r.Peer)
		}
	}
	return out
}

func (o *simObservations) poke() {
	select {
	case o.ch <- struct{}{}:
	default:
	}
}

func randomPrefix(t testing.TB) string {
	t.Helper()
	a, _ := rand.Int(rand.Reader, big.NewInt(250))
	b, _ := rand.Int(rand.Reader, big.NewInt(250))
	return fmt.Sprintf("127.%d.%d.", a.Int64()+2, b.Int64()+1)
}

// newTestZone prepares (but does not start) a zone of n members.
func newTestZone(t *testing.T, n int) *testZone {
	t.Helper()
	z := &testZone{t: t, fabric: faultnet.New(), keys: testKeys(t), genesis: &memGenesis{},
		list: &memberList{ok: true}, prefix: randomPrefix(t), nodes: map[string]*testNode{}, dead: map[string]bool{}}
	var cands []zoneport.Candidate
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		ip := fmt.Sprintf("%s%d", z.prefix, i)
		z.nodes[name] = &testNode{z: z, name: name, ip: ip, dir: filepath.Join(t.TempDir(), name),
			api: &apiFlag{}, sink: &recordingSink{}}
		cands = append(cands, zoneport.Candidate{Node: name, ProbeAddress: ip, RaftAddress: ip + ":9470"})
	}
	z.list.set(cands, true)
	t.Cleanup(z.stopAll)
	return z
}

func (z *testZone) candidates() []zoneport.Candidate { c, _ := z.list.Candidates(); return c }

func (z *testZone) isDead(node string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead[node]
}

func (z *testZone) setDead(node string, dead bool) {
	z.mu.Lock()
	z.dead[node] = dead
	z.mu.Unlock()
	z.pokeAll()
}

func (z *testZone) pokeAll() {
	for _, n := range z.nodes {
		if n.obs != nil {
			n.obs.poke()
		}
	}
}

func testConfig(n *testNode) Config {
	cfg := DefaultConfig()
	cfg.Node, cfg.Zone, cfg.AdvertiseAddress, cfg.DataDir = n.name, testZoneName, n.ip, n.dir
	cfg.Keys = n.z.keys
	cfg.ReportPeriod = 200 * time.Millisecond
	cfg.VotePeriod = 100 * time.Millisecond
	cfg.VoteTimeout = time.Second
	cfg.ReconcilePeriod = 200 * time.Millisecond
	cfg.JoinRetry = 100 * time.Millisecond
	cfg.BatchWindow = 10 * time.Millisecond
	cfg.HeartbeatBatchWindow = 100 * time.Millisecond
	cfg.HandshakeTimeout = 2 * time.Second
	cfg.DeadVoterTimeout = 2 * time.Second
	cfg.APIServerFailTimeout = 2 * time.Second
	cfg.RaftHeartbeatTimeout = 500 * time.Millisecond
	cfg.RaftElectionTimeout = 500 * time.Millisecond
	cfg.RaftLeaderLeaseTimeout = 250 * time.Millisecond
	cfg.Network = n.z.fabric.Host(n.ip)
	if n.z.tweak != nil {
		n.z.tweak(&cfg)
	}
	return cfg
}

// start runs a member; its logs go to the test log only if the test fails.
func (z *testZone) start(name string) *testNode {
	z.t.Helper()
	n := z.nodes[name]
	if n.srv != nil {
		z.t.Fatalf("%s already running", name)
	}
	n.logs = &syncbuf.Buffer{}
	n.obs = &simObservations{z: z, self: n, ch: make(chan struct{}, 1)}
	// Like the agent: the node key (made on first start) is registered on the
	// node's own entry of the member list before the member runs.
	key, err := zoneport.LoadOrCreateNodeKey(n.dir)
	if err != nil {
		z.t.Fatalf("node key of %s: %v", name, err)
	}
	z.list.register(name, key.Public().(ed25519.PublicKey))
	cfg := testConfig(n)
	cfg.Logger = slog.New(slog.NewTextHandler(n.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The port's metrics go to a registry of this run's own, for the tests
	// that read what the port counted.
	n.portReg = prometheus.NewRegistry()
	pcfg := cfg
	pcfg.Registerer = n.portReg
	port, err := NewPort(pcfg, z.list)
	if err != nil {
		z.t.Fatalf("zone port of %s: %v", name, err)
	}
	srv, err := New(cfg, Deps{Members: z.list, Genesis: z.genesis, APIHealth: n.api, Observations: n.obs, Sink: n.sink, Port: port})
	if err != nil {
		z.t.Fatalf("new %s: %v", name, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.srv, n.cancel, n.done = srv, cancel, make(chan error, 1)
	go func() { n.done <- srv.Run(ctx) }()
	select {
	case <-srv.Started():
	case err := <-n.done:
		// Run has returned: stop must not wait for it again.
		n.done <- nil
		z.t.Fatalf("start %s: %v\n---- logs of %s ----\n%s", name, err, name, n.logs.String())
	}
	z.setDead(name, false)
	return n
}

func (z *testZone) startAll() {
	z.t.Helper()
	for _, name := range z.names() {
		z.start(name)
	}
}

// stop shuts a member down cleanly (its data dir survives) and marks it dead
// for everyone's probes.
func (z *testZone) stop(name string) {
	z.t.Helper()
	n := z.nodes[name]
	if n.srv == nil {
		return
	}
	z.setDead(name, true)
	n.cancel()
	if err := <-n.done; err != nil {
		z.t.Errorf("%s stopped with error: %v", name, err)
	}
	if z.t.Failed() {
		z.t.Logf("---- logs of %s ----\n%s", name, n.logs.String())
	}
	n.srv = nil
}

func (z *testZone) stopAll() {
	for _, name := range z.names() {
		z.stop(name)
	}
}

func (z *testZone) names() []string {
	var out []string
	for name := range z.nodes {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

func (z *testZone) running() []*testNode {
	var out []*testNode
	for _, name := range z.names() {
		if n := z.nodes[name]; n.srv != nil {
			out = append(out, n)
		}
	}
	return out
}

// leader returns the single running member that leads with a fencing term.
func (z *testZone) leader() (*testNode, string) {
	var leaders []*testNode
	for _, n := range z.running() {
		if n.srv.Term() != 0 {
			leaders = append(leaders, n)
		}
	}
	if len(leaders) != 1 {
		return nil, fmt.Sprintf("%d leaders", len(leaders))
	}
	return leaders[0], ""
}

func (z *testZone) waitLeader(timeout time.Duration) *testNode {
	z.t.Helper()
	var l *testNode
	poll.Until(z.t, timeout, "one leader", func() (bool, string) {
		var why string
		l, why = z.leader()
		return l != nil, why
	})
	return l
}

// waitConverged waits until every running member is in one configuration with
// the expected voter count, and every running member is in the member list.
func (z *testZone) waitConverged(timeout time.Duration, voters int) *testNode {
	z.t.Helper()
	var l *testNode
	poll.Until(z.t, timeout, "converged zone", func() (bool, string) {
		var why string
		if l, why = z.leader(); l == nil {
			return false, why
		}
		cfg, err := l.srv.configuration()
		if err != nil {
			return false, err.Error()
		}
		nv := 0
		for _, s := range cfg {
			if s.Suffrage == raft.Voter {
				nv++
			}
		}
		members, _ := l.srv.store.Members()
		run := z.running()
		if nv != voters || len(cfg) != len(run) || len(members) != len(run) {
			return false, fmt.Sprintf("%d voters, %d servers, %d members, %d running", nv, len(cfg), len(members), len(run))
		}
		for _, n := range run {
			if _, ok := cfg[n.srv.ServerID()]; !ok {
				return false, n.name + " not in configuration"
			}
			if !n.srv.inConfiguration() {
				return false, n.name + " does not see itself in the configuration"
			}
		}
		return true, ""
	})
	return l
}

// waitVerdicts waits until the leader's committed verdicts match want.
func (z *testZone) waitVerdicts(timeout time.Duration, want map[string]zone.State) {
	z.t.Helper()
	poll.Until(z.t, timeout, fmt.Sprintf("verdicts %v", want), func() (bool, string) {
		l, why := z.leader()
		if l == nil {
			return false, why
		}
		got, err := l.srv.store.Verdicts()
		if err != nil {
			return false, err.Error()
		}
		for node, st := range want {
			if got[node].State != st {
				return false, fmt.Sprintf("%s is %q", node, got[node].State)
			}
		}
		return true, ""
	})
}

// killAndJudge stops the named member as if it died and waits until the rest
// of the zone has judged it unhealthy and every other member healthy.
func (z *testZone) killAndJudge(name string) {
	z.t.Helper()
	z.setDead(name, true)
	z.stop(name)
	want := allHealthy(z.names())
	want[name] = zone.Unhealthy
	z.waitVerdicts(60*time.Second, want)
}

func allHealthy(names []string) map[string]zone.State {
	m := map[string]zone.State{}
	for _, n := range names {
		m[n] = zone.Healthy
	}
	return m
}

func removeAll(t testing.TB, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// portCounter is the value of the zone-port counter name{labels} of n's
// current run (0 when it counted nothing yet).
func portCounter(t testing.TB, n *testNode, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := n.portReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
