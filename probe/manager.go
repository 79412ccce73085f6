package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/peerctx"
	"github.com/edgequorum/edgequorum/internal/slots"
)

// Config configures a Manager. Zero fields take the defaults documented on them.
type Config struct {
	// Specs are the probes run against every target. Empty means one kubelet
	// probe (TCP to port 10250), the check every edge node can answer.
	Specs []Spec
	// ScoreLine is the score in (0, 100] a target needs to be OK. Zero means
	// DefaultScoreLine (100: every probe must pass).
	ScoreLine float64
	// AgentClient reaches peers' agents over the authenticated peer
	// connection; agent probes GET https://<host>[:<port>]<path> with it, and
	// its Transport decides how that connection is made. Required (or
	// AgentProber) when a spec has kind agent.
	AgentClient *http.Client
	// AgentProber, if set, runs agent probes instead of an HTTP GET through
	// AgentClient; set one of the two, not both.
	AgentProber Prober
	// Dial opens probe connections (see ProberOptions.Dial); nil means
	// Dialer(nil).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Registerer receives the probe metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock schedules probes and measures their latency. Nil means the real
	// clock; tests inject a fake one.
	Clock Clock
	// Rand returns a number in [0, 1) that places a new worker's first probe
	// within its first period: which slot of the grid it probes in. Nil means
	// math/rand/v2's Float64; tests inject a fixed value.
	Rand func() float64
	// GridPhase is where in a slot the grid of probe start times begins, in
	// [0, 1): the zone's, which the agent derives from the zone's name, so
	// that a zone's members share their slots and zones' slots differ. Zero
	// is the epoch's grid.
	GridPhase float64
	// Logger receives state changes and probe errors. Nil means slog.Default().
	Logger *slog.Logger
	// Confirm is how a first failed probe is confirmed or refuted at once by
	// fresh connections (see Confirm). The zero value is on with the
	// defaults; Connects < 0 turns it off.
	Confirm Confirm
}

// defaultSpecs is what an agent probes when nothing is configured.
func defaultSpecs() []Spec { return []Spec{{Kind: KindKubelet}} }

