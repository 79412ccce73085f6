package suite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/zone"
)

// oursCounters are edgequorum's metric names. Messages sent are Raft RPCs,
// peer-API calls (reports, joins) and agent probes, all on the zone port.
var oursCounters = counterSet{
	bytes: "edgequorum_transport_bytes_total",
	msgs: []metricRef{
		{name: "edgequorum_raft_rpcs_sent_total"},
		{name: "edgequorum_transport_peer_requests_total", match: map[string]string{"direction": "out"}},
		{name: "edgequorum_probe_results_total", match: map[string]string{"kind": "agent"}},
	},
}

const (
	applyMetric    = "edgequorum_raft_apply_duration_seconds"
	isLeaderMetric = "edgequorum_raft_is_leader"
	detectTimeout  = 90 * time.Second
)

// oursRun is edgequorum at one zone size.
type oursRun struct {
	s     *suite
	p     plan
	n     int
	zone  string
	z     *zonerun.Zone
	w     *watcher
	res   *System
	names []string
	// lossy is the lossy-link phase's figures, one per loss level.
	lossy []LossFigures
	// started is how many of z's agents (in order) are meant to run while
	// the zone forms: all, or the batches a staggered start has reached.
	started atomic.Int64
}

// runOurs starts a zone of real agent processes on n fresh fake kubelets and
// runs every phase (with OnlyLossy, the lossy-link phase alone). It returns
// the zone (agents stopped, kubelets alive) for the baseline to reuse, or nil
// when no nodes could be made, and the lossy-link figures per loss level.
func (s *suite) runOurs(ctx context.Context, n int, zoneName, dataDir string, p plan) (*zonerun.Zone, System, []LossFigures) {
	r := &oursRun{s: s, p: p, n: n, zone: zoneName, res: &System{Name: "edgequorum"}}
	z := r.run(ctx, dataDir)
	r.res.normalize(p.k)
	return z, *r.res, r.lossy
}

func (r *oursRun) run(ctx context.Context, dataDir string) *zonerun.Zone {
	s, n, zoneName, p, res := r.s, r.n, r.zone, r.p, r.res
	fail := func(phase string, err error) {
		res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", phase, err))
		s.progress(n, "ours", "%s failed: %v", phase, err)
	}
	w, err := watchZone(ctx, s.cluster.Client(), zoneName, oursState)
	if err != nil {
		fail("watch", err)
		return nil
	}
	defer w.stop()
	r.w = w

	s.progress(n, "ours", "starting %d agents", n)
	started := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(n)*time.Second)
	z, err := zonerun.Start(startCtx, s.cluster, zonerun.Options{
		Zone: zoneName, Nodes: n, NodePrefix: fmt.Sprintf("n%d", n),
		Binary: filepath.Join(s.cfg.BinDir, "edgequorum"), Dir: filepath.Join(dataDir, "ours"),
		// Info, not zonerun's debug: a hundred agents logging every probe
		// would measure the log writer.
		AgentArgs: append(append([]string{"--log-level=info", profileArg}, agentTimers(p.k)...), s.cfg.AgentArgs...),
		AgentEnv:  agentEnv(s.cfg.HeapProfiles),
	})
	cancel()
	if err != nil {
		fail("start", err)
		return nil
	}
	r.z = z
	defer stopAll(z)
	for _, a := range z.Agents() {
		r.names = append(r.names, a.Name)
	}
	res.Ran = true
	r.started.Store(int64(n))
	formCtx, stopWatch := watchExit(ctx, time.Second, r.exited)
	defer stopWatch()
	if n > staggerAbove {
		if err := r.stagger(formCtx); err != nil {
			if cause := context.Cause(formCtx); errors.Is(cause, errAgentExited) {
				fail("staggered start", cause)
				return z
			}
			fail("staggered start", err)
		}
	}
	err = w.waitAll(formCtx, formTimeout(n, p.k), r.names, zone.Healthy)
	stopWatch()
	if err != nil {
		if cause := context.Cause(formCtx); errors.Is(cause, errAgentExited) {
			err = cause
		}
		fail("formation", fmt.Errorf("%w (not healthy: %v)", err, w.notHealthy(r.names)))
		return z
	}
	res.FormSeconds = time.Since(started).Seconds()
	s.progress(n, "ours", "zone formed: %d healthy verdicts written in %.1fs", n, res.FormSeconds)

	type phase struct {
		name string
		run  func(context.Context) error
	}
	var phases []phase
	switch {
	case s.cfg.DetectOnly:
		// The settle time the steady window would have had: start-up work
		// (joins, promotions) is not what a death is detected against.
		phases = []phase{{"kills", func(ctx context.Context) error {
			if err := sleep(ctx, p.settle); err != nil {
				return err
			}
			if err := r.kills(ctx); err != nil {
				return err
			}
			return r.stalls(ctx)
		}}}
	case !s.cfg.OnlyLossy:
		phases = []phase{{"steady", r.steady}, {"kills", r.kills}, {"failover", r.failovers}, {"cloud cut", r.cut}}
	}
	if s.cfg.lossAt(n) {
		phases = append(phases, phase{"lossy links", func(ctx context.Context) error {
			r.lossy = s.lossy(ctx, n, r.lossTarget())
			return nil
		}})
	}
	for _, ph := range phases {
		if ctx.Err() != nil {
			break
		}
		if err := ph.run(ctx); err != nil {
			fail(ph.name, err)
		}
	}
	return z
}

