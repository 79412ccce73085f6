package suite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/zone"
)

// SoakTable is the nftables table of the soak run, its own so that nothing
// else's ruleset (the lossy-link phase's included) is touched.
const SoakTable = "edgequorum_bench_soak"

// Impairment kinds of a soak zone.
const (
	// SoakLoss drops Percent % of the packets between any two nodes of the
	// zone, each way, at random per packet.
	SoakLoss = "loss"
	// SoakOneWay drops Percent % of the packets the zone's first node sends
	// to its peers and none of those it receives: an asymmetric link.
	SoakOneWay = "oneway"
	// SoakBurst darkens one node at a time wholly toward its peers (every
	// packet either way dropped) for a random 100 ms to BurstMax, with 1 to
	// 10 s of clean link between bursts: the fades of a radio link or a
	// flapping switch port, which per-packet random loss never produces.
	SoakBurst = "burst"
	// SoakJitter holds every packet between any two nodes of the zone for
	// a random 0 to Jitter, each way, without reordering two packets
	// between the same two nodes: a link whose latency varies (jitter.go).
	SoakJitter = "jitter"
)

// DarknessTolerated is how long a node's link may be wholly dark without
// being judged failed at the shipped defaults (DESIGN.md, verdict rule): from
// a probe's start to the last confirmation connection's resent SYN,
// T/2 + (C−1)·G + T/2.
const DarknessTolerated = ProbeTimeout + (probe.DefaultConfirmConnects-1)*probe.DefaultConfirmGap

// Burst timing of SoakBurst: a burst lasts between burstMin and the zone's
// BurstMax, and the link is clean for burstGapMin to burstGapMax between two.
const (
	burstMin    = 100 * time.Millisecond
	burstGapMin = time.Second
	burstGapMax = 10 * time.Second
	// burstMaxMax bounds BurstMax: a longer darkness is an outage, which
	// the rule is meant to judge.
	burstMaxMax = 5 * time.Second
	// jitterMin and jitterMax bound Jitter: past a probe timeout a delay
	// is a loss.
	jitterMin = time.Millisecond
	jitterMax = ProbeTimeout
)

// SoakSpec is Count zones of N nodes under one impairment.
type SoakSpec struct {
	Count, N int
	Kind     string
	// Percent is the drop rate of SoakLoss and SoakOneWay.
	Percent int
	// BurstMax is the longest burst of SoakBurst.
	BurstMax time.Duration
	// Jitter is SoakJitter's longest delay of a packet.
	Jitter time.Duration
}

// String is the spec as ParseSoakSpecs reads it back.
func (s SoakSpec) String() string {
	return fmt.Sprintf("%dx%d:%s", s.Count, s.N, s.impairment())
}

func (s SoakSpec) impairment() string {
	switch s.Kind {
	case SoakBurst:
		return fmt.Sprintf("%s=%s", s.Kind, s.BurstMax)
	case SoakJitter:
		return fmt.Sprintf("%s=%s", s.Kind, s.Jitter)
	}
	return fmt.Sprintf("%s=%d", s.Kind, s.Percent)
}

// ParseSoakSpecs reads a comma-separated list of COUNTxN:KIND=VALUE, e.g.
// "8x3:loss=5,1x9:loss=1,1x5:oneway=20,1x5:burst=1s".
func ParseSoakSpecs(list string) ([]SoakSpec, error) {
	var out []SoakSpec
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		s, err := parseSoakSpec(item)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no zones: want COUNTxN:KIND=VALUE, e.g. 8x3:loss=5")
	}
	return out, nil
}

