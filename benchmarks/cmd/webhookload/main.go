// Command webhookload measures what the admission webhook costs, loaded as
// production would load it. It runs `webhookload -serve` as a child process:
// the real webhook, repair loop on and leading, whose informer caches hold
// -nodes nodes in zones of -zone-size and -pods pods, and an EndpointSlice
// and an Endpoints object per Service of ten pods in the repair loop's
// caches. Nodes carry a kubelet's status (conditions, resources, 40-50
// images; 10-20 KB as JSON). A fake API in the same process stands in for
// the apiserver; it keeps the cluster encoded outside the Go heap and
// decodes every list anew, so the webhook's caches are its own. The child's
// Go memory limit is 90 % of the webhook container's memory limit
// (-memory-limit).
//
// It sends the child AdmissionReviews over HTTPS on loopback, open loop at
// -rate per second for each hooked kind in turn, the way the apiserver
// would: a node the node lifecycle controller taints, a pod it marks not
// ready, an EndpointSlice with endpoints not ready, replaying up to 5000
// distinct ones of each so that caches and memos are not all hot. Every
// review is one the webhook changes, the most expensive path. Latency is
// timed from when each review was due, so the generator's own lag counts.
// With -pin the generator and the webhook run on a CPU each.
//
// It reports, in -out/webhook.md and webhook.json, latency p50/p99 per kind
// against p99 ≤ 5 ms, reviews per CPU-second of the webhook against 2000 per
// core, and the webhook's RSS and live heap against RSS ≤ 1 GiB and ≤ 1.5×
// the live heap, with the fake API's share taken out; and what the repair
// loop wrote and the webhook logged above Info. `make bench` and `make
// bench-quick` run it. Linux only, like the rest of the suite.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
	"github.com/edgequorum/edgequorum/benchmarks/suite"
)

// The targets: p99 at or under 5 ms at 500 reviews/s, at least 2000
// reviews per second per core of the webhook, and RSS at most 1 GiB and
// 1.5 times the live heap.
const (
	targetP99        = 5 * time.Millisecond
	targetPerCore    = 2000
	targetRSSMiB     = 1024
	targetRSSPerHeap = 1.5
)

// deployedMemoryLimit is the webhook container's memory limit in
// deploy/webhook/base/deployment.yaml (TestMemoryLimitAsDeployed keeps them
// equal).
const deployedMemoryLimit = "512Mi"

// deployedGOMAXPROCS is the GOMAXPROCS Go gives the webhook as deployed:
// its container's CPU limit is one core, which the runtime rounds up to 2
// on a host of two CPUs or more. Pinned to one CPU, the child would
// otherwise run with 1, and its collector's marking would then take turns
// with the reviews instead of running beside them.
const deployedGOMAXPROCS = 2

// options are one run's settings.
type options struct {
	nodes, pods, zoneSize int
	rate                  int
	duration              time.Duration
	out, dir, profile     string
	// memLimit is the webhook container's memory limit in bytes; the
	// child's Go soft limit is memLimitPercent of it. 0 sets none.
	memLimit int64
	// driverCPU and webhookCPU are the CPUs the load generator and the
	// webhook are pinned to; -1 leaves them to the scheduler.
	driverCPU, webhookCPU int
}