func (r *oursRun) members() []member {
	var out []member
	for _, a := range r.z.Agents() {
		out = append(out, member{name: a.Name, metricsURL: "http://" + a.StatusAddress() + "/metrics",
			pidArg: "--status-address=" + a.StatusAddress()})
	}
	return out
}

// steady samples every agent over the steady window.
func (r *oursRun) steady(ctx context.Context) error {
	members := r.members()
	notQuiet, err := r.s.settle(ctx, r.n, "ours", members, r.p.settle, scaled(QuietTimeout, r.p.k), scaled(LeaseQuietRenew, r.p.k))
	if err != nil {
		return err
	}
	if notQuiet != nil {
		// Measured all the same, busy: the report names the error.
		r.res.Errors = append(r.res.Errors, "steady: "+notQuiet.Error())
	}
	r.s.progress(r.n, "ours", "steady state: sampling %d agents for %s", r.n, r.p.steady)
	before, after, err := steadyWindow(ctx, members, "--status-address=", r.p.steady, nil)
	if err != nil {
		return err
	}
	leader := ""
	for name, ms := range after.members {
		if ms.err == nil && ms.metrics.Sum(isLeaderMetric, nil) == 1 {
			leader = name
		}
	}
	if leader == "" {
		return fmt.Errorf("no agent reported %s=1 at the end of the window", isLeaderMetric)
	}
	st := summarize(before, after, oursCounters, leader)
	buckets := histogramDelta(before.members[leader], after.members[leader], applyMetric, map[string]string{"command": "reports"})
	st.CommitP50, st.CommitP99 = quantile(0.5, buckets), quantile(0.99, buckets)
	if err := r.s.audit.poll(); err != nil {
		return err
	}
	writes := r.s.audit.writes(zonerun.AgentUser, before.at, after.at)
	st.Writes = len(writes)
	for _, e := range writes {
		switch e.ObjectRef.Resource {
		case "nodes":
			st.NodeWrites++
		case "leases":
			st.LeaseWrites++
		}
	}
	r.res.Steady = st
	if a := r.z.Agent(leader); a != nil {
		dir := filepath.Join(r.s.cfg.WorkDir, "profiles")
		if _, err := saveProfiles(ctx, a.StatusAddress(), dir, fmt.Sprintf("N%d-leader", r.n), r.s.cfg.HeapProfiles); err != nil {
			r.s.progress(r.n, "ours", "leader's profiles: %v", err)
		}
	}
	shown := System{Steady: st}
	shown.normalize(r.p.k)
	st = shown.Steady
	r.s.progress(r.n, "ours", "steady: leader %s %s/s, node %s/s, zone %s/s, leader CPU %.1f%%, peak RSS %.0f MiB, %.1f writes/min, commit p99 %.1fms",
		leader, humanBytes(st.LeaderBytes()), humanBytes(st.NodeBytes()), humanBytes(st.ZoneBytes),
		100*st.LeaderCPUShare(), st.PeakRSS()/(1<<20), st.WritesPerMinute(), 1000*st.CommitP99)
	return nil
}

