package suite

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/baseline"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// baselineMetricsPort serves the daemons' /metrics, apart from the exchange
// port so that scraping is not counted as exchange traffic.
const baselineMetricsPort = "51006"

var baselineCounters = counterSet{
	bytes: baseline.MetricBytes,
	msgs:  []metricRef{{name: baseline.MetricRequests, match: map[string]string{"direction": "out"}}},
}

// variant is one way of running the baseline.
type variant struct {
	name, label string
	args        []string
	k           float64
	// phase is the longest protocol period; each kill waits a random part
	// of it so that kills do not fall at the same point of every cycle.
	phase         time.Duration
	kills         int
	steady        time.Duration
	settle        time.Duration
	detectTimeout time.Duration
	// lossy runs the lossy-link phase after the kills; onlyLossy skips the
	// steady window and the kills; detectOnly skips the steady window (but
	// waits its settle time).
	lossy, onlyLossy, detectOnly bool
}

// matchedVariant runs SuperEdge's protocol at edgequorum's cadence: check and
// exchange every probe period, vote every vote period, votes valid for the
// vote timeout, probe timeout 1 s like edgequorum's probes.
// At a scaled size every one of these (and the exchange timeout) is
// stretched by the plan's factor.
func matchedVariant(p plan) variant {
	d := func(base time.Duration) string { return scaled(base, p.k).String() }
	return variant{name: "baseline", label: "base", k: p.k, phase: scaled(ProbePeriod, p.k),
		args: []string{"--check-period=" + d(ProbePeriod), "--commun-period=" + d(ProbePeriod),
			"--vote-period=" + d(VotePeriod), "--vote-timeout=" + d(VoteTimeout), "--ping-timeout=" + d(time.Second),
			"--commun-timeout=" + d(2*time.Second)},
		kills: p.kills, steady: p.steady, settle: p.settle, detectTimeout: p.timeout}
}

// defaultsVariant runs it with SuperEdge's own defaults (check 10 s,
// exchange 60 s, vote 10 s, vote timeout 60 s).
// Its settle time lets the formation's write storm (every daemon retrying
// stale updates at 5 QPS) drain before the steady window.
func defaultsVariant(cfg Config) variant {
	d := baseline.DefaultConfig()
	return variant{name: "baseline-defaults", label: "superedge", k: 1, phase: d.CommunPeriod, kills: cfg.DefaultsKills,
		steady: cfg.DefaultsSteady, settle: 2 * d.CheckPeriod, detectTimeout: 5 * time.Minute}
}