func main() {
	var (
		serve    = flag.Bool("serve", false, "run the webhook under test (the child process)")
		nodes    = flag.Int("nodes", 5000, "nodes in the webhook's caches, a multiple of -zone-size")
		pods     = flag.Int("pods", 50000, "pods in the webhook's caches, spread over the nodes")
		zoneSize = flag.Int("zone-size", 50, "nodes per zone (fleet sites have 3)")
		rate     = flag.Int("rate", 500, "reviews per second for each kind")
		duration = flag.Duration("duration", 20*time.Second, "how long each kind is driven")
		out      = flag.String("out", "benchmarks/results", "directory for webhook.md and webhook.json")
		dir      = flag.String("dir", "", "directory for the child's TLS files and reviews (default: a temporary one)")
		profile  = flag.String("cpuprofile", "", "write the webhook's CPU profile over the whole load to this file")
		memLimit = flag.String("memory-limit", deployedMemoryLimit, "the webhook container's memory limit (deploy/webhook); the webhook's Go memory limit is 90 % of it; 0 sets none")
		pin      = flag.Bool("pin", runtime.NumCPU() >= 2, "run the load generator and the webhook on a CPU each")
		cpu      = flag.Int("cpu", -1, "with -serve: the CPU to run the webhook on; -1 leaves it to the scheduler")
	)
	flag.Parse()
	o := options{nodes: *nodes, pods: *pods, zoneSize: *zoneSize, rate: *rate, duration: *duration,
		out: *out, dir: *dir, profile: *profile, driverCPU: -1, webhookCPU: *cpu}
	q, err := resource.ParseQuantity(*memLimit)
	o.memLimit = q.Value()
	switch {
	case err != nil:
		err = fmt.Errorf("-memory-limit %q: %w", *memLimit, err)
	case o.memLimit < 0:
		err = fmt.Errorf("-memory-limit %s: want a size, or 0 for none", *memLimit)
	case *zoneSize < 3 || *nodes < *zoneSize || *nodes%*zoneSize != 0:
		err = fmt.Errorf("-nodes %d, -zone-size %d: want zones of at least 3, and only full ones", *nodes, *zoneSize)
	case *pods < *nodes:
		err = fmt.Errorf("-nodes %d, -pods %d: want a pod on each node", *nodes, *pods)
	case *rate < 1 || *duration < time.Second:
		err = fmt.Errorf("-rate %d, -duration %s: want at least 1/s for at least 1s", *rate, *duration)
	case *serve:
		if o.webhookCPU >= 0 {
			err = pinTo(o.webhookCPU)
		}
		if err == nil {
			err = runServer(o)
		}
	default:
		if *pin {
			o.driverCPU, o.webhookCPU, err = pinDriver()
		}
		if err == nil {
			err = drive(o)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "webhookload: %v\n", err)
		os.Exit(1)
	}
}

// Result is one kind's measurement.
type Result struct {
	Kind     string `json:"kind"`
	Distinct int    `json:"distinct"`
	Reviews  int    `json:"reviews"`
	// Rate is the rate achieved, which the webhook's slowness lowers only
	// through the last answers' wait: the load is open loop.
	Rate  float64 `json:"ratePerSecond"`
	P50ms float64 `json:"p50ms"`
	P99ms float64 `json:"p99ms"`
	MaxMs float64 `json:"maxMs"`
	// LagP99ms is how late the generator started sending a review, past
	// when it was due; the latencies include it.
	LagP99ms float64 `json:"sendLagP99ms"`
	Errors   int     `json:"errors"`
	Mutated  int     `json:"mutated"`
	// CPUShare is the webhook process's CPU over the window, its repair
	// loop's included, in cores.
	CPUShare float64 `json:"cpuShareOfCore"`
	// DriverCPUShare is the load generator's, and OtherCPU everything
	// else's on the host, in cores: a busy host shows there.
	DriverCPUShare float64 `json:"driverCPUShareOfCore"`
	OtherCPU       float64 `json:"otherCPUCores"`
	PerCPUSecond   float64 `json:"reviewsPerCPUSecond"`
	TargetOK       bool    `json:"p99TargetMet"`
	// CoreTargetOK: p99 within target and at least targetPerCore reviews
	// per CPU-second.
	CoreTargetOK bool `json:"perCoreTargetMet"`
}

