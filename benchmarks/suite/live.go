package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/standin"
	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
	"github.com/edgequorum/edgequorum/internal/proc"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// Live is the real-time leader phase at one size. A time-dilated run
// multiplies every rate of the leader by the dilation factor, fixed-rate
// work included, so its leader CPU is only an upper bound. Here the Raft
// servers and a few spares run as agents in real time, and every other
// member as a stand-in (bin/standins: the member code, probing only the
// agents, reporting the other stand-ins healthy): the leader gets every
// report, probe and join a zone of N sends it, undilated.
type Live struct {
	Ran    bool
	Errors []string
	// Servers, Spares and StandIns count the server agents (voters and
	// stand-bys), the spare agents and the stand-ins.
	Servers, Spares, StandIns int
	// FormSeconds is stand-ins and spare agents started → every member of
	// the zone annotated healthy (the servers had formed already).
	FormSeconds float64
	// RolesHeld is true when, at the end of the window, the server agents
	// and no stand-in held the voter and stand-by seats, so the leader
	// measured is an agent; Roles says who held what otherwise.
	RolesHeld bool
	Roles     string `json:",omitempty"`
	Leader    string
	// Spare is the spare agent with the largest peak RSS.
	Spare   string `json:",omitempty"`
	Seconds float64

	// The leader's bytes/s sent and received on the zone port, CPU in
	// CPU-seconds per minute, peak RSS in bytes.
	LeaderSent, LeaderRecv, LeaderCPU, LeaderRSS float64
	// The spare agents' mean bytes/s and CPU, their largest peak RSS.
	SpareSent, SpareRecv, SpareCPU, SpareRSS float64
	// LeaderRSSFile and SpareRSSFile are the part of the leader's and the
	// largest spare's RSS mapped from files at the end of the window: the
	// binary's code and data, shared and reclaimable; 0 or NaN when not
	// read.
	LeaderRSSFile, SpareRSSFile float64
	// LeaderMem and SpareMem are the leader's and the largest spare's
	// memory at the end of the window.
	LeaderMem, SpareMem MemFigures
	// The stand-ins' mean bytes/s each, and their process's CPU and peak RSS.
	StandInSent, StandInRecv, StandInCPU, StandInRSS float64
	// HostBusy is the machine's CPU utilisation in the window, 0..1.
	HostBusy float64
	// From names the run these figures came from when it is not the
	// report's own (a run merged in with -render).
	From string `json:",omitempty"`
}

// LeaderCPUShare is the leader's share of one core.
func (l Live) LeaderCPUShare() float64 { return l.LeaderCPU / 60 }

// LeaderBytes is the leader's sent+received bytes/s.
func (l Live) LeaderBytes() float64 { return l.LeaderSent + l.LeaderRecv }

// SpareBytes is a spare agent's mean sent+received bytes/s.
func (l Live) SpareBytes() float64 { return l.SpareSent + l.SpareRecv }

// liveStandInsPerSecond paces the stand-ins' start: a zone's members do not
// all boot in the same second, and joins are admitted one commit at a time.
const liveStandInsPerSecond = 8

// liveRun is the phase at one size.
type liveRun struct {
	s    *suite
	n    int
	zone string
	res  *Live
	z    *zonerun.Zone
	w    *watcher
}

// runLive measures the leader of an n-member zone in real time.
func (s *suite) runLive(ctx context.Context, n int) *Live {
	r := &liveRun{s: s, n: n, zone: fmt.Sprintf("live-%d", n), res: &Live{}}
	r.run(ctx)
	return r.res
}

func (r *liveRun) fail(phase string, err error) {
	r.res.Errors = append(r.res.Errors, fmt.Sprintf("%s: %v", phase, err))
	r.s.progress(r.n, "live", "%s failed: %v", phase, err)
}

