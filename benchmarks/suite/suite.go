package suite

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/skew"
)

// suite is one run: a control plane shared by every size, the audit log of
// both systems' writes, and the settings.
type suite struct {
	cfg                Config
	cluster            *testcluster.Cluster
	audit              *auditLog
	baselineKubeconfig string
	rng                *rand.Rand
	started            time.Time
}

// Run starts one control plane and measures every size in cfg.Sizes: first
// edgequorum on fresh nodes, then the baseline on the same nodes. A failure
// inside a size is recorded in its result and the run goes on; only a control
// plane that does not start is fatal.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.BaselineBinary == "" {
		cfg.BaselineBinary = filepath.Join(cfg.BinDir, "edgehealth-baseline")
	}
	if _, err := os.Stat(cfg.BaselineBinary); err != nil {
		return nil, fmt.Errorf("baseline binary (build it with `make bench`): %w", err)
	}
	rep := &Report{Machine: machine(), GoVersion: runtime.Version(), Started: time.Now(), Config: cfg,
		Signing: measureSigning(), Binaries: measureBinaries(cfg.BinDir, cfg.BaselineBinary)}
	s := &suite{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)), started: rep.Started}

	if slices.ContainsFunc(cfg.Sizes, cfg.lossAt) {
		// Before anything starts: a missing nft should cost seconds, and a
		// table left by a killed run must not drop the new run's packets.
		if err := clearLoss(ctx); err != nil {
			return nil, fmt.Errorf("lossy-link phase: %w", err)
		}
	}
	if cfg.killsAny() {
		// Likewise the table of a silent death: a run killed during one
		// left that node's address dark.
		if err := clearSilent(ctx); err != nil {
			return nil, err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := clearSilent(cctx); err != nil {
				s.progress(0, "cleanup", "%v", err)
			}
		}()
	}
	s.progress(0, "setup", "starting etcd, kube-apiserver and kube-controller-manager")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(startCtx, testcluster.Options{
		BinDir:      cfg.BinDir,
		Dir:         filepath.Join(cfg.WorkDir, "cluster"),
		AuditPolicy: auditPolicy(zonerun.AgentUser, BaselineUser),
		// A cut zone must look cut to KCM: the kubelets' own default Lease
		// timings. Their NodeStatus, though, comes once a minute, as a real
		// kubelet's does when nothing changes (it posts every 5 min and
		// heartbeats through its Lease); the harness's 10 s default would
		// have every agent decode a Node update per node every 10 s, a cost
		// no real zone pays.
		NodeStatusInterval: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer c.Stop()
	s.cluster = c
	s.audit = &auditLog{path: c.AuditLogPath()}
	if err := zonerun.InstallAgentRBAC(startCtx, c); err != nil {
		return nil, fmt.Errorf("install agent RBAC: %w", err)
	}
	if s.baselineKubeconfig, err = s.installBaseline(startCtx); err != nil {
		return nil, err
	}
	if !cfg.NoWebhook {
		if err := zonerun.AnnounceWebhookReads(startCtx, c, skew.Current()); err != nil {
			return nil, fmt.Errorf("announce the webhook: %w", err)
		}
		rep.WebhookAnnounced = true
	}
	s.progress(0, "setup", "control plane ready at %s", c.APIServerURL())

	for _, n := range cfg.Sizes {
		if ctx.Err() != nil {
			break
		}
		res := SizeResult{N: n}
		if !cfg.OnlyLive {
			res = s.runSize(ctx, n)
		}
		// After the size's own zone is gone: its kubelets would load the
		// apiserver the live zone shares.
		if cfg.liveAt(n) && ctx.Err() == nil {
			res.Live = s.runLive(ctx, n)
		}
		rep.Sizes = append(rep.Sizes, res)
	}
	rep.Took = time.Since(rep.Started)
	return rep, ctx.Err()
}

// runSize measures one zone size.
func (s *suite) runSize(ctx context.Context, n int) SizeResult {
	sizeStart := time.Now()
	res := SizeResult{N: n}
	scale := DefaultScale(n)
	if s.cfg.Scale != nil {
		scale = s.cfg.Scale(n)
	}
	if s.cfg.Scales == nil {
		s.cfg.Scales = map[int]Scale{}
	}
	s.cfg.Scales[n] = scale
	if scale.Ours != 1 || scale.Base != 1 {
		s.progress(n, "size", "time dilated ×%g for edgequorum, ×%g for the baseline (this host cannot run %d nodes' probing in real time)", scale.Ours, scale.Base, n)
	}
	zoneName := fmt.Sprintf("bench-%d", n)
	dataDir := filepath.Join(s.cfg.DataDir, fmt.Sprintf("n%d", n))
	defer os.RemoveAll(dataDir)

	var kubelets []*testcluster.Kubelet
	var oursLossy []LossFigures
	if s.cfg.OnlyDefaults {
		for i := 1; i <= n; i++ {
			k, err := s.cluster.AddNode(ctx, testcluster.NodeOptions{Name: fmt.Sprintf("n%d-%d", n, i), Zone: zoneName})
			if err != nil {
				s.progress(n, "size", "adding nodes: %v", err)
				return res
			}
			kubelets = append(kubelets, k)
		}
	} else {
		z, ours, lossy := s.runOurs(ctx, n, zoneName, dataDir, s.planFor(scale.Ours))
		res.Ours = ours
		if s.cfg.OnlyLossy {
			// Only its errors: figures that were not measured must not
			// replace a full run's when the two are merged.
			res.Ours = System{Name: ours.Name, Scale: ours.Scale, Errors: ours.Errors}
		}
		oursLossy = lossy
		if z == nil {
			s.progress(n, "size", "no nodes; skipping the baseline")
			return res
		}
		for _, a := range z.Agents() {
			kubelets = append(kubelets, a.Kubelet)
		}
	}
	defer func() {
		for _, k := range kubelets {
			k.Kill()
		}
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteZoneNodes(cctx, s.cluster.Client(), zoneName); err != nil {
			s.progress(n, "size", "cleanup: %v", err)
		}
	}()

	if !s.cfg.OnlyDefaults && !s.cfg.OnlyOurs {
		v := matchedVariant(s.planFor(scale.Base))
		v.lossy, v.onlyLossy, v.detectOnly = s.cfg.lossAt(n), s.cfg.OnlyLossy, s.cfg.DetectOnly
		base, lossy := s.runBaseline(ctx, n, zoneName, kubelets, v)
		res.Base = base
		if s.cfg.OnlyLossy {
			res.Base = System{Name: base.Name, Scale: base.Scale, Errors: base.Errors}
		}
		res.Lossy = zipLoss(s.cfg.LossPercents, oursLossy, lossy)
	}
	if s.cfg.DefaultsKills > 0 && !s.cfg.OnlyLossy && !s.cfg.DetectOnly && !s.cfg.OnlyOurs && ctx.Err() == nil && (len(s.cfg.DefaultsSizes) == 0 || slices.Contains(s.cfg.DefaultsSizes, n)) {
		d, _ := s.runBaseline(ctx, n, zoneName, kubelets, defaultsVariant(s.cfg))
		res.Defaults = &d
	}
	line := oneLine(res)
	if s.cfg.DetectOnly {
		line = detectLine(res)
	}
	s.progress(n, "size", "done in %s: %s", time.Since(sizeStart).Round(time.Second), line)
	return res
}

// zipLoss pairs both systems' lossy-link figures by loss level: each ran
// the levels in order and stopped early only on failure or interrupt.
func zipLoss(percents []int, ours, base []LossFigures) []LossLevel {
	var out []LossLevel
	for i, p := range percents {
		l := LossLevel{Percent: p}
		if i < len(ours) {
			l.Ours = ours[i]
		}
		if i < len(base) {
			l.Base = base[i]
		}
		if l.Ours.Ran || l.Base.Ran || len(l.Ours.Errors)+len(l.Base.Errors) > 0 {
			out = append(out, l)
		}
	}
	return out
}

// plan is one system's phase settings at one size, in wall-clock time.
type plan struct {
	k                float64
	kills, failovers int
	steady, settle   time.Duration
	cut, timeout     time.Duration
}

// planFor stretches the configured phases by the time-dilation factor k.
// Scaled sizes get fewer repetitions so a full run stays near an hour: each
// repetition takes k times longer (not in a detection run: see killsFor).
func (s *suite) planFor(k float64) plan {
	p := plan{k: k, kills: s.cfg.killsFor(k), failovers: s.cfg.Failovers, steady: s.cfg.Steady, settle: s.cfg.Settle,
		cut: s.cfg.Cut, timeout: detectTimeout}
	if k > 1 {
		p.failovers = min(p.failovers, 1)
		p.steady = max(s.cfg.Steady, scaled(3*ProbePeriod, k))
		p.settle = min(scaled(s.cfg.Settle, k), 40*time.Second)
		p.cut = scaled(VoteTimeout+2*ProbePeriod, k)
		p.timeout = scaled(detectTimeout, k)
	}
	return p
}

// scaled multiplies a protocol duration by the dilation factor.
func scaled(d time.Duration, k float64) time.Duration { return time.Duration(float64(d) * k) }

// progress prints one line: elapsed time, zone size, phase, message.
func (s *suite) progress(n int, phase, format string, args ...any) {
	elapsed := time.Since(s.started).Round(time.Second)
	size := "    "
	if n > 0 {
		size = fmt.Sprintf("N=%-3d", n)
	}
	fmt.Fprintf(s.cfg.Progress, "[%8s] %s %-9s %s\n", elapsed, size, phase, fmt.Sprintf(format, args...))
}

// oneLine is the size's headline for the progress log.
func oneLine(r SizeResult) string {
	return fmt.Sprintf("detect ours reset %s, silent %s; base reset %s, silent %s; zone B/s ours %s / base %s, leader CPU %.0f%%, peak RSS %.0f MiB, false verdicts %d",
		tailPhrase(r.Ours.DetectAnnot), tailPhrase(r.Ours.DetectAnnotSilent), tailPhrase(r.Base.DetectAnnot), tailPhrase(r.Base.DetectAnnotSilent),
		humanBytes(r.Ours.Steady.ZoneBytes), humanBytes(r.Base.Steady.ZoneBytes),
		100*r.Ours.Steady.LeaderCPUShare(), r.Ours.Steady.PeakRSS()/(1<<20), r.Ours.FalseVerdicts)
}

// detectLine is a detection run's headline for a size: each system's
// death → annotation for each kind, p50 and tail.
func detectLine(r SizeResult) string {
	f := func(xs []float64) string {
		if len(xs) == 0 {
			return "—"
		}
		return fmt.Sprintf("%.1fs / %.1fs (%s)", p50(xs), p99(xs), pooled(len(xs)))
	}
	return fmt.Sprintf("death → annotation p50 / tail: ours reset %s, silent %s; base reset %s, silent %s",
		f(r.Ours.DetectAnnot), f(r.Ours.DetectAnnotSilent), f(r.Base.DetectAnnot), f(r.Base.DetectAnnotSilent))
}

// tailPhrase is a detection tail for a progress line: "6.1s (max of n=2)".
func tailPhrase(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1fs (%s)", p99(xs), pooled(len(xs)))
}

// jitter waits a random time in [0, d): a kill right after a fixed-length
// phase would otherwise hit the same point of a periodic protocol every time.
func (s *suite) jitter(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return sleep(ctx, time.Duration(s.rng.Int64N(int64(d))))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ThisMachine describes this host from /proc, for results that say which
// machine made them.
func ThisMachine() Machine { return machine() }

// ThisCommit names the build a results page measured: the checkout's
// commit, marked dirty when it has changes; "unknown" outside a checkout.
func ThisCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// String is the machine in one line.
func (m Machine) String() string {
	return fmt.Sprintf("%s, %d cores, %.0f GiB, Linux %s, load %s at start", m.CPU, m.Cores, m.MemGiB, m.Kernel, m.LoadAvg)
}

// machine describes this host from /proc.
func machine() Machine {
	m := Machine{Cores: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				f := strings.Fields(v)
				if len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					m.MemGiB = kb / (1 << 20)
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return m
}