// Report is the whole run.
type Report struct {
	Nodes          int     `json:"nodes"`
	Pods           int     `json:"pods"`
	ZoneSize       int     `json:"zoneSize"`
	EndpointSlices int     `json:"endpointSlices"`
	NodeBytes      int     `json:"nodeBytes"`
	Rate           int     `json:"ratePerSecond"`
	Duration       string  `json:"durationPerKind"`
	SyncSeconds    float64 `json:"cacheSyncSeconds"`
	SettleSeconds  float64 `json:"repairSettleSeconds"`
	// IdleCPUShare is the webhook's CPU before the load, in cores: the
	// repair loop's rescans, zone view and leader renewals.
	IdleCPUShare  float64 `json:"idleCPUShareOfCore"`
	IdleSeconds   float64 `json:"idleSeconds"`
	IdleRSSMiB    float64 `json:"rssAfterSyncMiB"`
	PeakRSSMiB    float64 `json:"peakRSSMiB"`
	FakeAPIRSSMiB float64 `json:"rssBeforeWebhookMiB"`
	FakeStoreMiB  float64 `json:"fakeAPIStoreMiB"`
	CacheHeapMiB  float64 `json:"cacheHeapMiB"`
	LiveHeapMiB   float64 `json:"liveHeapAfterLoadMiB"`
	// The webhook's RSS is the process's minus what it held before the
	// webhook started (the fake API's).
	WebhookRSSMiB     float64 `json:"webhookRSSAfterSyncMiB"`
	WebhookPeakRSSMiB float64 `json:"webhookPeakRSSMiB"`
	PeakRSSPerHeap    float64 `json:"webhookPeakRSSPerLiveHeap"`
	MemoryTargetOK    bool    `json:"memoryTargetMet"`
	ContainerLimitMiB float64 `json:"containerMemoryLimitMiB"`
	GoMemLimitMiB     float64 `json:"goMemoryLimitMiB"`
	DriverCPUs        []int   `json:"driverCPUs"`
	WebhookCPUs       []int   `json:"webhookCPUs"`
	DriverGOMAXPROCS  int     `json:"driverGOMAXPROCS"`
	WebhookGOMAXPROCS int     `json:"webhookGOMAXPROCS"`
	// Repair is what the repair loop did and the webhook logged.
	Repair done      `json:"repair"`
	CPUs   int       `json:"hostCPUs"`
	Kinds  []Result  `json:"kinds"`
	At     time.Time `json:"at"`
	// Commit and Machine say which build ran where.
	Commit  string `json:"commit"`
	Machine string `json:"machine"`
}