func (r *liveRun) run(ctx context.Context) {
	s, n := r.s, r.n
	servers := Voters + Standbys
	spares := min(s.cfg.LiveSpares, n-servers)
	r.res.Servers, r.res.Spares, r.res.StandIns = servers, spares, n-servers-spares
	w, err := watchZone(ctx, s.cluster.Client(), r.zone, oursState)
	if err != nil {
		r.fail("watch", err)
		return
	}
	defer w.stop()
	r.w = w
	dataDir := filepath.Join(s.cfg.DataDir, "live"+strconv.Itoa(n))
	defer os.RemoveAll(dataDir)
	// The agents' logs go with their state: keep them beside the work
	// dir's other logs (the bench's -keep keeps those).
	defer keepAgentLogs(filepath.Join(dataDir, "agents"), filepath.Join(s.cfg.WorkDir, "live"+strconv.Itoa(n)+"-agents"))
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteZoneNodes(cctx, s.cluster.Client(), r.zone); err != nil {
			s.progress(n, "live", "cleanup: %v", err)
		}
	}()

	s.progress(n, "live", "starting %d server agents (%d nodes, the others stand-ins or spares)", servers, n)
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(n)*time.Second)
	z, err := zonerun.Start(startCtx, s.cluster, zonerun.Options{
		Zone: r.zone, Nodes: n, NodePrefix: fmt.Sprintf("l%d", n), StartAgents: servers,
		Binary: filepath.Join(s.cfg.BinDir, "edgequorum"), Dir: filepath.Join(dataDir, "agents"),
		AgentArgs: append([]string{"--log-level=info", profileArg}, s.cfg.AgentArgs...),
		AgentEnv:  agentEnv(s.cfg.HeapProfiles),
	})
	cancel()
	if err != nil {
		r.fail("start", err)
		return
	}
	r.z = z
	defer func() {
		stopAll(z)
		for _, a := range z.Agents() {
			a.Kubelet.Kill()
		}
	}()
	agents := z.Agents()
	names := func(as []*zonerun.Agent) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Name)
		}
		return out
	}
	if err := w.waitAll(ctx, formTimeout(servers, 1), names(agents[:servers]), zone.Healthy); err != nil {
		r.fail("servers' formation", err)
		return
	}

	real := agents[:servers+spares]
	cfg := standin.Config{Zone: r.zone, KeyFile: z.KeyFile(), PeerPort: zonerun.PeerPort, Probed: names(real),
		StartRate: liveStandInsPerSecond}
	for _, a := range agents[servers+spares:] {
		cfg.Members = append(cfg.Members, standin.Member{Name: a.Name, IP: a.IP, DataDir: a.DataDir, Kubeconfig: a.Kubeconfig()})
	}
	started := time.Now()
	var standins *proc.Process
	var standinsAddr string
	if len(cfg.Members) > 0 {
		standins, standinsAddr, err = r.startStandIns(cfg, dataDir)
		if err != nil {
			r.fail("stand-ins", err)
			return
		}
		defer standins.Stop(30 * time.Second)
	}
	for _, a := range agents[servers : servers+spares] {
		if err := a.Start(); err != nil {
			r.fail("spare agents", err)
			return
		}
	}
	r.res.Ran = true
	if err := w.waitAll(ctx, formTimeout(n, 1), names(agents), zone.Healthy); err != nil {
		r.fail("formation", fmt.Errorf("%w (not healthy: %v)", err, w.notHealthy(names(agents))))
		return
	}
	r.res.FormSeconds = time.Since(started).Seconds()
	s.progress(n, "live", "zone formed: %d healthy verdicts %.1fs after the stand-ins started", n, r.res.FormSeconds)

	members := make([]member, 0, len(real)+1)
	for _, a := range real {
		members = append(members, member{name: a.Name, metricsURL: "http://" + a.StatusAddress() + "/metrics",
			pidArg: "--status-address=" + a.StatusAddress()})
	}
	const standinsMember = "standins"
	if standins != nil {
		members = append(members, member{name: standinsMember, metricsURL: "http://" + standinsAddr + "/metrics",
			pidArg: "--status-address=" + standinsAddr})
	}
	notQuiet, err := s.settle(ctx, n, "live", members[:len(real)], s.cfg.Settle, QuietTimeout, LeaseQuietRenew)
	if err != nil {
		return
	}
	if notQuiet != nil {
		r.res.Errors = append(r.res.Errors, "steady: "+notQuiet.Error())
	}
	s.progress(n, "live", "steady state: sampling %d agents and %d %s for %s", len(real), len(cfg.Members), plural(len(cfg.Members), "stand-in", "stand-ins"), s.cfg.Steady)
	var cpu func()
	before, after, err := steadyWindow(ctx, members, "--status-address=", s.cfg.Steady, func() {
		cpu = r.startCPUProfile(ctx, agents[servers:servers+spares])
	})
	if err != nil {
		return
	}
	cpu()
	r.measure(ctx, before, after, real[:servers], real[servers:], standinsMember)
	l := r.res
	r.saveProfiles(ctx, l.Leader, "leader")
	r.saveProfiles(ctx, l.Spare, "spare")
	s.progress(n, "live", "leader %s: CPU %.1f%% of a core, peak RSS %.0f MiB, %s/s; spare agents %s/s, peak RSS %.0f MiB; stand-ins %s/s each; host busy %.0f%%",
		l.Leader, 100*l.LeaderCPUShare(), l.LeaderRSS/(1<<20), humanBytes(l.LeaderBytes()), humanBytes(l.SpareBytes()),
		l.SpareRSS/(1<<20), humanBytes(l.StandInSent+l.StandInRecv), 100*l.HostBusy)
}

