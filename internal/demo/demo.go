package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// Options shape the demo.
type Options struct {
	// Nodes is the zone size.
	Nodes int
	// Dir keeps the control plane's data and every component's log.
	Dir string
	// Binary is the edgequorum binary the agents and webhook run.
	Binary string
	// Grace is the node lifecycle controller's node-monitor-grace-period.
	Grace time.Duration
	// Toleration is the pods' tolerationSeconds for unreachable:NoExecute:
	// without edgequorum they are evicted this long after the taint.
	Toleration time.Duration
	// Hold keeps everything running after the story until ctx ends.
	Hold bool
	// Out receives the narration and the table.
	Out io.Writer
}

// DefaultOptions returns a story that takes about five minutes.
func DefaultOptions() Options {
	return Options{Nodes: 5, Grace: 20 * time.Second, Toleration: 30 * time.Second, Out: os.Stdout}
}

const (
	zoneName = "edge-demo"
	appName  = "web"
)

// Run plays the story. It returns when the story is over (or, with Hold, when
// ctx ends) and leaves no process behind.
func Run(ctx context.Context, opts Options) (err error) {
	if opts.Nodes < 3 {
		return errors.New("--nodes must be at least 3: a zone needs a majority that survives a dead node")
	}
	if opts.Dir == "" {
		return errors.New("--dir is required")
	}
	out := opts.Out
	say := func(format string, a ...any) { fmt.Fprintf(out, format+"\n", a...) }
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	logf, err := os.Create(filepath.Join(opts.Dir, "demo.log"))
	if err != nil {
		return err
	}
	defer logf.Close()

	say("edgequorum-dev demo — logs of every component are kept in %s", opts.Dir)
	say("\n▶ starting a local control plane (etcd, kube-apiserver, kube-controller-manager; node grace %s)", opts.Grace)
	c, err := testcluster.Start(ctx, testcluster.Options{
		Dir:                    filepath.Join(opts.Dir, "cluster"),
		NodeMonitorGracePeriod: opts.Grace,
		Logger:                 slog.New(slog.NewTextHandler(logf, nil)),
	})
	if err != nil {
		return fmt.Errorf("start control plane (did `make controlplane` run?): %w", err)
	}
	defer func() {
		say("\n▶ stopping everything")
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	client := c.Client()

	say("▶ starting a zone of %d edge nodes (fake kubelets) with an edgequorum agent each, plus a cloud node", opts.Nodes)
	z, err := zonerun.Start(ctx, c, zonerun.Options{Zone: zoneName, Nodes: opts.Nodes, Binary: opts.Binary, Dir: filepath.Join(opts.Dir, "zone")})
	if err != nil {
		return err
	}
	defer z.Stop()
	var nodes []string
	for _, a := range z.Agents() {
		nodes = append(nodes, a.Name)
	}

	say("▶ starting the admission webhook and registering it (MutatingWebhookConfiguration, caBundle from `edgequorum certs`)")
	wh, err := zonerun.StartWebhook(ctx, c, z.Binary(), filepath.Join(opts.Dir, "webhook"),
		"--repair-period=10s")
	if err != nil {
		return err
	}
	defer wh.Stop()

	say("▶ deploying Service %q with one pod per zone node (tolerating unreachable for %s)", appName, opts.Toleration)
	if err := deployApp(ctx, client, nodes, opts.Toleration); err != nil {
		return err
	}

	t := newTable(client, nodes)
	stopTable := t.print(ctx, out, 3*time.Second)
	defer stopTable()

	wait := func(timeout time.Duration, cond func() bool) error {
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				return errors.New("timed out")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		return nil
	}
	pause := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}

	t.narrate("Act 1 — a healthy zone: every node judged healthy by its peers")
	if err := wait(2*time.Minute, func() bool { return t.snapshot().all(func(r row) bool { return r.verdict == "healthy" && r.endpoint }) }); err != nil {
		return fmt.Errorf("zone did not become healthy: %w", err)
	}
	if err := pause(6 * time.Second); err != nil {
		return err
	}

	t.narrate(fmt.Sprintf("Act 2 — the WAN link drops: the whole zone is cut from the cloud. "+
		"Upstream Kubernetes marks the nodes Unknown after %s and would evict every pod %s later. Watch the taints, pods and endpoints.", opts.Grace, opts.Toleration))
	z.CutCloud()
	if err := wait(3*time.Minute, func() bool { return t.snapshot().all(func(r row) bool { return r.ready == "Unknown" }) }); err != nil {
		return fmt.Errorf("nodes did not go Unknown: %w", err)
	}
	if err := pause(2*opts.Toleration + 10*time.Second); err != nil {
		return err
	}
	s := t.snapshot()
	kept := s.all(func(r row) bool { return r.pod == "Running" && r.endpoint && !r.noExecute })
	t.narrate(fmt.Sprintf("%s after two toleration periods cut off: %d/%d pods running, %d/%d endpoints ready, no NoExecute taint stored",
		check(kept), s.count(func(r row) bool { return r.pod == "Running" }), len(nodes), s.count(func(r row) bool { return r.endpoint }), len(nodes)))

	t.narrate("Act 3 — the link comes back")
	if err := z.ReconnectCloud(ctx); err != nil {
		return err
	}
	if err := wait(2*time.Minute, func() bool { return t.snapshot().all(func(r row) bool { return r.ready == "True" }) }); err != nil {
		return fmt.Errorf("nodes did not come back: %w", err)
	}

	victim := z.Agents()[len(nodes)-1]
	if l, err := z.Leader(ctx); err == nil && l == victim {
		victim = z.Agents()[0]
	}
	t.narrate(fmt.Sprintf("Act 4 — node %s dies (agent and kubelet). Its peers judge it unhealthy; the webhook leaves it to upstream eviction.", victim.Name))
	victim.Kill()
	victim.Kubelet.Kill()
	evicted := wait(3*time.Minute+opts.Toleration, func() bool {
		r := t.snapshot().get(victim.Name)
		return r.verdict == "unhealthy" && r.pod != "Running" && !r.endpoint
	})
	r := t.snapshot().get(victim.Name)
	t.narrate(fmt.Sprintf("%s %s: verdict %s, NoExecute taint %v, pod %s, endpoint ready %v", check(evicted == nil), victim.Name, r.verdict, r.noExecute, r.pod, r.endpoint))

	stopTable()
	say("\nThe story is over. Logs: %s (cluster/logs, zone/<node>/agent.log, webhook/webhook.log)", opts.Dir)
	if opts.Hold {
		say("Everything keeps running; press Ctrl-C to stop. Try: %s status --address %s", z.Binary(), z.Agents()[0].StatusAddress())
		<-ctx.Done()
	}
	if !kept || evicted != nil {
		return errors.New("the demo did not go as told; see the table and the logs")
	}
	return nil
}