func drive(o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir, err := os.MkdirTemp("", "webhookload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("webhookload: starting a webhook over %d nodes in zones of %d and %d pods...\n", o.nodes, o.zoneSize, o.pods)
	child := exec.CommandContext(ctx, exe, "-serve", "-nodes="+strconv.Itoa(o.nodes), "-pods="+strconv.Itoa(o.pods),
		"-zone-size="+strconv.Itoa(o.zoneSize), "-dir="+dir, "-cpuprofile="+o.profile,
		"-memory-limit="+strconv.FormatInt(o.memLimit, 10), "-cpu="+strconv.Itoa(o.webhookCPU))
	child.Stderr = os.Stderr
	if o.webhookCPU >= 0 && os.Getenv("GOMAXPROCS") == "" {
		child.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(deployedGOMAXPROCS))
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return err
	}
	// The child serves until its stdin closes: when we return, or die.
	stdin, err := child.StdinPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := child.Start(); err != nil {
		return fmt.Errorf("start the webhook: %w", err)
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			// Let it stop on its own (and write its profile), then
			// make sure.
			_ = stdin.Close()
			t := time.AfterFunc(30*time.Second, cancel)
			defer t.Stop()
			_ = child.Wait()
		})
	}
	defer stop()
	lines := bufio.NewReader(stdout)
	var rd ready
	if err := readLine(lines, &rd); err != nil {
		return fmt.Errorf("the webhook's ready line: %w", err)
	}
	pid := child.Process.Pid
	rep := Report{Nodes: o.nodes, Pods: o.pods, ZoneSize: o.zoneSize, EndpointSlices: rd.EndpointSlices, NodeBytes: rd.NodeBytes,
		Rate: o.rate, Duration: o.duration.String(), At: time.Now().UTC(), CPUs: runtime.NumCPU(),
		SyncSeconds: rd.SyncSeconds, SettleSeconds: rd.SettleSeconds, FakeAPIRSSMiB: rd.FakeAPIRSSMiB, FakeStoreMiB: rd.FakeStoreMiB,
		CacheHeapMiB: rd.CacheHeapMiB, ContainerLimitMiB: float64(o.memLimit) / (1 << 20), GoMemLimitMiB: rd.GoMemLimitMiB,
		WebhookCPUs: rd.CPUs, WebhookGOMAXPROCS: rd.GOMAXPROCS, Commit: suite.ThisCommit(), Machine: suite.ThisMachine().String()}
	if rep.IdleRSSMiB, err = rssMiB(pid); err != nil {
		return err
	}
	fmt.Printf("webhookload: ready in %.1fs (caches synced in %.1fs, repair loop settled in %.1fs); live heap of the webhook %.0f MiB; process RSS %.0f MiB, of which %.0f MiB before the webhook started\n",
		time.Since(start).Seconds(), rd.SyncSeconds, rd.SettleSeconds, rd.CacheHeapMiB, rep.IdleRSSMiB, rd.FakeAPIRSSMiB)

	// The webhook's own background work, before any review.
	idle := min(o.duration, 10*time.Second)
	cpu0, err := procstat.CPU(pid)
	if err != nil {
		return err
	}
	time.Sleep(idle)
	cpu1, err := procstat.CPU(pid)
	if err != nil {
		return err
	}
	rep.IdleSeconds, rep.IdleCPUShare = idle.Seconds(), (cpu1-cpu0).Seconds()/idle.Seconds()
	fmt.Printf("webhookload: idle, the webhook used %.1f%% of a core over %s\n", 100*rep.IdleCPUShare, idle)

	client, err := httpsClient(rd.CAFile)
	if err != nil {
		return err
	}
	for _, kind := range []string{"node", "podstatus", "endpointslice"} {
		bodies, err := os.ReadFile(filepath.Join(dir, kind+".jsonl"))
		if err != nil {
			return err
		}
		r, err := load(ctx, client, "https://"+rd.Addr+"/mutate/"+kind, bytes.Split(bytes.TrimSpace(bodies), []byte("\n")), o.rate, o.duration, pid, o.driverCPU >= 0)
		if err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
		r.Kind, r.Distinct = kind, rd.Distinct[kind]
		fmt.Printf("webhookload: %-13s %d reviews (%d distinct) at %.0f/s: p50 %.2f ms, p99 %.2f ms, max %.2f ms (send lag p99 %.2f ms), %d errors, %d mutated, "+
			"webhook CPU %.0f%% of a core, %.0f reviews per CPU-second; generator %.0f%%, others %.0f%%\n",
			kind, r.Reviews, r.Distinct, r.Rate, r.P50ms, r.P99ms, r.MaxMs, r.LagP99ms, r.Errors, r.Mutated, 100*r.CPUShare, r.PerCPUSecond,
			100*r.DriverCPUShare, 100*r.OtherCPU)
		rep.Kinds = append(rep.Kinds, r)
	}
	peak, err := procstat.PeakRSS(pid)
	if err != nil {
		return err
	}
	rep.PeakRSSMiB = float64(peak) / (1 << 20)
	_ = stdin.Close()
	if err := readLine(lines, &rep.Repair); err != nil {
		return fmt.Errorf("the webhook's last line: %w", err)
	}
	stop()
	rep.LiveHeapMiB = rep.Repair.LiveHeapMiB
	rep.WebhookRSSMiB = rep.IdleRSSMiB - rep.FakeAPIRSSMiB
	rep.WebhookPeakRSSMiB = rep.PeakRSSMiB - rep.FakeAPIRSSMiB
	if rep.LiveHeapMiB > 0 {
		rep.PeakRSSPerHeap = rep.WebhookPeakRSSMiB / rep.LiveHeapMiB
	}
	rep.MemoryTargetOK = rep.WebhookPeakRSSMiB <= targetRSSMiB && rep.PeakRSSPerHeap <= targetRSSPerHeap
	rep.DriverGOMAXPROCS = runtime.GOMAXPROCS(0)
	if rep.DriverCPUs, err = allowedCPUs(); err != nil {
		return err
	}
	return write(o.out, rep)
}