// kills kills a random follower (agent and kubelet) and brings it back, Kills
// times, timing the unhealthy commit, the unhealthy annotation and the healthy
// annotation after the restart. Deaths alternate between reset and silent
// (killKind), each kind's figures kept apart.
func (r *oursRun) kills(ctx context.Context) error {
	start := time.Now()
	var last string
	for i := 1; i <= r.p.kills; i++ {
		kind := killKind(i)
		o := r.killOne(ctx, last, kind)
		last = o.victim
		if o.killed.IsZero() {
			return o.err
		}
		commits, annots, recoveries := r.res.deaths(kind)
		commitS, annotS := "—", "—"
		if o.detectErr != nil {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("kill %d, %s (%s): %v", i, kind, o.victim, o.detectErr))
		} else {
			*annots = append(*annots, o.detect.Seconds())
			annotS = fmt.Sprintf("%.2fs", o.detect.Seconds()/r.p.k)
			if o.commit > 0 {
				*commits = append(*commits, o.commit.Seconds())
				commitS = fmt.Sprintf("%.2fs", o.commit.Seconds()/r.p.k)
			}
		}
		if o.err != nil {
			return o.err
		}
		*recoveries = append(*recoveries, o.recovery.Seconds())
		r.s.progress(r.n, "ours", "kill %d/%d %s %s: unhealthy committed %s, annotated %s; healthy again %.2fs after restart%s",
			i, r.p.kills, kind, o.victim, commitS, annotS, o.recovery.Seconds()/r.p.k, o.droppedNote())
	}
	end := time.Now()
	time.Sleep(500 * time.Millisecond) // writes in flight at end
	if err := r.s.audit.poll(); err != nil {
		return err
	}
	writes := r.s.audit.writes(zonerun.AgentUser, start, end, "nodes")
	r.res.Churn = Churn{Seconds: end.Sub(start).Seconds(), Changes: len(r.w.transitions(start, end)),
		WriteAttempts: len(writes), WritesOK: succeeded(writes)}
	return nil
}

// killOne kills a random follower other than last (agent and kubelet) after
// a random part of a probe period, times its unhealthy annotation and commit,
// and revives it. A silent death drops the victim's packets from just before
// the kills until just before the revival.
func (r *oursRun) killOne(ctx context.Context, last string, kind deathKind) killOutcome {
	o := killOutcome{kind: kind}
	leader, err := r.leader(ctx)
	if err != nil {
		o.err = err
		return o
	}
	victim := r.pick(leader.Name, last)
	o.victim = victim.Name
	if o.err = r.s.jitter(ctx, scaled(ProbePeriod, r.p.k)); o.err != nil {
		return o
	}
	killed := time.Now()
	drop, err := r.s.silence(ctx, kind, victim.Kubelet.IP())
	if err != nil {
		o.err = fmt.Errorf("silence %s: %w", victim.Name, err)
		return o
	}
	defer drop.remove()
	o.killed = killed
	victim.Kill()
	victim.Kubelet.Kill()
	annotated, err := r.w.waitTransition(ctx, r.p.timeout, victim.Name, zone.Unhealthy, o.killed)
	if err != nil {
		o.detectErr = err
	} else {
		o.detect = annotated.Sub(o.killed)
		if at, ok := r.decidedAt(ctx, victim.Name, zone.Unhealthy, o.killed); ok {
			o.commit = at.Sub(o.killed)
		}
	}
	if o.err = drop.lift(&o); o.err != nil {
		return o
	}
	healthy, err := r.revive(ctx, victim)
	if err != nil {
		o.err = fmt.Errorf("revive %s: %w", victim.Name, err)
		return o
	}
	o.healthy, o.recovery = healthy.at, healthy.after
	return o
}