func (c Config) withDefaults() Config {
	if len(c.Specs) == 0 {
		c.Specs = defaultSpecs()
	}
	if c.ScoreLine == 0 {
		c.ScoreLine = DefaultScoreLine
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first problem with c, naming the field. It applies the
// defaults first, so the zero Config is valid.
func (c Config) Validate() error {
	c = c.withDefaults()
	for i, s := range c.Specs {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("probe: Config.Specs[%d]: %w", i, err)
		}
	}
	if !(c.ScoreLine > 0 && c.ScoreLine <= 100) {
		return fmt.Errorf("probe: Config.ScoreLine: %v is outside (0, 100]", c.ScoreLine)
	}
	if !(c.GridPhase >= 0 && c.GridPhase < 1) {
		return fmt.Errorf("probe: Config.GridPhase: %v is outside [0, 1)", c.GridPhase)
	}
	if _, err := resolveWeights(c.Specs); err != nil {
		return fmt.Errorf("probe: Config.Specs: %w", err)
	}
	if err := c.Confirm.validate(); err != nil {
		return fmt.Errorf("probe: Config.Confirm: %w", err)
	}
	if c.AgentClient != nil && c.AgentProber != nil {
		return errors.New("probe: Config.AgentClient and Config.AgentProber are both set; set one")
	}
	if c.AgentClient == nil && c.AgentProber == nil {
		for i, s := range c.Specs {
			if s.Kind == KindAgent {
				return fmt.Errorf("probe: Config.AgentClient: Specs[%d] %q has kind agent but neither AgentClient nor AgentProber is set: %w",
					i, s.String(), ErrNoAgentTransport)
			}
		}
	}
	return nil
}

// ErrRunning is returned by a second call to Run: a Manager's workers have one
// owner.
var ErrRunning = errors.New("probe: Manager.Run called more than once")

// Manager runs one worker per (target, probe spec), keeps every target's status,
// and signals when a target's judgement changes. Its methods are safe for
// concurrent use.
//
// Targets may be added and removed at any time, before or while Run runs; their
// workers run only while Run does.
type Manager struct {
	cfg        Config // with defaults applied
	confirmCfg Confirm
	confirmIdx int    // the spec whose port confirmations connect to; -1: none
	specs      []Spec // cfg.Specs with defaults applied, for the workers
	names      []string
	checker    *Checker
	probers    []Prober
	metrics    *metrics
	log        *slog.Logger
	changes    chan struct{}

	mu      sync.Mutex
	targets map[string]*target
	runCtx  context.Context // set while Run runs, nil before and after
	ran     bool
	wg      sync.WaitGroup // every worker goroutine
}

// target is one peer under probe. A replaced or removed target is dropped from
// the map; its workers may still report for a moment, and their reports are
// ignored because the map no longer points at them.
type target struct {
	name string
	Target
	ctx    context.Context    // its workers' context; nil until they start
	cancel context.CancelFunc // nil until its workers start
	wg     sync.WaitGroup     // this target's worker and confirmation goroutines
	probes []ProbeStatus
	eval   Evaluation

	// confirming is set while a confirmation of t runs.
	confirming bool
	// silentSince is when the confirmation that found t silent started;
	// zero while t is not judged silent. A success of a probe that started
	// after it clears it.
	silentSince time.Time
	// lastAnswer is when the latest probe of t that succeeded ended.
	lastAnswer time.Time
	// confirmable is set once the probe whose port confirmations use has
	// succeeded on t.
	confirmable bool
}

// TargetStatus is what this node currently thinks of one target.
type TargetStatus struct {
	Host string
	// Known is true once every probe has a thresholded state; until then OK
	// is false and the target should not be reported as failed.
	Known bool
	// OK is Known and Score ≥ the score line.
	OK bool
	// Score is the weighted score, 0..100.
	Score float64
	// Latency is how long the latest probe round took: probes run
	// concurrently, so it is the slowest of each probe's latest latency.
	Latency time.Duration
	// Probes holds one entry per spec, in Config.Specs order.
	Probes []ProbeStatus
	// Silent is set while the target is judged failed because a
	// confirmation's fresh connections all went unanswered (see Confirm),
	// until one of its probes succeeds again.
	Silent bool
}

// ProbeStatus is the state of one probe of one target.
type ProbeStatus struct {
	// Spec is the probe's spec as configured (Spec.String form).
	Spec   string
	Kind   Kind
	Weight float64
	// State is the thresholded state; Unknown until a threshold is first met.
	State Result
	// Last is the latest raw result, and Err why it was not Success.
	Last Result
	Err  error
	// At is when the latest probe started and Latency how long it took; zero
	// before the first probe.
	At      time.Time
	Latency time.Duration
}

// New validates cfg and builds a Manager. It starts nothing; call Run.
func New(cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	checker, err := NewChecker(cfg.Specs, cfg.ScoreLine)
	if err != nil {
		return nil, fmt.Errorf("probe: Config.Specs: %w", err)
	}
	m := &Manager{
		cfg:        cfg,
		confirmCfg: cfg.Confirm.withDefaults(cfg.Specs),
		confirmIdx: confirmSpec(cfg.Specs),
		checker:    checker,
		log:        cfg.Logger,
		changes:    make(chan struct{}, 1),
		targets:    make(map[string]*target),
	}
	for i, s := range cfg.Specs {
		var p Prober
		if s.Kind == KindAgent && cfg.AgentProber != nil {
			p = cfg.AgentProber
		} else if p, err = NewProber(s, ProberOptions{AgentClient: cfg.AgentClient, Dial: cfg.Dial}); err != nil {
			return nil, fmt.Errorf("probe: Config.Specs[%d]: %w", i, err)
		}
		m.probers = append(m.probers, p)
		m.specs = append(m.specs, s.withDefaults())
		m.names = append(m.names, s.String())
	}
	if m.metrics, err = newMetrics(cfg.Registerer, cfg.Specs); err != nil {
		return nil, fmt.Errorf("probe: Config.Registerer: %w", err)
	}
	return m, nil
}

// Checker returns the Checker the Manager judges targets with, for callers that
// want its resolved weights or score line.
func (m *Manager) Checker() *Checker { return m.checker }

// Run starts the workers of every target and blocks until ctx is done. It then
// stops every worker and returns once all of their goroutines have exited.
// It returns nil after a shutdown, or ErrRunning if Run was called before.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.ran {
		m.mu.Unlock()
		return ErrRunning
	}
	m.ran = true
	m.runCtx = ctx
	for _, t := range m.targets {
		m.startLocked(t)
	}
	m.mu.Unlock()

	<-ctx.Done()

	m.mu.Lock()
	// From here on no worker starts, so wg.Wait cannot race with wg.Add.
	m.runCtx = nil
	for _, t := range m.targets {
		if t.cancel != nil {
			t.cancel()
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

// Target is where a peer is probed.
type Target struct {
	// Host is the peer's address (its Node's InternalIP).
	Host string
	// KubeletPort is the port its Node publishes for the kubelet
	// (status.daemonEndpoints.kubeletEndpoint); 0 when unknown. A kubelet
	// probe that names no port of its own connects there, else to 10250.
	KubeletPort int
}

// AddTarget starts probing t under name. Adding a name that exists with the
// same Target changes nothing; with another it replaces the target (a peer
// whose address or kubelet port changed): its old workers stop and its status
// starts over from Unknown. AddTarget returns once the old workers have
// exited, so it must not be called from a Prober.
func (m *Manager) AddTarget(name string, tg Target) {
	m.mu.Lock()
	old := m.targets[name]
	if old != nil && old.Target == tg {
		m.mu.Unlock()
		return
	}
	t := m.newTarget(name, tg)
	m.targets[name] = t
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	if m.runCtx != nil {
		m.startLocked(t)
	}
	m.mu.Unlock()

	m.log.Info("probe target added", "peer", name, "host", tg.Host, "kubeletPort", tg.KubeletPort, "replaced", old != nil)
	m.notify()
	if old != nil {
		old.wg.Wait()
	}
}

// RemoveTarget stops probing name and forgets its status. It returns once the
// target's workers have exited; a probe in flight is cancelled, not awaited. Like
// AddTarget, it must not be called from a Prober.
func (m *Manager) RemoveTarget(name string) {
	m.mu.Lock()
	t := m.targets[name]
	if t != nil {
		delete(m.targets, name)
		if t.cancel != nil {
			t.cancel()
		}
	}
	m.mu.Unlock()
	if t == nil {
		return
	}
	m.log.Info("probe target removed", "peer", name, "host", t.Host)
	m.notify()
	t.wg.Wait()
}

// Status returns the status of the target name, and whether it exists.
func (m *Manager) Status(name string) (TargetStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[name]
	if !ok {
		return TargetStatus{}, false
	}
	return t.status(), true
}

// Statuses returns the status of every target, keyed by name.
func (m *Manager) Statuses() map[string]TargetStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]TargetStatus, len(m.targets))
	for name, t := range m.targets {
		out[name] = t.status()
	}
	return out
}