func parseSoakSpec(item string) (SoakSpec, error) {
	var s SoakSpec
	shape, imp, ok := strings.Cut(item, ":")
	if !ok {
		return s, errors.New("want COUNTxN:KIND=VALUE")
	}
	c, n, ok := strings.Cut(shape, "x")
	if !ok {
		return s, fmt.Errorf("zones %q: want COUNTxN, e.g. 8x3", shape)
	}
	var err error
	if s.Count, err = strconv.Atoi(c); err != nil || s.Count < 1 || s.Count > 32 {
		return s, fmt.Errorf("zone count %q: want 1 to 32", c)
	}
	if s.N, err = strconv.Atoi(n); err != nil || s.N < 3 || s.N > 33 {
		return s, fmt.Errorf("zone size %q: want 3 to 33 nodes (a soak runs in real time)", n)
	}
	kind, val, ok := strings.Cut(imp, "=")
	if !ok {
		return s, fmt.Errorf("impairment %q: want KIND=VALUE", imp)
	}
	s.Kind = kind
	switch kind {
	case SoakLoss, SoakOneWay:
		if s.Percent, err = strconv.Atoi(val); err != nil || s.Percent < 1 || s.Percent > 99 {
			return s, fmt.Errorf("%s %q: want a percentage from 1 to 99", kind, val)
		}
	case SoakBurst:
		if s.BurstMax, err = time.ParseDuration(val); err != nil || s.BurstMax < burstMin || s.BurstMax > burstMaxMax {
			return s, fmt.Errorf("burst %q: want the longest burst, from %s to %s", val, burstMin, burstMaxMax)
		}
	case SoakJitter:
		if s.Jitter, err = time.ParseDuration(val); err != nil || s.Jitter < jitterMin || s.Jitter > jitterMax {
			return s, fmt.Errorf("jitter %q: want the longest delay, from %s to %s", val, jitterMin, jitterMax)
		}
	default:
		return s, fmt.Errorf("impairment %q: want %s, %s, %s or %s", kind, SoakLoss, SoakOneWay, SoakBurst, SoakJitter)
	}
	return s, nil
}

// SoakConfig is one soak run: every zone side by side on one control plane,
// each under its own impairment, for one window.
type SoakConfig struct {
	Zones  []SoakSpec
	Window time.Duration
	// Settle is how long the formed zones run clean before the impairments.
	Settle                   time.Duration
	BinDir, WorkDir, DataDir string
	Progress                 io.Writer
	Seed                     uint64
}

// Validate names the first bad field.
func (c SoakConfig) Validate() error {
	switch {
	case len(c.Zones) == 0:
		return errors.New("soak: Zones is empty")
	case c.Window < VoteTimeout:
		return fmt.Errorf("soak: Window is %s, must be at least the vote timeout %s", c.Window, VoteTimeout)
	case c.BinDir == "" || c.WorkDir == "" || c.DataDir == "":
		return errors.New("soak: BinDir, WorkDir and DataDir are required")
	}
	nodes, zones := 0, 0
	for _, z := range c.Zones {
		nodes += z.Count * z.N
		zones += z.Count
	}
	if zones > 26 {
		// Zones are lettered a to z.
		return fmt.Errorf("soak: %d zones in all; at most 26", zones)
	}
	if nodes > 160 {
		return fmt.Errorf("soak: %d nodes in all; at most 160 run side by side in real time", nodes)
	}
	return nil
}

// SoakReport is a soak run's result.
type SoakReport struct {
	Machine   Machine
	GoVersion string
	Commit    string
	Started   time.Time
	Took      time.Duration
	Config    SoakConfig `json:"-"`
	Specs     []string
	Window    time.Duration
	// HostBusy is the machine's CPU busy share over the window: near 1, the
	// figures are the host's limit, not the protocol's.
	HostBusy float64
	Zones    []SoakZone
	Errors   []string
}

// SoakZone is one zone's figures.
type SoakZone struct {
	Name       string
	N          int
	Kind       string
	Impairment string
	// Seconds is how long the impairment was on; NodeSeconds is that times
	// the zone's nodes (every node is alive throughout).
	Seconds, NodeSeconds float64
	// Packets between the zone's nodes and those dropped.
	Packets, Dropped int64
	// BurstMax is SoakBurst's longest burst.
	BurstMax time.Duration
	// Bursts of SoakBurst and their total length.
	Bursts       int
	BurstSeconds float64
	// Jitter is SoakJitter's longest delay; Delayed the packets held and
	// DelayMean and DelayMax their delays, as the queue held them.
	Jitter              time.Duration
	Delayed             int64
	DelayMean, DelayMax time.Duration
	// FalseVerdicts are non-healthy annotations, every one false: no node
	// of a soak zone dies.
	FalseVerdicts int
	FalseNodes    []string
	// HealthyAtEnd is whether every node was annotated healthy after the
	// impairment was lifted and a vote timeout passed.
	HealthyAtEnd bool
	Errors       []string
}

// soakZone is one running zone of the soak.
type soakZone struct {
	spec  SoakSpec
	name  string
	set   string
	z     *zonerun.Zone
	w     *watcher
	names []string
	ips   []netip.Addr
	res   SoakZone
}

