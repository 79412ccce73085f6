package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// Run measures every fleet size of cfg in turn and returns what it measured.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = func(string, ...any) {}
	}
	var out []Result
	for _, sites := range cfg.Sites {
		r, err := runSize(ctx, cfg, sites)
		if err != nil {
			return out, fmt.Errorf("%d sites: %w", sites, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// fleet is one size's running fleet.
type fleet struct {
	cfg      Config
	sites    []*site
	dilation float64
	cluster  *testcluster.Cluster
	webhook  *zonerun.Webhook
	admin    kubernetes.Interface
	dynamic  dynamic.Interface
	pacer    *pacer
	kubelets *kubelets
	reviews  *reviews
	etcdURL  string
}

func (f *fleet) d(x time.Duration) time.Duration { return time.Duration(float64(x) * f.dilation) }

func runSize(ctx context.Context, cfg Config, n int) (Result, error) {
	f := &fleet{cfg: cfg, dilation: cfg.dilation(n)}
	progress := func(format string, args ...any) { cfg.Progress("[%d sites] "+format, append([]any{n}, args...)...) }
	dir := filepath.Join(cfg.WorkDir, fmt.Sprintf("sites-%d", n))
	if err := os.RemoveAll(dir); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	metricsPort, err := zonerun.FreePort()
	if err != nil {
		return Result{}, err
	}
	f.etcdURL = "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"
	tol := int64(outageToleration.Seconds() * f.dilation)
	progress("time dilation %.1f; starting etcd, kube-apiserver, kube-controller-manager in %s", f.dilation, dir)
	c, err := testcluster.Start(ctx, testcluster.Options{
		BinDir: cfg.BinDir, Dir: dir, AuditPolicy: auditPolicy,
		NodeMonitorGracePeriod:              f.d(nodeGrace),
		DefaultNotReadyTolerationSeconds:    tol,
		DefaultUnreachableTolerationSeconds: tol,
		ExtraAPIServerArgs:                  []string{"--audit-log-mode=batch", "--audit-log-maxsize=0"},
		ExtraEtcdArgs:                       []string{"--listen-metrics-urls=http://127.0.0.1:" + strconv.Itoa(metricsPort), "--quota-backend-bytes=8589934592"},
		LeaseRenewInterval:                  f.d(kubeletLeaseRenew),
		NodeStatusInterval:                  f.d(kubeletStatusEvery),
	})
	if err != nil {
		return Result{}, fmt.Errorf("start control plane: %w", err)
	}
	defer c.Stop()
	f.cluster, f.admin = c, c.Client()
	progress("starting the webhook as deploy/webhook ships it")
	// The one period of the webhook's own that a dilated fleet stretches:
	// the longest zone Lease it believes (the quiet ones are dilated).
	wh, err := zonerun.StartWebhook(ctx, c, filepath.Join(cfg.BinDir, "edgequorum"), filepath.Join(dir, "webhook"),
		"--max-zone-lease-duration="+f.d(time.Minute).String())
	if err != nil {
		return Result{}, fmt.Errorf("start webhook: %w", err)
	}
	defer wh.Stop()
	f.webhook = wh

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	f.pacer = newPacer()
	wg.Go(func() { f.pacer.run(runCtx, 16) })
	if err := f.build(runCtx, n, progress); err != nil {
		return Result{}, err
	}
	if err := f.waitQuiet(runCtx, progress); err != nil {
		return Result{}, err
	}
	settled := f.waitControllerManager(runCtx, n, progress)
	r, err := f.measure(ctx, n, progress)
	r.ControllerManagerSettled = settled
	if err != nil || cfg.OutageAt != n {
		return r, err
	}
	r.Outage, err = f.outage(ctx, r, progress)
	return r, err
}

// build registers the fleet's Nodes, Leases and pods, and schedules its
// kubelets and its followers' reachability checks.
func (f *fleet) build(ctx context.Context, n int, progress func(string, ...any)) error {
	cfg := f.cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f.admin = admin
	if f.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	f.kubelets = &kubelets{rest: admin.CoreV1().RESTClient(), coord: admin.CoordinationV1().RESTClient(), dilation: f.dilation}
	f.reviews = &reviews{rest: admin.AuthenticationV1().RESTClient()}
	for i := range n {
		s := &site{name: siteName(i)}
		for j := range f.cfg.NodesPerSite {
			name := nodeName(s.name, j)
			s.nodes = append(s.nodes, &simNode{name: name, site: s.name, key: nodeKey(name)})
		}
		f.sites = append(f.sites, s)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", fleetNamespace, err)
	}
	base, err := rest.TransportFor(f.cluster.RESTConfig())
	if err != nil {
		return err
	}
	// Site by site: its Nodes, its pods, then its leader, so that the
	// webhook makes its view of the first zones while the last register,
	// and the leaders start spread out.
	progress("registering %d sites: %d Nodes of about %d bytes, their Leases and %d pods each, then each site's leader",
		len(f.sites), len(f.sites)*f.cfg.NodesPerSite, f.cfg.NodeBytes, f.cfg.PodsPerNode)
	err = parallel(ctx, 16, len(f.sites), progress, "sites registered and led", func(i int) error {
		s := f.sites[i]
		for j, nd := range s.nodes {
			if err := f.kubelets.register(ctx, admin, nd, f.cfg.NodeBytes); err != nil {
				return err
			}
			f.schedule(nd, j > 0)
			for p := range f.cfg.PodsPerNode {
				created, err := admin.CoreV1().Pods(fleetNamespace).Create(ctx, pod(nd.name, p), metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("create pod on %s: %w", nd.name, err)
				}
				if err := runPod(ctx, admin, created); err != nil {
					return err
				}
			}
		}
		client, err := agentClient(f.cluster.RESTConfig(), base, s.nodes[0].name, &s.link)
		if err != nil {
			return err
		}
		if err := s.startLeader(ctx, client, f.dilation); err != nil {
			return fmt.Errorf("site %s: %w", s.name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// schedule starts nd's kubelet and, for a member that does not lead, its
// agent's reachability check, each at a random phase of its period.
func (f *fleet) schedule(nd *simNode, follower bool) {
	now := time.Now()
	lease, status, check := f.d(kubeletLeaseRenew), f.d(kubeletStatusEvery), f.d(2*time.Second)
	f.pacer.every(now.Add(jitter(lease)), lease, func(ctx context.Context) { f.kubelets.renewLease(ctx, nd) }, nil)
	f.pacer.every(now.Add(jitter(status)), status, func(ctx context.Context) { f.kubelets.postStatus(ctx, nd) }, nil)
	if follower {
		f.pacer.every(now.Add(jitter(check)), check, func(ctx context.Context) {
			if !nd.cut.Load() {
				f.reviews.check(ctx, nd.name)
			}
		}, nil)
	}
}

func jitter(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d))) }

// waitQuiet waits until every site's zone Lease is a quiet renewal: the
// steady state of a fleet where nothing happens.
func (f *fleet) waitQuiet(ctx context.Context, progress func(string, ...any)) error {
	deadline := time.Now().Add(f.d(5 * time.Minute))
	for {
		quiet, connected, verdicts := f.quietLeases(ctx), f.connectedZones(ctx), 0
		if nodes, err := f.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"}); err == nil {
			for _, n := range nodes.Items {
				if _, ok := n.Annotations[zone.AnnotationKey]; ok {
					verdicts++
				}
			}
		}
		progress("%d of %d zone Leases quiet, %d Nodes carry a verdict, %d EdgeZones Connected", quiet, len(f.sites), verdicts, connected)
		// Steady: the leaders renew quietly, and the webhook has made
		// its view of every zone.
		if quiet == len(f.sites) && connected >= len(f.sites) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d zone Leases quiet after %s (skew level %v; webhook log %s)",
				quiet, len(f.sites), f.d(5*time.Minute), skew.Current(), f.webhook.LogPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.d(5 * time.Second)):
		}
	}
}

// waitControllerManager waits, for at most three quiet renewal periods of
// fleet time and never more than settleCap, until the controller manager
// writes less than once per node per ten minutes of fleet time: after a
// registration at thousands of nodes its node lifecycle controller works off
// a backlog of taint passes and RegisteredNode Events for a while, which is
// no steady cost. It tells whether it did; the window starts either way.
func (f *fleet) waitControllerManager(ctx context.Context, n int, progress func(string, ...any)) bool {
	nodes := n * f.cfg.NodesPerSite
	limit := float64(nodes) / 600 // writes per second of fleet time
	bin := f.d(10 * time.Second)
	deadline := time.Now().Add(min(f.d(120*time.Second), settleCap))
	for {
		from := time.Now()
		st, err := os.Stat(f.cluster.AuditLogPath())
		if err != nil {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(bin):
		}
		to := time.Now()
		time.Sleep(2 * time.Second) // the batch audit backend's flush
		counts, err := countAudit(f.cluster.AuditLogPath(), st.Size(), from, to)
		if err != nil {
			return false
		}
		writes := 0
		for k, c := range counts {
			if k.Who == whoKCM && k.Kind == kindWrite {
				writes += c
			}
		}
		rate := float64(writes) / to.Sub(from).Seconds() * f.dilation
		if rate <= limit {
			progress("controller manager settled: %.1f writes/s (limit %.1f for %d nodes)", rate, limit, nodes)
			return true
		}
		if time.Now().After(deadline) {
			progress("controller manager still writes %.1f/s (limit %.1f): measuring anyway", rate, limit)
			return false
		}
		progress("controller manager writes %.1f/s (limit %.1f for %d nodes): waiting for it to settle", rate, limit, nodes)
	}
}

// settleCap bounds waitControllerManager in real time: at a dilation of 15
// three quiet periods would be half an hour of a run that must fit an hour.
const settleCap = 90 * time.Second

// connectedZones counts the EdgeZones the webhook shows Connected.
func (f *fleet) connectedZones(ctx context.Context) int {
	zones, err := f.dynamic.Resource(admission.EdgeZoneResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, z := range zones.Items {
		if st, _, _ := unstructured.NestedString(z.Object, "status", "state"); st == "Connected" {
			n++
		}
	}
	return n
}

// snapshot is what the measurement reads at each end of the window.
type snapshot struct {
	at        time.Time
	auditSize int64
	etcd      scrape.Sample
	webhook   scrape.Sample
	cpu       map[string]time.Duration
}

func (f *fleet) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), cpu: map[string]time.Duration{}}
	if st, err := os.Stat(f.cluster.AuditLogPath()); err == nil {
		s.auditSize = st.Size()
	}
	var err error
	if s.etcd, err = scrape.Fetch(ctx, f.etcdURL); err != nil {
		return s, fmt.Errorf("etcd metrics: %w", err)
	}
	text, err := f.webhook.Metrics(ctx)
	if err != nil {
		return s, err
	}
	if s.webhook, err = scrape.Parse(strings.NewReader(text)); err != nil {
		return s, fmt.Errorf("webhook metrics: %w", err)
	}
	pids := f.cluster.PIDs()
	pids["webhook"] = f.webhook.Pid()
	pids["bench"] = os.Getpid()
	for name, pid := range pids {
		if cpu, err := procstat.CPU(pid); err == nil {
			s.cpu[name] = cpu
		}
	}
	return s, nil
}