// saveProfiles keeps agent name's goroutine (and heap) profiles in the work
// directory's profiles/ as N<n>-live-<role>-*; a failure is only reported.
func (r *liveRun) saveProfiles(ctx context.Context, name, role string) {
	a := r.z.Agent(name)
	if name == "" || a == nil {
		return
	}
	files, err := saveProfiles(ctx, a.StatusAddress(), filepath.Join(r.s.cfg.WorkDir, "profiles"), fmt.Sprintf("N%d-live-%s", r.n, role), r.s.cfg.HeapProfiles)
	if err != nil {
		r.s.progress(r.n, "live", "%s %s's profiles: %v", role, name, err)
		return
	}
	r.s.progress(r.n, "live", "%s %s's profiles: %v", role, name, files)
}

// startCPUProfile takes CPU profiles, over the first cpuProfileSeconds of
// the steady window, of the agent leading at its start and of the first
// spare agent (where a member's CPU goes with and without the leader's
// work), into the work directory's profiles/ as N<n>-live-<role>-cpu.pb.gz;
// the returned func waits for them and reports the outcome. A failure is
// only reported.
func (r *liveRun) startCPUProfile(ctx context.Context, spares []*zonerun.Agent) (wait func()) {
	type profile struct {
		role, file string
		err        error
	}
	profiles := []*profile{{role: "leader"}}
	if len(spares) > 0 {
		profiles = append(profiles, &profile{role: "spare"})
	}
	var wg sync.WaitGroup
	for _, p := range profiles {
		wg.Go(func() {
			a, err := r.profiled(ctx, p.role, spares)
			if err != nil {
				p.err = err
				return
			}
			dir := filepath.Join(r.s.cfg.WorkDir, "profiles")
			if p.err = os.MkdirAll(dir, 0o755); p.err != nil {
				return
			}
			file := filepath.Join(dir, fmt.Sprintf("N%d-live-%s-cpu.pb.gz", r.n, p.role))
			p.err = fetchTo(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", a.StatusAddress(), cpuProfileSeconds), file)
			p.file = a.Name + ": " + file
		})
	}
	return func() {
		wg.Wait()
		for _, p := range profiles {
			if p.err != nil {
				r.s.progress(r.n, "live", "%s's CPU profile: %v", p.role, p.err)
				continue
			}
			r.s.progress(r.n, "live", "%s's CPU profile (%d s): %s", p.role, cpuProfileSeconds, p.file)
		}
	}
}

// profiled is the agent whose CPU profile role names: the zone's leader
// now, or the first spare.
func (r *liveRun) profiled(ctx context.Context, role string, spares []*zonerun.Agent) (*zonerun.Agent, error) {
	if role == "spare" {
		return spares[0], nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := r.z.Leader(ctx)
	if err != nil {
		return nil, fmt.Errorf("no leader to profile: %w", err)
	}
	return l, nil
}

// cpuProfileSeconds is the length of the live phase's CPU profile: the
// agent's longest (the status server's write timeout bounds it).
const cpuProfileSeconds = 10

// startStandIns writes the stand-ins' config and starts bin/standins.
func (r *liveRun) startStandIns(cfg standin.Config, dir string) (*proc.Process, string, error) {
	path := filepath.Join(dir, "standins.json")
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, "", err
	}
	addr, err := freeLoopbackAddress()
	if err != nil {
		return nil, "", err
	}
	bin := filepath.Join(r.s.cfg.BinDir, "standins")
	p, err := proc.Start(bin, []string{"--config=" + path, "--status-address=" + addr},
		filepath.Join(r.s.cfg.WorkDir, fmt.Sprintf("standins-%d.log", r.n)))
	if err != nil {
		return nil, "", fmt.Errorf("%s (built by `make bench-tools`): %w", bin, err)
	}
	r.s.progress(r.n, "live", "starting %d stand-ins, %d a second", len(cfg.Members), liveStandInsPerSecond)
	return p, addr, nil
}

// freeLoopbackAddress is a 127.0.0.1 port nothing listens on right now.
func freeLoopbackAddress() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// measure fills the figures from two snapshots: the leader among the server
// agents, the spare agents, and the stand-ins' process.
func (r *liveRun) measure(ctx context.Context, before, after snapshot, servers, spares []*zonerun.Agent, standinsMember string) {
	l := r.res
	l.Seconds = after.at.Sub(before.at).Seconds()
	l.HostBusy = hostBusy(before, after)
	l.LeaderSent, l.LeaderRecv, l.LeaderCPU, l.LeaderRSS = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	rates := memberRates(before, after, oursCounters)
	for _, a := range servers {
		if ms, ok := after.members[a.Name]; ok && ms.err == nil && ms.metrics.Sum(isLeaderMetric, nil) == 1 {
			l.Leader = a.Name
		}
	}
	if rt, ok := rates[l.Leader]; ok && l.Leader != "" {
		l.LeaderSent, l.LeaderRecv, l.LeaderCPU, l.LeaderRSS = rt.sent, rt.received, rt.cpuPerMin, float64(rt.rss)
		l.LeaderRSSFile = float64(rt.rssFile)
		l.LeaderMem = rt.mem
	} else {
		r.fail("steady", fmt.Errorf("no server agent reported %s=1 at the end of the window", isLeaderMetric))
	}
	var sent, recv, cpu, rss []float64
	for _, a := range spares {
		if rt, ok := rates[a.Name]; ok {
			sent, recv, cpu, rss = append(sent, rt.sent), append(recv, rt.received), append(cpu, rt.cpuPerMin), append(rss, float64(rt.rss))
			if float64(rt.rss) >= stats.Max(rss) {
				l.Spare = a.Name
				l.SpareRSSFile = float64(rt.rssFile)
				l.SpareMem = rt.mem
			}
		}
	}
	l.SpareSent, l.SpareRecv, l.SpareCPU, l.SpareRSS = stats.Mean(sent), stats.Mean(recv), stats.Mean(cpu), stats.Max(rss)
	l.StandInSent, l.StandInRecv, l.StandInCPU, l.StandInRSS = math.NaN(), math.NaN(), math.NaN(), math.NaN()
	if rt, ok := rates[standinsMember]; ok && l.StandIns > 0 {
		l.StandInSent, l.StandInRecv = rt.sent/float64(l.StandIns), rt.received/float64(l.StandIns)
		l.StandInCPU, l.StandInRSS = rt.cpuPerMin, float64(rt.rss)
	}
	r.checkRoles(ctx, servers)
}

// checkRoles records whether the server agents held every server seat: a
// stand-in promoted to voter would make the leader measured a stand-in.
func (r *liveRun) checkRoles(ctx context.Context, servers []*zonerun.Agent) {
	leader, err := r.z.Leader(ctx)
	if err != nil {
		r.fail("roles", err)
		return
	}
	st, err := leader.Status(ctx)
	if err != nil {
		r.fail("roles", err)
		return
	}
	want := map[string]bool{}
	for _, a := range servers {
		want[a.Name] = true
	}
	var held, wrong []string
	for _, m := range st.Members {
		if m.Role == "voter" || m.Role == "standby" {
			held = append(held, m.Node+"="+m.Role)
			if !want[m.Node] {
				wrong = append(wrong, m.Node)
			}
		}
	}
	slices.Sort(held)
	r.res.RolesHeld = len(wrong) == 0 && len(held) == len(servers)
	if !r.res.RolesHeld {
		r.res.Roles = fmt.Sprintf("servers: %v", held)
		r.fail("roles", fmt.Errorf("the server agents did not hold every server seat: %s", r.res.Roles))
	}
}

// keepAgentLogs copies every agents/<name>/agent.log under dir into out as
// <name>.log, best effort: a log that cannot be copied is left out.
func keepAgentLogs(dir, out string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "agent.log"))
	if len(logs) == 0 || os.MkdirAll(out, 0o755) != nil {
		return
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(out, filepath.Base(filepath.Dir(l))+".log"), b, 0o644)
	}
}