// readLine reads one JSON line of the child's into v.
func readLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("the webhook exited: %w", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("%q: %w", line, err)
	}
	return nil
}

func httpsClient(caFile string) (*http.Client, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the webhook's CA does not parse")
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true,
	}}, nil
}

// dueAt is when review i of a run at rate per second that started at start
// is due. Latency counts from then, not from when the generator got round
// to sending it, so a generator that falls behind shows in the latencies
// instead of quietly lowering the load.
func dueAt(start time.Time, i, rate int) time.Time {
	return start.Add(time.Duration(i) * time.Second / time.Duration(rate))
}

// load sends bodies round-robin to url at rate per second for d, open loop:
// each review is sent when due, whatever the answers to earlier ones. It
// measures each review's latency from when it was due, and the webhook's CPU
// over the window.
//
// spin: the generator has a CPU of its own (see waitUntil).
func load(ctx context.Context, client *http.Client, url string, bodies [][]byte, rate int, d time.Duration, pid int, spin bool) (Result, error) {
	// Warm up connections for a moment, unmeasured.
	for i := range min(rate, 200) {
		if _, err := post(ctx, client, url, bodies[i%len(bodies)]); err != nil {
			return Result{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	var (
		mu        sync.Mutex
		latencies []float64
		lags      []float64
		errs      int
		mutated   int
		wg        sync.WaitGroup
	)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	cpu0, err := procstat.CPU(pid)
	if err != nil {
		return Result{}, err
	}
	self0, err := procstat.CPU(os.Getpid())
	if err != nil {
		return Result{}, err
	}
	host0, err := procstat.ReadHostCPU()
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	n := int(d.Seconds() * float64(rate))
	for i := range n {
		due := dueAt(start, i, rate)
		waitUntil(due, spin)
		wg.Go(func() {
			lag := time.Since(due)
			patched, err := post(ctx, client, url, bodies[i%len(bodies)])
			took := time.Since(due)
			mu.Lock()
			defer mu.Unlock()
			lags = append(lags, ms(lag))
			if err != nil {
				errs++
				return
			}
			latencies = append(latencies, ms(took))
			if patched {
				mutated++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := procstat.CPU(pid)
	if err != nil {
		return Result{}, err
	}
	self1, err := procstat.CPU(os.Getpid())
	if err != nil {
		return Result{}, err
	}
	host1, err := procstat.ReadHostCPU()
	if err != nil {
		return Result{}, err
	}
	r := Result{Reviews: n, Rate: float64(n) / elapsed.Seconds(), Errors: errs, Mutated: mutated,
		P50ms: stats.Percentile(latencies, 50), P99ms: stats.Percentile(latencies, 99), MaxMs: stats.Max(latencies),
		LagP99ms: stats.Percentile(lags, 99), CPUShare: (cpu1 - cpu0).Seconds() / elapsed.Seconds(),
		DriverCPUShare: (self1 - self0).Seconds() / elapsed.Seconds()}
	r.OtherCPU = max(0, procstat.Utilisation(host0, host1)*float64(runtime.NumCPU())-r.CPUShare-r.DriverCPUShare)
	if r.CPUShare > 0 {
		r.PerCPUSecond = r.Rate / r.CPUShare
	}
	r.TargetOK = errs == 0 && r.P99ms <= ms(targetP99)
	r.CoreTargetOK = r.TargetOK && r.PerCPUSecond >= targetPerCore
	return r, nil
}

// waitUntil returns at due. A sleep alone wakes up to a millisecond late, as
// the runtime's poller sleeps in whole milliseconds, and the latencies would
// count that; with spin, when the generator has a CPU of its own, it sleeps
// to a millisecond before and yields to the senders until due.
func waitUntil(due time.Time, spin bool) {
	if !spin {
		time.Sleep(time.Until(due))
		return
	}
	if d := time.Until(due) - time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(due) {
		runtime.Gosched()
	}
}

// post sends one review and reports whether the answer carried a patch.
func post(ctx context.Context, client *http.Client, url string, body []byte) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, answer)
	}
	return bytes.Contains(answer, []byte(`"patch":`)), nil
}

func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err != nil {
				return 0, err
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmRSS")
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("read the CPU affinity: %w", err)
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinDriver pins this process, the load generator, to the first CPU it may
// use and returns that CPU and the next one, for the webhook. The child
// starts on the generator's CPU (it inherits its affinity) and moves itself.
func pinDriver() (driver, webhook int, err error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return -1, -1, err
	}
	if len(cpus) < 2 {
		return -1, -1, fmt.Errorf("-pin needs two CPUs; this process may run on %v only", cpus)
	}
	if err := pinTo(cpus[0]); err != nil {
		return -1, -1, err
	}
	return cpus[0], cpus[1], nil
}

// pinTo moves every thread of this process onto cpu. Linux keeps an
// affinity per thread and a new thread inherits its creator's, so pinning
// every thread there is (the runtime starts several before main) pins every
// thread to come; a thread started while the loop runs is caught by the next
// pass. Go's runtime then lowers GOMAXPROCS to the one CPU within a second.
func pinTo(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	pinned := map[int]bool{}
	for {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list this process's threads: %w", err)
		}
		more := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || pinned[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
			}
			pinned[tid], more = true, true
		}
		if !more {
			return nil
		}
	}
}

func write(out string, rep Report) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "webhook.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Webhook cost\n\n`webhookload` at commit %s on %s, started %s.\n\n", rep.Commit, rep.Machine, rep.At.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "`webhookload`: one webhook process, repair loop on and leading, whose caches hold %d nodes (zones of %d, every node Unknown and vouched; "+
		"kubelet-style status with 40-50 images, %.1f KB per Node as JSON on average) and %d pods, and %d EndpointSlices and as many Endpoints "+
		"(a Service per ten pods, every endpoint ready) in the repair loop's caches. "+
		"AdmissionReviews over HTTPS on loopback, open loop at %d/s per kind for %s, replaying the distinct reviews in the table round-robin, "+
		"each one the webhook changes. Latency is timed from when each review was due, so the generator's own lag (send lag) counts. "+
		"CPU is the webhook process's alone, its repair loop's included. ",
		rep.Nodes, rep.ZoneSize, float64(rep.NodeBytes)/1000, rep.Pods, rep.EndpointSlices, rep.Rate, rep.Duration)
	if len(rep.DriverCPUs) == 1 && len(rep.WebhookCPUs) == 1 {
		fmt.Fprintf(&b, "The load generator ran on CPU %d (GOMAXPROCS %d), the webhook on CPU %d of the host's %d, with GOMAXPROCS %d "+
			"(as deployed: Go rounds the container's one-core CPU limit up to 2).\n\n",
			rep.DriverCPUs[0], rep.DriverGOMAXPROCS, rep.WebhookCPUs[0], rep.CPUs, rep.WebhookGOMAXPROCS)
	} else {
		fmt.Fprintf(&b, "Not pinned: the load generator (CPUs %v) competes with the webhook (CPUs %v) for the host's %d CPUs, and latency includes that.\n\n",
			rep.DriverCPUs, rep.WebhookCPUs, rep.CPUs)
	}
	fmt.Fprintf(&b, "| kind | distinct | reviews | rate/s | p50 ms | p99 ms | max ms | send lag p99 ms | errors | webhook CPU (%% core) | reviews per CPU-s | generator / others CPU (%% core) | p99 ≤ %d ms | ≥ %d/s per core at p99 ≤ %d ms |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", targetP99/time.Millisecond, targetPerCore, targetP99/time.Millisecond)
	for _, k := range rep.Kinds {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %.1f | %.0f | %.0f / %.0f | %s | %s |\n", k.Kind, k.Distinct, k.Reviews, k.Rate,
			k.P50ms, k.P99ms, k.MaxMs, k.LagP99ms, k.Errors, 100*k.CPUShare, k.PerCPUSecond, 100*k.DriverCPUShare, 100*k.OtherCPU,
			met(k.TargetOK), met(k.CoreTargetOK))
	}
	fmt.Fprintf(&b, "\nReviews per CPU-second is the rate over the webhook's CPU, background included: idle before the load it used %.1f %% of a core over %.0f s "+
		"(repair loop rescans, zone view, leader election).\n\n", 100*rep.IdleCPUShare, rep.IdleSeconds)

	goLimit := "none"
	if rep.GoMemLimitMiB > 0 {
		goLimit = fmt.Sprintf("%.0f MiB, %d %% of the container's %.0f MiB (what the webhook's --memory-limit=auto, as deploy/webhook runs it, sets under that container limit)",
			rep.GoMemLimitMiB, memLimitPercent, rep.ContainerLimitMiB)
	}
	fmt.Fprintf(&b, "Memory. The fake API lives in the webhook's process: it held %.0f MiB of RSS before the webhook started "+
		"(%.0f MiB of it its objects, protobuf-encoded outside the Go heap and decoded anew for every list, so the webhook's caches share nothing with it; "+
		"the rest the binary and the runtime). The webhook's figures are the process's minus that share; the targets are judged on them. "+
		"Go memory limit: %s.\n\n", rep.FakeAPIRSSMiB, rep.FakeStoreMiB, goLimit)
	fmt.Fprintf(&b, "| | process | webhook (process − fake API) |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| RSS after sync | %.0f MiB | %.0f MiB |\n", rep.IdleRSSMiB, rep.WebhookRSSMiB)
	fmt.Fprintf(&b, "| peak RSS (from the webhook's start) | %.0f MiB | %.0f MiB |\n", rep.PeakRSSMiB, rep.WebhookPeakRSSMiB)
	fmt.Fprintf(&b, "| live heap after a GC, after sync / after the load | | %.0f / %.0f MiB |\n", rep.CacheHeapMiB, rep.LiveHeapMiB)
	fmt.Fprintf(&b, "| peak RSS / live heap after the load | | %.2f |\n\n", rep.PeakRSSPerHeap)
	fmt.Fprintf(&b, "Target RSS ≤ %d MiB and ≤ %.1f × live heap: %s. Caches synced in %.1f s; the repair loop led and wrote its memory of every zone %.1f s later.\n\n",
		targetRSSMiB, targetRSSPerHeap, met(rep.MemoryTargetOK), rep.SyncSeconds, rep.SettleSeconds)

	r := rep.Repair
	leader := "led"
	if !r.RepairLeader {
		leader = "**did not lead**"
	}
	fmt.Fprintf(&b, "Repair loop: %s. Writes to the fake API over the run: %s. Counters: %s. Warnings logged: %d, errors: %d.\n",
		leader, joinCounts(r.Writes), joinCounts(r.Counters), r.Warnings, r.Errors)
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "- `%s`\n", p)
	}
	return os.WriteFile(filepath.Join(out, "webhook.md"), []byte(b.String()), 0o644)
}

// joinCounts lists counts by name, in name order.
func joinCounts[V int | float64](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %v", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