// measure counts the fleet's requests over the steady window.
func (f *fleet) measure(ctx context.Context, n int, progress func(string, ...any)) (Result, error) {
	window := time.Duration(f.cfg.Windows) * f.d(40*time.Second)
	f.pacer.lateness()
	errsBefore := f.kubelets.errors.Load() + f.reviews.errors.Load()
	before, err := f.snapshot(ctx)
	if err != nil {
		return Result{}, err
	}
	progress("steady state: measuring for %s (%d quiet renewal periods, dilated)", window.Round(time.Second), f.cfg.Windows)
	for left := window; left > 0; left -= 30 * time.Second {
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(min(left, 30*time.Second)):
		}
		if left > 30*time.Second {
			progress("%s left", (left - 30*time.Second).Round(time.Second))
		}
	}
	after, err := f.snapshot(ctx)
	if err != nil {
		return Result{}, err
	}
	late := f.pacer.lateness()
	// The batch audit backend flushes within a second or so.
	time.Sleep(3 * time.Second)
	counts, err := countAudit(f.cluster.AuditLogPath(), before.auditSize, before.at, after.at)
	if err != nil {
		return Result{}, err
	}
	secs := after.at.Sub(before.at).Seconds()
	r := Result{
		Sites: n, Nodes: n * f.cfg.NodesPerSite, Pods: n * f.cfg.NodesPerSite * f.cfg.PodsPerNode,
		NodeBytes: f.cfg.NodeBytes, Dilation: f.dilation, WindowSeconds: secs,
		MaxLatenessSeconds: late.Seconds(),
		SimErrors:          f.kubelets.errors.Load() + f.reviews.errors.Load() - errsBefore,
		Requests:           map[string]map[string]float64{},
	}
	if e, ok := f.kubelets.lastErr.Load().(string); ok {
		r.LastSimError = e
	}
	for k, c := range counts {
		key := k.Who + " " + k.Kind
		if r.Requests[key] == nil {
			r.Requests[key] = map[string]float64{}
		}
		// Per second of the fleet's own time: dilation slows every
		// cadence, so the measured rate is that much below the real one.
		r.Requests[key][k.Resource] += float64(c) / secs * f.dilation
	}
	r.EtcdPutsPerSecond = (after.etcd.Sum("etcd_mvcc_put_total", nil) - before.etcd.Sum("etcd_mvcc_put_total", nil)) / secs * f.dilation
	r.EtcdDBBytes = after.etcd.Sum("etcd_mvcc_db_total_size_in_bytes", nil)
	r.EtcdDBInUseBytes = after.etcd.Sum("etcd_mvcc_db_total_size_in_use_in_bytes", nil)
	r.CPU = map[string]float64{}
	for name, c := range after.cpu {
		r.CPU[name] = (c - before.cpu[name]).Seconds() / secs
	}
	if rss, err := procstat.PeakRSS(f.webhook.Pid()); err == nil {
		r.WebhookPeakRSSBytes = rss
	}
	r.WebhookLatency = latencies(before, after)
	progress("measured: %s", r.Summary())
	return r, nil
}

// parallel runs fn(0..n-1) on workers goroutines, reporting progress every
// tenth, and returns the first error.
func parallel(ctx context.Context, workers, n int, progress func(string, ...any), what string, fn func(int) error) error {
	var (
		next, done atomic.Int64
		first      error
		mu         sync.Mutex
		wg         sync.WaitGroup
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				if d := done.Add(1); d%int64(max(1, n/10)) == 0 {
					progress("%d of %d %s (%s)", d, n, what, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