// baseNode is one baseline daemon process on a fake kubelet's IP.
type baseNode struct {
	name, ip string
	kubelet  *testcluster.Kubelet
	bin      string
	args     []string
	logPath  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (b *baseNode) metricsAddress() string { return net.JoinHostPort(b.ip, baselineMetricsPort) }

func (b *baseNode) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		return fmt.Errorf("baseline %s already running", b.name)
	}
	if err := os.MkdirAll(filepath.Dir(b.logPath), 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(b.bin, b.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start baseline %s: %w", b.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logFile.Close(); close(done) }()
	b.cmd, b.done = cmd, done
	return nil
}

// kill is a power cut: SIGKILL to the process group.
func (b *baseNode) kill() {
	b.mu.Lock()
	cmd, done := b.cmd, b.done
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

func (b *baseNode) running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// baselineRun is one variant at one zone size.
type baselineRun struct {
	s     *suite
	n     int
	v     variant
	nodes []*baseNode
	names []string
	w     *watcher
	res   *System
	// lossy is the lossy-link phase's figures, one per loss level.
	lossy []LossFigures
}

// runBaseline runs the baseline on the zone's kubelets (edgequorum's agents
// are stopped by then): formation, steady state and kills, measured exactly as
// for edgequorum, then the variant's lossy-link phase when it has one (with
// OnlyLossy, formation and that phase alone). It returns the lossy-link
// figures per loss level apart.
func (s *suite) runBaseline(ctx context.Context, n int, zoneName string, kubelets []*testcluster.Kubelet, v variant) (System, []LossFigures) {
	r := &baselineRun{s: s, n: n, v: v, res: &System{Name: v.name}}
	r.run(ctx, zoneName, kubelets)
	r.res.normalize(v.k)
	return *r.res, r.lossy
}

func (r *baselineRun) run(ctx context.Context, zoneName string, kubelets []*testcluster.Kubelet) {
	s, n, v, res := r.s, r.n, r.v, r.res
	fail := func(phase string, err error) {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", phase, err))
		s.progress(n, v.label, "%s failed: %v", phase, err)
	}
	client := s.cluster.Client()
	if err := waitUntainted(ctx, client, zoneName, 2*time.Minute); err != nil {
		fail("wait for KCM to untaint", err)
	}
	for _, k := range kubelets {
		r.names = append(r.names, k.Name())
	}
	if err := prepareBaselineNodes(ctx, client, zoneName, r.names); err != nil {
		fail("prepare", err)
		return
	}
	w, err := watchZone(ctx, client, zoneName, baselineState)
	if err != nil {
		fail("watch", err)
		return
	}
	defer w.stop()
	r.w = w

	for _, k := range kubelets {
		ip := k.IP().String()
		b := &baseNode{name: k.Name(), ip: ip, kubelet: k, bin: s.cfg.BaselineBinary,
			logPath: filepath.Join(s.cfg.WorkDir, "logs", fmt.Sprintf("n%d", n), v.name, k.Name()+".log")}
		b.args = append([]string{"--node-name=" + k.Name(), "--local-ip=" + ip, "--kubeconfig=" + s.baselineKubeconfig,
			"--metrics-address=" + b.metricsAddress(), "--log-level=info"}, v.args...)
		r.nodes = append(r.nodes, b)
	}
	s.progress(n, v.label, "starting %d edge-health daemons %v", n, v.args)
	started := time.Now()
	defer func() {
		var wg sync.WaitGroup
		for _, b := range r.nodes {
			wg.Go(b.kill)
		}
		wg.Wait()
	}()
	for _, b := range r.nodes {
		if err := b.start(); err != nil {
			fail("start", err)
			return
		}
	}
	res.Ran = true
	formed := true
	if err := w.waitAll(ctx, formTimeout(n, v.k), r.names, zone.Healthy); err != nil {
		// The daemons' traffic and API writes do not wait for every
		// annotation, so the steady window is still measured; kills need a
		// zone whose every node was judged healthy first.
		fail("formation", fmt.Errorf("%w (not healthy: %v)", err, w.notHealthy(r.names)))
		formed = false
	} else {
		res.FormSeconds = time.Since(started).Seconds()
		s.progress(n, v.label, "every node annotated healthy after %.1fs", res.FormSeconds)
	}
	switch {
	case ctx.Err() != nil || v.onlyLossy:
	case v.detectOnly:
		if err := sleep(ctx, v.settle); err != nil {
			fail("settle", err)
		}
	default:
		if err := r.steady(ctx); err != nil {
			fail("steady", err)
		}
	}
	if formed && ctx.Err() == nil && !v.onlyLossy {
		if err := r.kills(ctx); err != nil {
			fail("kills", err)
		}
	}
	if formed && ctx.Err() == nil && v.lossy {
		r.lossy = s.lossy(ctx, n, r.lossTarget())
	}
}

func (r *baselineRun) members() []member {
	var out []member
	for _, b := range r.nodes {
		out = append(out, member{name: b.name, metricsURL: "http://" + b.metricsAddress() + "/metrics",
			pidArg: "--metrics-address=" + b.metricsAddress()})
	}
	return out
}

func (r *baselineRun) steady(ctx context.Context) error {
	if err := sleep(ctx, r.v.settle); err != nil {
		return err
	}
	r.s.progress(r.n, r.v.label, "steady state: sampling %d daemons for %s", r.n, r.v.steady)
	members := r.members()
	before, after, err := steadyWindow(ctx, members, "--metrics-address=", r.v.steady, nil)
	if err != nil {
		return err
	}
	st := summarize(before, after, baselineCounters, "")
	if err := r.s.audit.poll(); err != nil {
		return err
	}
	writes := r.s.audit.writes(BaselineUser, before.at, after.at)
	st.Writes = len(writes)
	for _, e := range writes {
		if e.ObjectRef.Resource == "nodes" {
			st.NodeWrites++
		}
	}
	r.res.Steady = st
	shown := System{Steady: st}
	shown.normalize(r.v.k)
	st = shown.Steady
	r.s.progress(r.n, r.v.label, "steady: node %s/s, zone %s/s, node CPU %.2f s/min, peak RSS %.0f MiB, %.1f writes/min, host CPU %.0f%%",
		humanBytes(st.NodeBytes()), humanBytes(st.ZoneBytes), st.NodeCPU, st.PeakRSS()/(1<<20), st.WritesPerMinute(), 100*st.HostBusy)
	return nil
}

// kills kills and revives a node Kills times, deaths alternating between
// reset and silent (killKind), each kind's figures kept apart.
func (r *baselineRun) kills(ctx context.Context) error {
	start := time.Now()
	var last string
	for i := 1; i <= r.v.kills; i++ {
		kind := killKind(i)
		o := r.killOne(ctx, last, kind)
		last = o.victim
		if o.killed.IsZero() {
			return o.err
		}
		_, annots, recoveries := r.res.deaths(kind)
		annotS := "—"
		if o.detectErr != nil {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("kill %d, %s (%s): %v", i, kind, o.victim, o.detectErr))
		} else {
			*annots = append(*annots, o.detect.Seconds())
			annotS = fmt.Sprintf("%.2fs", o.detect.Seconds()/r.v.k)
		}
		if o.err != nil {
			return o.err
		}
		*recoveries = append(*recoveries, o.recovery.Seconds())
		r.s.progress(r.n, r.v.label, "kill %d/%d %s %s: annotated unhealthy %s; healthy again %.2fs after restart%s",
			i, r.v.kills, kind, o.victim, annotS, o.recovery.Seconds()/r.v.k, o.droppedNote())
	}
	// Let the stragglers of the last round (other daemons still voting on a
	// stale copy) be counted with the phase that caused them.
	if err := sleep(ctx, r.v.settle+2*time.Second); err != nil {
		return err
	}
	end := time.Now()
	if err := r.s.audit.poll(); err != nil {
		return err
	}
	writes := r.s.audit.writes(BaselineUser, start, end, "nodes")
	r.res.Churn = Churn{Seconds: end.Sub(start).Seconds(), Changes: len(r.w.transitions(start, end)),
		WriteAttempts: len(writes), WritesOK: succeeded(writes)}
	return nil
}

// killOne kills a random daemon other than last with its kubelet, after a
// random part of the variant's longest period, times its unhealthy
// annotation, and revives both. A silent death drops the victim's packets
// from just before the kills until just before the revival.
func (r *baselineRun) killOne(ctx context.Context, last string, kind deathKind) killOutcome {
	o := killOutcome{kind: kind}
	var cands []*baseNode
	for _, b := range r.nodes {
		if b.name != last && b.running() {
			cands = append(cands, b)
		}
	}
	victim := cands[r.s.rng.IntN(len(cands))]
	o.victim = victim.name
	if o.err = r.s.jitter(ctx, r.v.phase); o.err != nil {
		return o
	}
	killed := time.Now()
	drop, err := r.s.silence(ctx, kind, victim.kubelet.IP())
	if err != nil {
		o.err = fmt.Errorf("silence %s: %w", victim.name, err)
		return o
	}
	defer drop.remove()
	o.killed = killed
	victim.kill()
	victim.kubelet.Kill()
	if at, err := r.w.waitTransition(ctx, r.v.detectTimeout, victim.name, zone.Unhealthy, o.killed); err != nil {
		o.detectErr = err
	} else {
		o.detect = at.Sub(o.killed)
	}
	if o.err = drop.lift(&o); o.err != nil {
		return o
	}
	t1 := time.Now()
	if err := victim.kubelet.Restart(ctx); err != nil {
		o.err = fmt.Errorf("restart kubelet %s: %w", victim.name, err)
		return o
	}
	if o.err = victim.start(); o.err != nil {
		return o
	}
	healthy, err := r.w.waitTransition(ctx, r.v.detectTimeout, victim.name, zone.Healthy, t1)
	if err != nil {
		o.err = fmt.Errorf("revive %s: %w", victim.name, err)
		return o
	}
	o.healthy, o.recovery = healthy, healthy.Sub(t1)
	return o
}

// lossTarget is this zone for the lossy-link phase.
func (r *baselineRun) lossTarget() lossTarget {
	kill := func(ctx context.Context, last string) killOutcome { return r.killOne(ctx, last, reset) }
	t := lossTarget{label: r.v.label, k: r.v.k, timeout: r.v.detectTimeout, names: r.names, w: r.w, kill: kill}
	for _, b := range r.nodes {
		t.ips = append(t.ips, b.kubelet.IP())
	}
	return t
}