// lossTarget is this zone for the lossy-link phase.
func (r *oursRun) lossTarget() lossTarget {
	kill := func(ctx context.Context, last string) killOutcome { return r.killOne(ctx, last, reset) }
	t := lossTarget{label: "ours", k: r.p.k, timeout: r.p.timeout, names: r.names, w: r.w, kill: kill}
	for _, a := range r.z.Agents() {
		t.ips = append(t.ips, a.Kubelet.IP())
	}
	return t
}

// revived is when a restarted node was annotated healthy again, and how long
// after its restart.
type revived struct {
	at    time.Time
	after time.Duration
}

// revive restarts a killed node's kubelet and agent and waits for its healthy
// annotation.
func (r *oursRun) revive(ctx context.Context, a *zonerun.Agent) (revived, error) {
	t1 := time.Now()
	if err := a.Kubelet.Restart(ctx); err != nil {
		return revived{}, err
	}
	if err := a.Start(); err != nil {
		return revived{}, err
	}
	at, err := r.w.waitTransition(ctx, r.p.timeout, a.Name, zone.Healthy, t1)
	if err != nil {
		return revived{}, err
	}
	return revived{at: at, after: at.Sub(t1)}, nil
}

// failovers kills the leader Failovers times.
func (r *oursRun) failovers(ctx context.Context) error {
	for i := 1; i <= r.p.failovers; i++ {
		if err := r.failover(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (r *oursRun) failover(ctx context.Context, i int) error {
	leader, err := r.leader(ctx)
	if err != nil {
		return err
	}
	st, err := leader.Status(ctx)
	if err != nil {
		return fmt.Errorf("leader status: %w", err)
	}
	var voters []*zonerun.Agent
	for _, m := range st.Members {
		if m.Suffrage == string(zone.Voter) && m.Node != leader.Name {
			if a := r.z.Agent(m.Node); a != nil && a.Running() {
				voters = append(voters, a)
			}
		}
	}
	if len(voters) == 0 {
		return fmt.Errorf("leader %s reports no other voters", leader.Name)
	}
	t0 := time.Now()
	leader.Kill()
	leader.Kubelet.Kill()
	readyS, writeS, verdictS := "—", "—", "—"
	ready, who, err := waitNewLeader(ctx, voters, scaled(30*time.Second, r.p.k))
	if err != nil {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("failover %d: %v", i, err))
	} else {
		d := ready.Sub(t0).Seconds()
		r.res.Failover = append(r.res.Failover, d)
		readyS = fmt.Sprintf("%.2fs", d/r.p.k)
	}
	verdict, verr := r.w.waitTransition(ctx, r.p.timeout, leader.Name, zone.Unhealthy, t0)
	if verr == nil {
		d := verdict.Sub(t0).Seconds()
		r.res.FailoverVerdict = append(r.res.FailoverVerdict, d)
		verdictS = fmt.Sprintf("%.2fs", d/r.p.k)
	} else {
		r.res.Errors = append(r.res.Errors, fmt.Sprintf("failover %d: %v", i, verr))
	}
	if at, ok := r.firstWrite(ctx, t0, scaled(2*LeaseRenew+5*time.Second, r.p.k)); ok {
		d := at.Sub(t0).Seconds()
		r.res.FailoverWrite = append(r.res.FailoverWrite, d)
		writeS = fmt.Sprintf("%.2fs", d/r.p.k)
	}
	if _, err := r.revive(ctx, leader); err != nil {
		return fmt.Errorf("revive old leader %s: %w", leader.Name, err)
	}
	r.s.progress(r.n, "ours", "failover %d/%d: %s killed, %s leads after %s, first write %s, old leader judged unhealthy %s",
		i, r.p.failovers, leader.Name, who, readyS, writeS, verdictS)
	return nil
}

// waitNewLeader polls the surviving voters' /metrics until one has won and
// passed its Barrier: edgequorum_raft_is_leader is set only then, when the
// member holds the fencing term its writes carry.
func waitNewLeader(ctx context.Context, voters []*zonerun.Agent, timeout time.Duration) (time.Time, string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		type hit struct {
			at   time.Time
			name string
		}
		found := make(chan hit, len(voters))
		var wg sync.WaitGroup
		for _, v := range voters {
			wg.Go(func() {
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				defer cancel()
				s, err := scrape.Fetch(pctx, "http://"+v.StatusAddress()+"/metrics")
				if err == nil && s.Sum(isLeaderMetric, nil) == 1 {
					found <- hit{s.At, v.Name}
				}
			})
		}
		wg.Wait()
		close(found)
		if h, ok := <-found; ok {
			return h.at, h.name, nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return time.Time{}, "", err
		}
	}
	return time.Time{}, "", fmt.Errorf("no surviving voter led within %s", timeout)
}

// firstWrite is when the apiserver received the agents' first write after t0:
// with the old leader dead, the new leader's.
func (r *oursRun) firstWrite(ctx context.Context, t0 time.Time, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := r.s.audit.poll(); err == nil {
			if ws := r.s.audit.writes(zonerun.AgentUser, t0, time.Now().Add(time.Hour)); len(ws) > 0 {
				first := ws[0].Received
				for _, e := range ws {
					if e.Received.Before(first) {
						first = e.Received
					}
				}
				return first, true
			}
		}
		if sleep(ctx, 200*time.Millisecond) != nil {
			break
		}
	}
	return time.Time{}, false
}