// RunSoak starts a control plane, forms every zone, turns every impairment
// on for the window, and counts the verdicts written meanwhile. A zone that
// fails to form is reported and left out; only a control plane that does not
// start, or nft missing, is fatal.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	rep := &SoakReport{Machine: machine(), GoVersion: runtime.Version(), Started: time.Now(), Config: cfg, Window: cfg.Window}
	for _, z := range cfg.Zones {
		rep.Specs = append(rep.Specs, z.String())
	}
	say := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "[%8s] soak %s\n", time.Since(rep.Started).Round(time.Second), fmt.Sprintf(format, args...))
	}
	nft, err := findNft()
	if err != nil {
		return nil, err
	}
	if _, err := runNft(ctx, nft, dropTableScript(SoakTable)); err != nil {
		return nil, fmt.Errorf("delete stale table %s: %w", SoakTable, err)
	}
	say("starting etcd, kube-apiserver and kube-controller-manager")
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := testcluster.Start(startCtx, testcluster.Options{
		BinDir: cfg.BinDir, Dir: filepath.Join(cfg.WorkDir, "cluster"),
		// As in Run: a real kubelet's NodeStatus cadence.
		NodeStatusInterval: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	defer c.Stop()
	if err := zonerun.InstallAgentRBAC(startCtx, c); err != nil {
		return nil, fmt.Errorf("install agent RBAC: %w", err)
	}
	s := &suite{cluster: c}
	exclude := s.controlPlaneAddrs()

	var zones []*soakZone
	defer func() {
		for _, sz := range zones {
			if sz.z != nil {
				stopAll(sz.z)
				for _, a := range sz.z.Agents() {
					a.Kubelet.Kill()
				}
			}
			if sz.w != nil {
				sz.w.stop()
			}
		}
	}()
	for _, spec := range cfg.Zones {
		for i := range spec.Count {
			name := fmt.Sprintf("soak-%d%c", spec.N, 'a'+rune(len(zones)))
			sz := &soakZone{spec: spec, name: name, set: fmt.Sprintf("z%d", len(zones)+1),
				res: SoakZone{Name: name, N: spec.N, Kind: spec.Kind, Impairment: spec.impairment(), BurstMax: spec.BurstMax, Jitter: spec.Jitter}}
			zones = append(zones, sz)
			say("zone %s (%d of %d of %s): starting %d agents", name, i+1, spec.Count, spec, spec.N)
			if err := sz.start(ctx, c, cfg); err != nil {
				sz.res.Errors = append(sz.res.Errors, err.Error())
				say("zone %s: %v", name, err)
			}
		}
	}
	var live []*soakZone
	for _, sz := range zones {
		if sz.z == nil {
			continue
		}
		if err := sz.w.waitAll(ctx, formTimeout(sz.spec.N, 1), sz.names, zone.Healthy); err != nil {
			sz.res.Errors = append(sz.res.Errors, fmt.Sprintf("formation: %v (not healthy: %v)", err, sz.w.notHealthy(sz.names)))
			say("zone %s did not form: %v", sz.name, err)
			continue
		}
		live = append(live, sz)
	}
	if len(live) == 0 {
		return rep, errors.New("soak: no zone formed")
	}
	say("%d zones formed; %s clean before the impairments", len(live), cfg.Settle)
	if err := sleep(ctx, cfg.Settle); err != nil {
		return rep, err
	}

	script, err := soakRuleset(live, exclude)
	if err != nil {
		return rep, err
	}
	if _, err := runNft(ctx, nft, script); err != nil {
		return rep, fmt.Errorf("install table %s: %w", SoakTable, err)
	}
	var jitter *jitterLinks
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		if err := jitter.stop(); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := runNftList(rctx, nft, SoakTable); err == nil {
			counts := parseSoakCounters(out)
			for _, sz := range live {
				sz.res.Packets, sz.res.Dropped = counts[sz.set].seen, counts[sz.set].lost
			}
		} else {
			rep.Errors = append(rep.Errors, err.Error())
		}
		if _, err := runNft(rctx, nft, dropTableScript(SoakTable)); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("delete table %s: %v", SoakTable, err))
		}
	}
	defer remove()
	if jitter, err = startJitter(ctx, live, exclude, cfg.Seed); err != nil {
		return rep, fmt.Errorf("jitter: %w", err)
	}
	cpu0, _ := procstat.ReadHostCPU()
	start := time.Now()
	say("impairments on for %s: %s", cfg.Window, strings.Join(rep.Specs, ", "))

	wctx, wcancel := context.WithTimeout(ctx, cfg.Window)
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x50a4))
	for _, sz := range live {
		if sz.spec.Kind == SoakBurst {
			r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
			wg.Go(func() { sz.bursts(wctx, nft, r) })
		}
	}
	wg.Go(func() {
		t := time.NewTicker(5 * time.Minute)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			var fv []string
			for _, sz := range live {
				if ts := sz.w.transitions(start, time.Now()); len(ts) > 0 {
					n, _ := falseVerdictsAmong(ts, nil)
					if n > 0 {
						fv = append(fv, fmt.Sprintf("%s %d", sz.name, n))
					}
				}
			}
			la := machine().LoadAvg
			say("%s of %s: false verdicts so far: %s; load %s", time.Since(start).Round(time.Second), cfg.Window, orNone(fv), la)
		}
	})
	<-wctx.Done()
	wg.Wait()
	wcancel()
	end := time.Now()
	cpu1, _ := procstat.ReadHostCPU()
	rep.HostBusy = procstat.Utilisation(cpu0, cpu1)
	remove()
	if ctx.Err() == nil {
		// A verdict in flight when the impairment ended was caused by it.
		grace := VoteTimeout + VotePeriod + 2*time.Second
		say("impairments off; %s for verdicts in flight", grace)
		_ = sleep(ctx, grace)
	}
	// An interrupted run still reports what it saw.
	for _, sz := range live {
		sz.res.Seconds = end.Sub(start).Seconds()
		sz.res.NodeSeconds = float64(sz.spec.N) * sz.res.Seconds
		sz.res.FalseVerdicts, sz.res.FalseNodes = falseVerdictsAmong(sz.w.transitions(start, time.Now()), nil)
		sz.res.HealthyAtEnd = len(sz.w.notHealthy(sz.names)) == 0
		say("zone %s (%s): %d false verdicts %v in %.1f node-hours; %d of %d zone packets dropped; healthy at end %v",
			sz.name, sz.res.Impairment, sz.res.FalseVerdicts, sz.res.FalseNodes, sz.res.NodeSeconds/3600, sz.res.Dropped, sz.res.Packets, sz.res.HealthyAtEnd)
	}
	for _, sz := range zones {
		rep.Zones = append(rep.Zones, sz.res)
	}
	rep.Took = time.Since(rep.Started)
	return rep, ctx.Err()
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// start starts the zone's agents at the shipped defaults and its watch.
func (sz *soakZone) start(ctx context.Context, c *testcluster.Cluster, cfg SoakConfig) error {
	w, err := watchZone(ctx, c.Client(), sz.name, oursState)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	sz.w = w
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(sz.spec.N)*time.Second)
	defer cancel()
	z, err := zonerun.Start(startCtx, c, zonerun.Options{
		Zone: sz.name, Nodes: sz.spec.N, NodePrefix: strings.TrimPrefix(sz.name, "soak-"),
		Binary: filepath.Join(cfg.BinDir, "edgequorum"), Dir: filepath.Join(cfg.DataDir, sz.name),
		AgentArgs: []string{"--log-level=info"},
	})
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	sz.z = z
	for _, a := range z.Agents() {
		sz.names = append(sz.names, a.Name)
		sz.ips = append(sz.ips, a.Kubelet.IP())
	}
	return nil
}