// Changes returns a channel that receives a value after any target's Known, OK
// or Score changes, and after a target is added, replaced or removed. Signals
// coalesce: one pending value stands for any number of changes, so a receiver
// re-reads Statuses rather than expecting one signal per change. Latency alone
// does not signal; it changes every round.
func (m *Manager) Changes() <-chan struct{} { return m.changes }

func (m *Manager) notify() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

func (m *Manager) newTarget(name string, tg Target) *target {
	t := &target{name: name, Target: tg, probes: make([]ProbeStatus, len(m.specs))}
	weights := m.checker.Weights()
	for i, s := range m.specs {
		t.probes[i] = ProbeStatus{Spec: m.names[i], Kind: s.Kind, Weight: weights[i]}
	}
	t.eval = m.evaluate(t)
	return t
}

// evaluate judges t by its probes' states, and as failed while it is silent.
func (m *Manager) evaluate(t *target) Evaluation {
	e := m.checker.Evaluate(t.states())
	if !t.silentSince.IsZero() {
		e = Evaluation{Known: true}
	}
	return e
}

// startLocked starts t's workers under the running Manager. m.mu must be held
// and m.runCtx set.
func (m *Manager) startLocked(t *target) {
	ctx, cancel := context.WithCancel(WithKubeletPort(peerctx.With(m.runCtx, t.name), t.KubeletPort))
	t.ctx, t.cancel = ctx, cancel
	for i, s := range m.specs {
		w := newWorker(i, s, t.Host, m.probers[i], m.cfg.Clock, slots.Grid{Phase: m.cfg.GridPhase}, m.cfg.Rand, m.metrics,
			func(u probeUpdate) { m.record(t, u) })
		if m.confirms() {
			w.suspect = func() { m.suspect(t, i) }
		}
		m.wg.Add(1)
		t.wg.Add(1)
		w.start(ctx, func() {
			t.wg.Done()
			m.wg.Done()
		})
	}
}