// cut takes every kubelet of the zone off the cloud for Cut, and counts the
// non-healthy verdicts written meanwhile: the zone still sees every node, so
// there must be none, whatever KCM does to the nodes.
func (r *oursRun) cut(ctx context.Context) error {
	r.s.progress(r.n, "ours", "cloud cut: %d kubelets stop renewing for %s", r.n, r.p.cut)
	t0 := time.Now()
	for _, a := range r.z.Agents() {
		a.Kubelet.Cut()
	}
	err := sleep(ctx, r.p.cut)
	for _, a := range r.z.Agents() {
		if rerr := a.Kubelet.Reconnect(context.Background()); rerr != nil {
			r.res.Errors = append(r.res.Errors, fmt.Sprintf("reconnect %s: %v", a.Name, rerr))
		}
	}
	if err != nil {
		return err
	}
	// Give a verdict that was in flight when the cut ended time to land.
	if err := sleep(ctx, scaled(VotePeriod, r.p.k)+2*time.Second); err != nil {
		return err
	}
	end := time.Now()
	r.res.CutRan, r.res.CutSeconds = true, r.p.cut.Seconds()
	for _, t := range r.w.transitions(t0, end) {
		if t.To != zone.Healthy {
			r.res.FalseVerdicts++
		}
	}
	if err := r.s.audit.poll(); err != nil {
		return err
	}
	r.res.CutWrites = len(r.s.audit.writes(zonerun.AgentUser, t0, end, "nodes"))
	r.s.progress(r.n, "ours", "cloud cut over: %d false verdicts, %d node writes", r.res.FalseVerdicts, r.res.CutWrites)
	return nil
}