func check(ok bool) string {
	if ok {
		return "✔"
	}
	return "✘"
}

func deployApp(ctx context.Context, c kubernetes.Interface, nodes []string, toleration time.Duration) error {
	_, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: appName},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": appName},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	secs := ptr.To(int64(toleration / time.Second))
	for _, node := range nodes {
		_, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: appName + "-" + node, Labels: map[string]string{"app": appName}},
			Spec: corev1.PodSpec{NodeName: node,
				Tolerations: []corev1.Toleration{
					{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs},
					{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: secs},
				},
				Containers: []corev1.Container{{Name: "web", Image: "web", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
	}
	return nil
}

// row is what the table shows for one node.
type row struct {
	node      string
	ready     string
	verdict   string
	noExecute bool
	pod       string
	endpoint  bool
}

type snapshot []row

func (s snapshot) all(f func(row) bool) bool { return s.count(f) == len(s) && len(s) > 0 }

func (s snapshot) count(f func(row) bool) int {
	n := 0
	for _, r := range s {
		if f(r) {
			n++
		}
	}
	return n
}

func (s snapshot) get(node string) row {
	for _, r := range s {
		if r.node == node {
			return r
		}
	}
	return row{}
}

// table reads what Kubernetes says about the zone and prints it.
type table struct {
	client kubernetes.Interface
	nodes  []string
	mu     sync.Mutex
	last   snapshot
	start  time.Time
	notes  chan string
}

func newTable(c kubernetes.Interface, nodes []string) *table {
	return &table{client: c, nodes: nodes, start: time.Now(), notes: make(chan string, 16)}
}

func (t *table) narrate(s string) { t.notes <- s }

func (t *table) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *table) read(ctx context.Context) snapshot {
	var s snapshot
	ready := map[string]bool{}
	if slices, err := t.client.DiscoveryV1().EndpointSlices("default").List(ctx,
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + appName}); err == nil {
		for _, sl := range slices.Items {
			for _, e := range sl.Endpoints {
				if e.NodeName != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					ready[*e.NodeName] = true
				}
			}
		}
	}
	for _, n := range t.nodes {
		r := row{node: n, ready: "-", verdict: "-", pod: "gone", endpoint: ready[n]}
		if node, err := t.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{}); err == nil {
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					r.ready = string(c.Status)
				}
			}
			for _, tn := range node.Spec.Taints {
				if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute {
					r.noExecute = true
				}
			}
			if a, err := zone.ParseAnnotation(node.Annotations[zone.AnnotationKey]); err == nil {
				r.verdict = string(a.State)
			}
		}
		if p, err := t.client.CoreV1().Pods("default").Get(ctx, appName+"-"+n, metav1.GetOptions{}); err == nil {
			r.pod = string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				r.pod = "Evicted"
			}
		}
		s = append(s, r)
	}
	sort.Slice(s, func(i, j int) bool { return s[i].node < s[j].node })
	return s
}

// print refreshes the snapshot every period and prints the table whenever it
// changes, with narration in between. The returned function stops it.
func (t *table) print(ctx context.Context, out io.Writer, period time.Duration) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var shown string
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			s := t.read(ctx)
			if ctx.Err() != nil {
				return // reads failed for being cancelled, not for anything to show
			}
			t.mu.Lock()
			t.last = s
			t.mu.Unlock()
			if txt := render(s); txt != shown {
				fmt.Fprintf(out, "\n[%s]\n%s", time.Since(t.start).Round(time.Second), txt)
				shown = txt
			}
			select {
			case <-ctx.Done():
				return
			case note := <-t.notes:
				fmt.Fprintf(out, "\n=== %s\n", note)
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

func render(s snapshot) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREADY\tVERDICT\tUNREACHABLE:NOEXECUTE\tPOD\tENDPOINT READY")
	for _, r := range s {
		taint := "-"
		if r.noExecute {
			taint = "tainted"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", r.node, r.ready, r.verdict, taint, r.pod, r.endpoint)
	}
	tw.Flush()
	return b.String()
}