// bursts darkens one node at a time until ctx ends, counting the bursts.
func (sz *soakZone) bursts(ctx context.Context, nft string, r *rand.Rand) {
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	for {
		if sleep(ctx, between(burstGapMin, burstGapMax)) != nil {
			return
		}
		ip := sz.ips[r.IntN(len(sz.ips))]
		d := between(burstMin, sz.spec.BurstMax)
		if _, err := runNft(ctx, nft, fmt.Sprintf("add element ip %s %s_dark { %s }\n", SoakTable, sz.set, ip)); err != nil {
			if ctx.Err() == nil {
				sz.res.Errors = append(sz.res.Errors, fmt.Sprintf("burst: %v", err))
			}
			return
		}
		on := time.Now()
		_ = sleep(ctx, d)
		// The window's end must not leave a node dark: lift it regardless.
		lctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := runNft(lctx, nft, fmt.Sprintf("delete element ip %s %s_dark { %s }\n", SoakTable, sz.set, ip))
		cancel()
		sz.res.Bursts++
		sz.res.BurstSeconds += time.Since(on).Seconds()
		if err != nil {
			sz.res.Errors = append(sz.res.Errors, fmt.Sprintf("burst: %v", err))
			return
		}
	}
}

// soakRuleset is the nft script that (re)creates SoakTable: per zone a set
// of its nodes, a counter of the packets between them and its impairment's
// drop rules. Every address must be a zone node's loopback address, never
// the control plane's (checkZoneAddrs).
func soakRuleset(zones []*soakZone, exclude []netip.Addr) (string, error) {
	var b strings.Builder
	b.WriteString(dropTableScript(SoakTable))
	fmt.Fprintf(&b, "table ip %s {\n", SoakTable)
	var rules strings.Builder
	for _, sz := range zones {
		elems, err := checkZoneAddrs(sz.ips, exclude)
		if err != nil {
			return "", fmt.Errorf("zone %s: %w", sz.name, err)
		}
		fmt.Fprintf(&b, "\tset %s {\n\t\ttype ipv4_addr\n\t\telements = { %s }\n\t}\n", sz.set, strings.Join(elems, ", "))
		pair := fmt.Sprintf("ip saddr @%s ip daddr @%s", sz.set, sz.set)
		fmt.Fprintf(&rules, "\t\t%s counter comment \"%s seen\"\n", pair, sz.set)
		switch sz.spec.Kind {
		case SoakLoss:
			fmt.Fprintf(&rules, "\t\t%s numgen random mod 100 < %d counter drop comment \"%s lost\"\n", pair, sz.spec.Percent, sz.set)
		case SoakOneWay:
			fmt.Fprintf(&rules, "\t\tip saddr %s ip daddr @%s numgen random mod 100 < %d counter drop comment \"%s lost\"\n", elems[0], sz.set, sz.spec.Percent, sz.set)
		case SoakJitter:
			// Delayed by the zone's queue (jitter.go); only counted here.
		case SoakBurst:
			fmt.Fprintf(&b, "\tset %s_dark {\n\t\ttype ipv4_addr\n\t}\n", sz.set)
			fmt.Fprintf(&rules, "\t\tip saddr @%s_dark ip daddr @%s counter drop comment \"%s lost\"\n", sz.set, sz.set, sz.set)
			fmt.Fprintf(&rules, "\t\tip saddr @%s ip daddr @%s_dark counter drop comment \"%s lost\"\n", sz.set, sz.set, sz.set)
		default:
			return "", fmt.Errorf("zone %s: impairment %q", sz.name, sz.spec.Kind)
		}
	}
	b.WriteString("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
	b.WriteString(rules.String())
	b.WriteString("\t}\n}\n")
	return b.String(), nil
}

// soakCount is one zone's packets seen and dropped.
type soakCount struct{ seen, lost int64 }

var soakCounterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+.*comment "(\S+) (seen|lost)"`)

// parseSoakCounters sums the counters of `nft list table` by zone set.
func parseSoakCounters(listing string) map[string]soakCount {
	out := map[string]soakCount{}
	for line := range strings.Lines(listing) {
		m := soakCounterRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			continue
		}
		c := out[m[2]]
		if m[3] == "seen" {
			c.seen += v
		} else {
			c.lost += v
		}
		out[m[2]] = c
	}
	return out
}

// soakTotals sums node-hours and false verdicts by impairment and size, for
// the summary: "24 node-hours at 5 % loss, N = 3".
type soakTotal struct {
	Impairment    string
	Kind          string
	BurstMax      time.Duration
	N, Zones      int
	NodeHours     float64
	FalseVerdicts int
	Healthy       bool
}

func soakTotals(zs []SoakZone) []soakTotal {
	var out []soakTotal
	for _, z := range zs {
		if z.Seconds == 0 {
			continue
		}
		i := slices.IndexFunc(out, func(t soakTotal) bool { return t.Impairment == z.Impairment && t.N == z.N })
		if i < 0 {
			out = append(out, soakTotal{Impairment: z.Impairment, Kind: z.Kind, BurstMax: z.BurstMax, N: z.N, Healthy: true})
			i = len(out) - 1
		}
		out[i].Zones++
		out[i].NodeHours += z.NodeSeconds / 3600
		out[i].FalseVerdicts += z.FalseVerdicts
		out[i].Healthy = out[i].Healthy && z.HealthyAtEnd
	}
	return out
}

// NewDataDir makes a fresh directory for zones' data, on /dev/shm when
// there is one: the agents' fsyncs would otherwise measure the disk.
func NewDataDir() (string, error) {
	parent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		parent = "/dev/shm"
	}
	return os.MkdirTemp(parent, "edgequorum-bench-data-")
}