// record stores a worker's update and signals if the target's judgement changed.
func (m *Manager) record(t *target, u probeUpdate) {
	m.mu.Lock()
	if m.targets[t.name] != t {
		m.mu.Unlock()
		return
	}
	p := &t.probes[u.index]
	prevState := p.State
	p.State, p.Last, p.Err, p.At, p.Latency = u.state, u.raw, u.err, u.at, u.latency
	if end := u.at.Add(u.latency); u.raw == Success && end.After(t.lastAnswer) {
		t.lastAnswer = end
	}
	if u.raw == Success && u.index == m.confirmIdx {
		t.confirmable = true
	}
	heard := u.raw == Success && !t.silentSince.IsZero() && !u.at.Before(t.silentSince)
	if heard {
		t.silentSince = time.Time{}
	}
	prev := t.eval
	t.eval = m.evaluate(t)
	eval := t.eval
	confirm := u.raw == Failure && m.startConfirmLocked(t)
	m.mu.Unlock()

	if heard {
		m.log.Info("silent peer answers again", "peer", t.name, "host", t.Host, "probe", m.names[u.index])
	}
	if confirm {
		m.log.Debug("confirming a failed probe with fresh connections", "peer", t.name, "host", t.Host,
			"probe", m.names[u.index], "err", u.err)
	}

	if u.raw != Success {
		m.log.Debug("probe did not succeed", "peer", t.name, "host", t.Host, "probe", m.names[u.index],
			"result", u.raw, "err", u.err)
	}
	if u.state != prevState {
		m.log.Info("probe state changed", "peer", t.name, "host", t.Host, "probe", m.names[u.index],
			"from", prevState, "to", u.state, "err", u.err)
	}
	if eval != prev {
		if eval.Known != prev.Known || eval.OK != prev.OK {
			m.log.Info("peer judgement changed", "peer", t.name, "host", t.Host,
				"known", eval.Known, "ok", eval.OK, "score", eval.Score)
		}
		m.notify()
	}
}

func (t *target) states() []Result {
	s := make([]Result, len(t.probes))
	for i, p := range t.probes {
		s[i] = p.State
	}
	return s
}

// status copies t for a caller; m.mu must be held.
func (t *target) status() TargetStatus {
	st := TargetStatus{
		Host:   t.Host,
		Known:  t.eval.Known,
		OK:     t.eval.OK,
		Score:  t.eval.Score,
		Probes: append([]ProbeStatus(nil), t.probes...),
		Silent: !t.silentSince.IsZero(),
	}
	for _, p := range t.probes {
		st.Latency = max(st.Latency, p.Latency)
	}
	return st
}

// startConfirmLocked starts a confirmation of t after a failed or unanswered
// probe, unless one runs, t is judged silent already, confirmation is off,
// the port it would connect to never answered on t, t is already
// judged failed by its thresholds (a confirmation could add nothing), or its
// workers are not running. m.mu must be held.
func (m *Manager) startConfirmLocked(t *target) bool {
	if !m.confirms() || !t.confirmable || t.confirming || !t.silentSince.IsZero() || t.ctx == nil || m.runCtx == nil ||
		(t.eval.Known && !t.eval.OK) {
		return false
	}
	t.confirming = true
	started := m.cfg.Clock.Now()
	ctx := t.ctx
	m.wg.Add(1)
	t.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer t.wg.Done()
		m.confirmed(t, started, m.confirm(ctx, t))
	}()
	return true
}

// confirms reports whether this Manager confirms suspicions at all.
func (m *Manager) confirms() bool { return !m.confirmCfg.Off() && m.confirmIdx >= 0 }

// suspect starts a confirmation of t when its probe index has had no answer
// for half its timeout.
func (m *Manager) suspect(t *target, index int) {
	m.mu.Lock()
	confirm := m.targets[t.name] == t && m.startConfirmLocked(t)
	m.mu.Unlock()
	if confirm {
		m.log.Debug("confirming a probe with no answer yet with fresh connections", "peer", t.name, "host", t.Host,
			"probe", m.names[index])
	}
}

// confirmed records a confirmation's outcome: t is judged silent if every
// connection went unanswered and no probe of t got an answer after the
// confirmation started (whenever that probe started: an answer, however late,
// proves the box was there after its probe began, and doubt goes to the box).
func (m *Manager) confirmed(t *target, started time.Time, outcome string) {
	m.mu.Lock()
	if m.targets[t.name] != t {
		m.mu.Unlock()
		return
	}
	t.confirming = false
	if outcome == "" {
		m.mu.Unlock()
		return
	}
	m.metrics.confirmations.WithLabelValues(outcome).Inc()
	silent := outcome == confirmSilent && t.lastAnswer.Before(started)
	prev := t.eval
	if silent {
		t.silentSince = started
		t.eval = m.evaluate(t)
	}
	eval := t.eval
	m.mu.Unlock()
	if !silent {
		return
	}
	m.log.Info("peer silent: no fresh connection answered", "peer", t.name, "host", t.Host,
		"connections", m.confirmCfg.Connects, "timeout", m.confirmCfg.Timeout)
	if eval != prev {
		m.notify()
	}
}