// leader finds the agent that leads, asking one follower who it follows rather
// than every agent; it retries while an election runs.
func (r *oursRun) leader(ctx context.Context) (*zonerun.Agent, error) {
	deadline := time.Now().Add(scaled(30*time.Second, r.p.k))
	for {
		for _, a := range r.z.Agents() {
			if !a.Running() {
				continue
			}
			st, err := a.Status(ctx)
			if err != nil || st.Leader == "" {
				continue
			}
			l := r.z.Agent(st.Leader)
			if l == nil || !l.Running() {
				break
			}
			if ls, err := l.Status(ctx); err == nil && ls.State == "Leader" {
				return l, nil
			}
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no leader found within %s", scaled(30*time.Second, r.p.k))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// pick chooses a running follower at random, not the last victim unless
// only one other would be left: with two followers that rule alternates them,
// and with the kinds of death alternating too each kind would always hit the
// same node.
func (r *oursRun) pick(leader, last string) *zonerun.Agent {
	var all, cands []*zonerun.Agent
	for _, a := range r.z.Agents() {
		if a.Name != leader && a.Running() {
			all = append(all, a)
			if a.Name != last {
				cands = append(cands, a)
			}
		}
	}
	if len(cands) < 2 {
		cands = all
	}
	return cands[r.s.rng.IntN(len(cands))]
}

// decidedAt reads the committed verdict's decision time from the leader.
func (r *oursRun) decidedAt(ctx context.Context, node string, state zone.State, after time.Time) (time.Time, bool) {
	l, err := r.leader(ctx)
	if err != nil {
		return time.Time{}, false
	}
	st, err := l.Status(ctx)
	if err != nil {
		return time.Time{}, false
	}
	for _, v := range st.Verdicts {
		if v.Node == node && v.State == state && v.DecidedAt.After(after) {
			return v.DecidedAt, true
		}
	}
	return time.Time{}, false
}

// stopAll kills every agent at once: a hundred sequential graceful stops would
// take minutes and measure nothing.
func stopAll(z *zonerun.Zone) {
	var wg sync.WaitGroup
	for _, a := range z.Agents() {
		wg.Go(a.Kill)
	}
	wg.Wait()
}

// staggerAbove is the zone size from which agents join in batches. A
// hundred agents started at once on two cores all handshake, join and probe
// in the same seconds; on real hardware each has its own machine.
const staggerAbove = 33

// stagger stops all but the first batch of agents right after zonerun started
// them and brings the rest back a batch at a time, each batch once the zone
// has admitted the previous ones. Agents are kill -9 safe by design, so the
// early stop costs nothing but a restart.
func (r *oursRun) stagger(ctx context.Context) error {
	const batch = 16
	agents := r.z.Agents()
	r.started.Store(batch)
	var wg sync.WaitGroup
	for _, a := range agents[batch:] {
		wg.Go(a.Kill)
	}
	wg.Wait()
	for i := batch; i < len(agents); i += batch {
		if err := r.waitMembers(ctx, i); err != nil {
			return err
		}
		for _, a := range agents[i:min(i+batch, len(agents))] {
			if err := a.Start(); err != nil {
				return err
			}
		}
		r.started.Store(int64(min(i+batch, len(agents))))
		r.s.progress(r.n, "ours", "staggered start: %d/%d agents running", min(i+batch, len(agents)), len(agents))
	}
	return nil
}

// waitMembers waits until the leader's configuration holds want members.
func (r *oursRun) waitMembers(ctx context.Context, want int) error {
	deadline := time.Now().Add(scaled(time.Minute, r.p.k))
	for time.Now().Before(deadline) {
		if l, err := r.leader(ctx); err == nil {
			if st, err := l.Status(ctx); err == nil {
				joined := 0
				for _, m := range st.Members {
					if m.Role != "" {
						joined++
					}
				}
				if joined >= want {
					return nil
				}
			}
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return fmt.Errorf("fewer than %d members joined within %s", want, scaled(time.Minute, r.p.k))
}

// formTimeout bounds formation: generous, since a hundred agents join one at
// a time, but capped so that a zone that cannot form costs minutes, not hours.
func formTimeout(n int, k float64) time.Duration {
	return min(scaled(3*time.Minute+time.Duration(n)*2*time.Second, k), 15*time.Minute)
}

// errAgentExited ends a formation wait early: an agent that exits while its
// zone forms (a flag it refuses, a crash) will not come back, and waiting
// out the formation timeout (up to 15 minutes) would only hide why.
var errAgentExited = errors.New("an agent exited while its zone formed")

// exited returns errAgentExited, naming the agent and its last log lines,
// when an agent meant to run (r.started) is not running.
func (r *oursRun) exited() error {
	for _, a := range r.z.Agents()[:r.started.Load()] {
		if !a.Running() {
			return fmt.Errorf("%w: %s: %s", errAgentExited, a.Name, a.NoticeTail(2))
		}
	}
	return nil
}

// watchExit returns a context that is cancelled, with check's error as its
// cause, once check (called every period) returns one; stop ends the watch
// and is safe to call twice.
func watchExit(ctx context.Context, period time.Duration, check func() error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := check(); err != nil {
				cancel(err)
				return
			}
		}
	}()
	// A cancel after the first is a no-op, so stop may run twice.
	return ctx, func() { cancel(nil) }
}

// agentTimers are the agent flags that slow every protocol timer by k; none at
// k = 1, so unscaled sizes run the shipped defaults untouched.
func agentTimers(k float64) []string {
	if k == 1 {
		return nil
	}
	d := func(base time.Duration) string { return scaled(base, k).String() }
	timing := fmt.Sprintf("period=%s,timeout=%s,failure-threshold=%d", d(ProbePeriod), d(ProbeTimeout), FailureThreshold)
	return []string{
		fmt.Sprintf("--probe=agent:port=%d,weight=0.5,%s", zonerun.PeerPort, timing),
		"--probe=kubelet:weight=0.5," + timing,
		"--report-period=" + d(2*time.Second),
		"--vote-period=" + d(VotePeriod),
		"--vote-timeout=" + d(VoteTimeout),
		"--report-batch-window=" + d(BatchWindow),
		"--confirm-gap=" + d(probe.DefaultConfirmGap),
		"--heartbeat-batch-window=" + d(1800*time.Millisecond),
		"--raft-heartbeat-timeout=" + d(time.Second),
		"--raft-election-timeout=" + d(time.Second),
		"--raft-leader-lease-timeout=" + d(time.Second),
		"--raft-commit-timeout=" + d(2*time.Second),
		"--zone-lease-renew=" + d(LeaseRenew),
		// Scaled with the renewal, which it must not fall below.
		"--zone-lease-quiet-renew=" + d(LeaseQuietRenew),
		"--apiserver-check-period=" + d(2*time.Second),
		"--target-sync-period=" + d(2*time.Second),
		"--reconcile-period=" + d(5*time.Second),
		"--join-retry=" + d(time.Second),
		"--dead-voter-timeout=" + d(time.Minute),
		"--apiserver-fail-timeout=" + d(5*time.Second),
		"--max-clock-skew=" + d(30*time.Second),
		"--snapshot-interval=" + d(2*time.Minute),
	}
}

// stalls stops a random follower's agent (SIGSTOP) for 1–3 s and lets it go
// on (SIGCONT), DetectStalls times, its kubelet and address up throughout: a
// stalled process is not a dead node. Every unhealthy verdict about the
// stalled node from its stop to a vote timeout after it went on is false.
func (r *oursRun) stalls(ctx context.Context) error {
	var last string
	for i := 1; i <= r.s.cfg.DetectStalls; i++ {
		leader, err := r.leader(ctx)
		if err != nil {
			return err
		}
		victim := r.pick(leader.Name, last)
		last = victim.Name
		if err := r.s.jitter(ctx, scaled(ProbePeriod, r.p.k)); err != nil {
			return err
		}
		pid := victim.Pid()
		if pid == 0 {
			return fmt.Errorf("stall %d: agent %s is not running", i, victim.Name)
		}
		d := scaled(time.Second+time.Duration(r.s.rng.Int64N(int64(2*time.Second))), r.p.k)
		start := time.Now()
		if err := stall(ctx, pid, d); err != nil {
			return fmt.Errorf("stall %d (%s): %w", i, victim.Name, err)
		}
		if err := sleep(ctx, scaled(VoteTimeout, r.p.k)); err != nil {
			return err
		}
		var wrong []string
		for _, t := range r.w.transitions(start, time.Now()) {
			if t.Node == victim.Name && t.To == zone.Unhealthy {
				wrong = append(wrong, fmt.Sprintf("%s at +%.1fs", t.Node, t.At.Sub(start).Seconds()/r.p.k))
			}
		}
		r.res.Stalls = append(r.res.Stalls, Stall{Node: victim.Name, Seconds: d.Seconds()})
		r.res.StallFalse = append(r.res.StallFalse, wrong...)
		verdict := "no verdict"
		if len(wrong) > 0 {
			verdict = "FALSE VERDICT " + strings.Join(wrong, ", ")
		}
		r.s.progress(r.n, "ours", "stall %d/%d %s: agent stopped %.1fs; %s", i, r.s.cfg.DetectStalls, victim.Name, d.Seconds()/r.p.k, verdict)
	}
	return nil
}

// stall stops the process pid for d and continues it, on every path.
func stall(ctx context.Context, pid int, d time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP: %w", err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT: %w", err)
	}
	return nil
}
