package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zoneport"
)

// tolerationSeconds is short so that, without edgequorum, eviction would come
// quickly: every scenario below watches several such periods.
const tolerationSeconds = 20

// app is one Service with one Ready pod on each zone node.
type app struct {
	name string
	pods map[string]string // pod → node
}

func deployApp(t *testing.T, c kubernetes.Interface, name string, nodes []string) *app {
	t.Helper()
	ctx := context.Background()
	a := &app{name: name, pods: map[string]string{}}
	_, err := c.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tol := []corev1.Toleration{
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
	}
	for _, node := range nodes {
		pod := name + "-" + node
		_, err := c.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: map[string]string{"app": name}},
			Spec: corev1.PodSpec{NodeName: node, Tolerations: tol,
				Containers: []corev1.Container{{Name: "web", Image: "web", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a.pods[pod] = node
	}
	poll.Until(t, 2*time.Minute, "every endpoint ready", func() (bool, string) {
		ready := a.readyEndpoints(t, c)
		return len(ready) == len(nodes), fmt.Sprintf("%d/%d ready", len(ready), len(nodes))
	})
	return a
}

// readyEndpoints returns the pods whose EndpointSlice endpoint is ready.
func (a *app) readyEndpoints(t *testing.T, c kubernetes.Interface) map[string]bool {
	t.Helper()
	slices, err := c.DiscoveryV1().EndpointSlices("default").List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + a.name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				out[e.TargetRef.Name] = true
			}
		}
	}
	return out
}

// deletedPods returns pods that are gone or terminating.
func (a *app) deletedPods(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	var out []string
	for pod := range a.pods {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			out = append(out, pod)
		}
	}
	return out
}

// podReady returns the Ready condition of pod as stored, for failure details
// and for waiting on a reconnected kubelet.
func (a *app) podReady(t *testing.T, c kubernetes.Interface, pod string) (corev1.ConditionStatus, time.Time) {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status, cond.LastTransitionTime.Time
		}
	}
	return corev1.ConditionUnknown, time.Time{}
}

// waitPodsReady waits until the kubelets of nodes have posted their pods Ready
// again. A reconnected kubelet posts its node Ready before it resyncs its pods,
// and the node lifecycle controller marked them not ready meanwhile; a scenario
// that starts before that resync finds a pod that was not Ready when its node
// went Unknown, which the webhook rightly leaves alone.
func (a *app) waitPodsReady(t *testing.T, c kubernetes.Interface, nodes ...string) {
	t.Helper()
	took := poll.Until(t, time.Minute, "pods Ready again", func() (bool, string) {
		for _, n := range nodes {
			pod := a.podOn(n)
			if st, _ := a.podReady(t, c, pod); st != corev1.ConditionTrue {
				return false, fmt.Sprintf("%s is %s", pod, st)
			}
		}
		return true, ""
	})
	t.Logf("pods on %v Ready again %s after their nodes were", nodes, took.Round(time.Millisecond))
}

func (a *app) podOn(node string) string {
	for pod, n := range a.pods {
		if n == node {
			return pod
		}
	}
	return ""
}

func nodeCondition(t *testing.T, c kubernetes.Interface, node string) (corev1.ConditionStatus, bool) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	noExecute := false
	for _, tn := range n.Spec.Taints {
		if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute {
			noExecute = true
		}
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status, noExecute
		}
	}
	return corev1.ConditionUnknown, noExecute
}

// taintWatch records every stored version of the watched nodes that carried
// unreachable:NoExecute, so "the taint never stays" is checked on every write,
// not on samples.
type taintWatch struct {
	mu      sync.Mutex
	tainted map[string]int
	stop    func()
}

func watchTaints(t *testing.T, c kubernetes.Interface, nodes []string) *taintWatch {
	t.Helper()
	tw := &taintWatch{tainted: map[string]int{}}
	tw.stop = watchNodes(t, c, nodes, func(n *corev1.Node) {
		for _, tn := range n.Spec.Taints {
			if tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute {
				tw.mu.Lock()
				tw.tainted[n.Name]++
				tw.mu.Unlock()
			}
		}
	})
	return tw
}

// watchNodes hands every state of the named nodes the apiserver stores to
// seen, from a watch, until the returned stop (also run at cleanup).
func watchNodes(t *testing.T, c kubernetes.Interface, nodes []string, seen func(*corev1.Node)) (stop func()) {
	t.Helper()
	watched := map[string]bool{}
	for _, n := range nodes {
		watched[n] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Error && watched[n.Name] {
				seen(n)
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); w.Stop(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// reset forgets what was seen so far.
func (tw *taintWatch) reset() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	clear(tw.tainted)
}

func (tw *taintWatch) seen() map[string]int {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	out := map[string]int{}
	for k, v := range tw.tainted {
		out[k] = v
	}
	return out
}

// holdFor checks cond on every poll for d, failing at the first violation.
// Scenarios that assert something does NOT happen must watch long enough for
// waitNodesReady waits until every node of nodes is Ready again, what a
// reconnected zone's kubelets report.
func waitNodesReady(t *testing.T, client kubernetes.Interface, what string, nodes []string) {
	t.Helper()
	poll.Until(t, 2*time.Minute, what+" Ready again", func() (bool, string) {
		for _, n := range nodes {
			if st, _ := nodeCondition(t, client, n); st != corev1.ConditionTrue {
				return false, fmt.Sprintf("%s is %s", n, st)
			}
		}
		return true, ""
	})
}

// it to have happened without edgequorum (several toleration periods).
func holdFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if ok, detail := cond(); !ok {
			t.Fatalf("%s broke: %s", what, detail)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitAllUnknown waits until every node of nodes is Ready=Unknown and returns
// how long that took.
func waitAllUnknown(t *testing.T, client kubernetes.Interface, nodes []string, timeout time.Duration) time.Duration {
	t.Helper()
	return poll.Until(t, timeout, "every zone node Ready=Unknown", func() (bool, string) {
		for _, n := range nodes {
			if st, _ := nodeCondition(t, client, n); st != corev1.ConditionUnknown {
				return false, fmt.Sprintf("%s is %s", n, st)
			}
		}
		return true, ""
	})
}

// holdZoneProtected checks that a whole zone cut from the cloud stays
// protected for d once protection is in place: no pod of web deleted, every
// one stored Ready, every endpoint ready, each of also holding, and no
// unreachable:NoExecute taint ever stored on nodes.
func holdZoneProtected(t *testing.T, client kubernetes.Interface, web *app, taints *taintWatch, nodes []string, d time.Duration, also ...func() (bool, string)) {
	t.Helper()
	protected := zoneProtected(t, client, web, nodes, also...)
	settleProtection(t, protected)
	holdFor(t, d, "zone protection", protected)
	if seen := taints.seen(); len(seen) > 0 {
		t.Errorf("unreachable:NoExecute was stored on %v", seen)
	}
}

// zoneProtected checks that no pod of web was deleted, its pods and endpoints
// on nodes are all Ready, and also holds.
func zoneProtected(t *testing.T, client kubernetes.Interface, web *app, nodes []string, also ...func() (bool, string)) func() (bool, string) {
	return func() (bool, string) {
		if del := web.deletedPods(t, client); len(del) > 0 {
			return false, fmt.Sprintf("pods deleted: %v", del)
		}
		if ok, detail := podsReady(t, client, web.name); !ok {
			return false, detail
		}
		if ready := web.readyEndpoints(t, client); len(ready) != len(nodes) {
			return false, fmt.Sprintf("only %d of %d endpoints ready", len(ready), len(nodes))
		}
		for _, check := range also {
			if ok, detail := check(); !ok {
				return false, detail
			}
		}
		return true, ""
	}
}

// settleProtection waits for protection to be in place once a node is seen
// Unknown. The EndpointSlice controller can write a slice before the webhook's
// node cache holds the Unknown condition it reacted to; the admission path
// then leaves the endpoint not ready, and the node's Unknown reaching the
// cache sends the repair loop to it at once (DESIGN.md, "Endpoints racing the
// webhook's caches"). holdFor checks from then on.
func settleProtection(t *testing.T, protected func() (bool, string)) {
	t.Helper()
	took := poll.Until(t, 15*time.Second, "protection in place", protected)
	t.Logf("protection in place %s after the node was seen Unknown", took.Round(time.Millisecond))
}

// TestWebhookEndToEnd runs the four scenarios of the webhook issue on one real
// control plane: the real KCM taints and marks pods not ready, the real
// taint-eviction controller evicts, and the webhook registered through a real
// MutatingWebhookConfiguration answers.
func TestWebhookEndToEnd(t *testing.T) {
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-w", Nodes: 5})
	ctx := context.Background()
	client := c.Client()
	all := names(z)
	waitHealthy(t, client, 2*time.Minute, all)

	wh := startWebhook(t, c, z)
	web := deployApp(t, client, "web", all)
	avail := deployReplicated(t, client, "avail", all)
	taints := watchTaints(t, client, all)
	const zoneName = "edge-w"
	// The zone as the cloud sees it: kubectl get edgezones, and the gauges
	// the shipped alerts read.
	connected := func(what string) {
		t.Helper()
		waitEdgeZone(t, c, zoneName, 2*time.Minute, what, func(st admission.EdgeZoneStatus, row map[string]string) (bool, string) {
			l, err := z.Leader(ctx)
			if err != nil {
				return false, err.Error()
			}
			if st.State != admission.ZoneConnected || st.Leader != l.Name || st.Nodes != len(all) || st.Protected != 0 ||
				row["STATE"] != "Connected" || row["LEADER"] != l.Name || row["NODES"] != strconv.Itoa(len(all)) || row["PROTECTION-LEFT"] != "" {
				return false, fmt.Sprintf("%v (leader %s)", row, l.Name)
			}
			return true, ""
		})
		waitGauges(t, wh, "the zone connected", func(g map[string]float64) (bool, string) {
			if ok, detail := zoneStateGauges(g, "connected"); !ok {
				return false, detail
			}
			return g["edgequorum_admission_protected_nodes"] == 0, fmt.Sprintf("protected_nodes %v", g["edgequorum_admission_protected_nodes"])
		})
	}
	connected("connected")

	nonLeaders := func() []*zonerun.Agent {
		l, err := z.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []*zonerun.Agent
		for _, a := range z.Agents() {
			if a != l && a.Running() {
				out = append(out, a)
			}
		}
		return out
	}

	if !t.Run("whole zone cut from the cloud", func(t *testing.T) {
		calls, _ := webhookCalls(t, client, podStatusWebhook)
		cutAt := time.Now()
		z.CutCloud()
		waitAllUnknown(t, client, all, 2*time.Minute)
		waitEdgeZone(t, c, zoneName, time.Minute, "cut off", func(st admission.EdgeZoneStatus, row map[string]string) (bool, string) {
			if st.State != admission.ZoneCutOff || st.Protected != len(all) || st.ProtectedUntil == nil || st.Since == nil ||
				!st.ProtectedUntil.Equal(&metav1.Time{Time: st.Since.Add(24 * time.Hour)}) ||
				row["STATE"] != "CutOff" || row["PROTECTED"] != strconv.Itoa(len(all)) || row["PROTECTION-LEFT"] != "23h" {
				return false, fmt.Sprintf("%v", row)
			}
			return true, ""
		})
		requireZoneEvent(t, c, zoneName, admission.EventZoneCutOff)
		waitGauges(t, wh, "the zone cut off, every node protected", func(g map[string]float64) (bool, string) {
			if ok, detail := zoneStateGauges(g, "cut_off"); !ok {
				return false, detail
			}
			left := g[`edgequorum_admission_zone_protection_left_seconds{zone="edge-w"}`]
			dark := g[`edgequorum_admission_zone_cut_off_seconds{zone="edge-w"}`]
			return g["edgequorum_admission_protected_nodes"] == float64(len(all)) && left > 23*3600 && left < 24*3600 && dark > 0 && dark < 600,
				fmt.Sprintf("protected_nodes %v, protection left %vs, dark %vs", g["edgequorum_admission_protected_nodes"], left, dark)
		})
		availablePods := func() (bool, string) {
			if ok, detail := podsReady(t, client, avail.name); !ok {
				return false, detail
			}
			return avail.available(t, client)
		}
		// Three toleration periods: without edgequorum every pod would be
		// evicted and every endpoint not ready by now, the Deployment
		// unavailable and its budget exhausted.
		holdZoneProtected(t, client, web, taints, all, 3*tolerationSeconds*time.Second, availablePods)
		logKCMRetries(t, c, all, cutAt)
		// The apiserver called the pods/status webhook for the node
		// lifecycle controller's writes and for nothing else: the
		// kubelets' pod status writes were kept away by matchConditions.
		after, excluded := webhookCalls(t, client, podStatusWebhook)
		marked := podStatusWrites(t, c, cutAt)
		t.Logf("pods/status webhook: called %v times for the node lifecycle controller's %d pod status writes; %v other writes excluded by matchConditions",
			after-calls, marked, excluded)
		if after-calls != float64(marked) || marked < 2*len(all) {
			t.Errorf("the pods/status webhook was called %v times for %d writes of the node lifecycle controller (want one call per write, for the %d pods at least)",
				after-calls, marked, 2*len(all))
		}
		if excluded == 0 {
			t.Error("matchConditions kept no pod status write from the webhook; the kubelets' writes should have been")
		}
		// kubectl describe node shows what the webhook did, once per
		// kind of change however often the controller retried.
		requireNodeEvents(t, client, all, []string{admission.EventPodsKeptReady}, []string{admission.EventTaintKeptOff})
		// And the zone's last word on each node, the EdgeQuorum condition
		// True, as the leader wrote it before the cut.
		for _, n := range all {
			requireConditionShowsVerdict(t, client, n)
		}
		// While the leader cannot write back, a stolen agent token tells
		// the cloud a node of the zone is dead: refused.
		requireStolenConditionRefused(t, c, all[0])
		// The same token writes an unsigned "unhealthy" verdict on the
		// Node itself: refused by the webhook's judgement, the node judged
		// by the verdict it last honoured. A webhook that restarts now
		// keeps nothing of its own: it reads its memory, and the node stays
		// protected. (While the one replica restarts, the controller's
		// taint may get through; the repair loop takes it off again.)
		writeUnsignedVerdict(t, c, all[0])
		wh.Stop()
		if err := wh.Start(); err != nil {
			t.Fatal(err)
		}
		if err := wh.WaitReady(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		untainted := func() (bool, string) {
			_, noExecute := nodeCondition(t, client, all[0])
			return !noExecute, all[0] + " tainted unreachable:NoExecute"
		}
		afterRestart := zoneProtected(t, client, web, all, availablePods, untainted)
		settleProtection(t, afterRestart)
		holdFor(t, tolerationSeconds*time.Second, "zone protection after a webhook restart during a forgery", afterRestart)
		taints.reset()
		// A leader handover in the middle of the cut: the new leader can
		// neither renew the zone Lease nor write a verdict, and the cloud
		// sees no change, checked while the leadership moves and for a
		// toleration period after. Its old leader stops (handing over) and
		// comes back.
		protected := zoneProtected(t, client, web, all, availablePods)
		lapsed := ""
		old, err := z.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old.Stop()
		poll.Until(t, time.Minute, "a new leader during the cut", func() (bool, string) {
			if ok, detail := protected(); !ok && lapsed == "" {
				lapsed = detail
			}
			l, err := z.Leader(ctx)
			if err != nil {
				return false, err.Error()
			}
			return l != old, l.Name + " leads"
		})
		if err := old.Start(); err != nil {
			t.Fatal(err)
		}
		if lapsed != "" {
			t.Errorf("protection lapsed during the handover: %s", lapsed)
		}
		if l, err := z.Leader(ctx); err == nil {
			t.Logf("leadership moved from %s to %s during the cut", old.Name, l.Name)
		}
		holdFor(t, tolerationSeconds*time.Second, "zone protection after the handover", protected)
		if err := z.ReconnectCloud(ctx); err != nil {
			t.Fatal(err)
		}
		waitNodesReady(t, client, "zone", all)
		web.waitPodsReady(t, client, all...)
		connected("connected again")
	}) {
		return
	}

	if !t.Run("one node cut while the zone is connected", func(t *testing.T) {
		cut := nonLeaders()[0]
		cut.CutCloud()
		poll.Until(t, 2*time.Minute, cut.Name+" Ready=Unknown", func() (bool, string) {
			st, _ := nodeCondition(t, client, cut.Name)
			return st == corev1.ConditionUnknown, string(st)
		})
		protected := func() (bool, string) {
			if del := web.deletedPods(t, client); len(del) > 0 {
				return false, fmt.Sprintf("pods deleted: %v", del)
			}
			pod := web.podOn(cut.Name)
			if st, since := web.podReady(t, client, pod); st != corev1.ConditionTrue {
				return false, fmt.Sprintf("pod %s Ready=%s since %s", pod, st, since.Format(time.RFC3339))
			}
			if !web.readyEndpoints(t, client)[pod] {
				return false, fmt.Sprintf("endpoint of %s not ready", pod)
			}
			return avail.available(t, client)
		}
		settleProtection(t, protected)
		holdFor(t, 3*tolerationSeconds*time.Second, "protection of "+cut.Name, protected)
		if seen := taints.seen(); seen[cut.Name] > 0 {
			t.Errorf("unreachable:NoExecute was stored on %s %d times", cut.Name, seen[cut.Name])
		}
		if err := cut.ReconnectCloud(ctx); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 2*time.Minute, cut.Name+" Ready again", func() (bool, string) {
			st, _ := nodeCondition(t, client, cut.Name)
			return st == corev1.ConditionTrue, string(st)
		})
		web.waitPodsReady(t, client, cut.Name)
	}) {
		return
	}

	if !t.Run("killed node is left to upstream eviction", func(t *testing.T) {
		victim := nonLeaders()[0]
		victim.Kill()
		victim.Kubelet.Kill()
		waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Unhealthy})
		// kubectl describe node shows the zone's word: the EdgeQuorum
		// condition False, written with the verdict, and the leader's Event.
		requireConditionShowsVerdict(t, client, victim.Name)
		requireLeaderEvent(t, client, victim.Name, apiwriter.EventJudgedUnhealthy)
		// kubectl describe edgezone: the zone's word on the dead node and
		// its peers' signed word that every probe of theirs fails on it.
		waitEdgeZone(t, c, zoneName, time.Minute, "judges "+victim.Name+" dead", func(st admission.EdgeZoneStatus, row map[string]string) (bool, string) {
			for _, m := range st.Members {
				if m.Name == victim.Name {
					return st.State == admission.ZoneConnected && m.Verdict == "unhealthy" && !m.Vouched && len(m.DownBy) > (len(all)-1)/2,
						fmt.Sprintf("%s: %+v", st.State, m)
				}
			}
			return false, victim.Name + " not listed"
		})
		poll.Until(t, 2*time.Minute, victim.Name+" tainted unreachable:NoExecute", func() (bool, string) {
			_, noExecute := nodeCondition(t, client, victim.Name)
			return noExecute, "no taint"
		})
		pod := web.podOn(victim.Name)
		took := poll.Until(t, 2*time.Minute, pod+" evicted", func() (bool, string) {
			for _, d := range web.deletedPods(t, client) {
				if d == pod {
					return true, ""
				}
			}
			return false, "still running"
		})
		t.Logf("%s evicted %s after its node was tainted (tolerationSeconds %d)", pod, took.Round(time.Second), tolerationSeconds)
		poll.Until(t, time.Minute, "its endpoint not ready", func() (bool, string) {
			return !web.readyEndpoints(t, client)[pod], "still ready"
		})
	}) {
		return
	}

	if !t.Run("a stolen follower cannot keep the killed node protected", func(t *testing.T) {
		// A thief with one follower's node key and its agent token writes
		// the zone Lease naming that follower, under the next term with
		// its own vote, and a verdict it signed calling the killed node
		// healthy, again and again. The webhook honours no Lease claim
		// without a majority's votes; and the zone reaches the cloud while
		// the cloud cannot hear the killed node: only a majority of its
		// peers could vouch for it.
		victim := ""
		for _, a := range z.Agents() {
			if !a.Running() {
				victim = a.Name
			}
		}
		thief := nonLeaders()[0]
		key, err := zoneport.LoadOrCreateNodeKey(thief.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", thief.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		stolen, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		committed, _ := annotation(t, client, victim)
		leases := stolen.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
		steal := func() (leaseOK, verdictOK bool) {
			l, err := leases.Get(ctx, zone.LeaseName(committed.Zone), metav1.GetOptions{})
			if err != nil {
				return false, false
			}
			term, _ := strconv.ParseUint(l.Annotations[zone.LeaseTermAnnotation], 10, 64)
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != thief.Name {
				term++
			}
			now := metav1.NewMicroTime(time.Now().Truncate(time.Microsecond))
			l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To(thief.Name), &now
			l.Annotations[zone.LeaseTermAnnotation] = strconv.FormatUint(term, 10)
			delete(l.Annotations, zone.LeaseEndorsesAnnotation)
			att := zone.Attestation{Zone: committed.Zone, Signer: thief.Name, At: time.Now(), Reach: []string{victim}}
			att.Sign(key)
			l.Annotations[zone.LeaseEvidenceAnnotation] = zone.FormatEvidence([]zone.Attestation{att})
			// Its own vote is all it can sign.
			vote := zone.LeaderVote{Zone: committed.Zone, Term: term, Leader: thief.Name, Signer: thief.Name}
			vote.Sign(key)
			l.Annotations[zone.LeaseLeadershipAnnotation] = zone.FormatLeadership([]zone.LeaderVote{vote})
			l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(key)
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				return false, false
			}
			lie := committed
			lie.State, lie.At, lie.Pros, lie.Cons = zone.Healthy, time.Now().UTC(), committed.Members-1, 0
			lie.Term, lie.Leader, lie.SignedTerm = term, thief.Name, term
			return true, writeVerdictAs(t, c, victim, thief.Name, key, lie) == nil
		}
		var accepted, verdicts, tainted, samples int
		end := time.Now().Add(30 * time.Second)
		for time.Now().Before(end) {
			leaseOK, verdictOK := steal()
			if leaseOK {
				accepted++
			}
			if verdictOK {
				verdicts++
			}
			if _, noExecute := nodeCondition(t, client, victim); noExecute {
				tainted++
			}
			samples++
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the thief's Lease writes went through %d of %d times, its verdicts %d times; %s tainted unreachable:NoExecute in %d of %d samples",
			accepted, samples, verdicts, victim, tainted, samples)
		if accepted == 0 {
			t.Fatal("no Lease write of the thief's went through: the test shows nothing")
		}
		// The webhook honours no claim of its, with only its own vote, so
		// the verdicts it signs are not the zone's and are denied.
		if verdicts != 0 {
			t.Errorf("%d of the thief's verdicts were admitted: its Lease claim was honoured", verdicts)
		}
		if tainted != samples {
			t.Errorf("%s lost its NoExecute taint in %d of %d samples while a stolen follower wrote the zone Lease", victim, samples-tainted, samples)
		}
		// The honest leader takes its Lease back and writes back the verdict.
		poll.Until(t, time.Minute, "the honest leader's Lease and verdict back", func() (bool, string) {
			l, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName(committed.Zone), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			a, _ := annotation(t, client, victim)
			return ptr.Deref(l.Spec.HolderIdentity, "") != thief.Name && a.State == zone.Unhealthy,
				fmt.Sprintf("holder %s, %s %s", ptr.Deref(l.Spec.HolderIdentity, ""), victim, a.State)
		})
	}) {
		return
	}

	if !t.Run("a compromised leader cannot keep the killed node protected", func(t *testing.T) {
		// A thief with the leader's node key and an agent token signs the
		// killed node healthy: the webhook honours the verdict as the
		// leader's, but protects no node the cloud cannot hear on one
		// member's word. Once the leadership moves, the forgery counts
		// no more, and the new leader writes the committed verdict back.
		victim := ""
		for _, a := range z.Agents() {
			if !a.Running() {
				victim = a.Name
			}
		}
		l, key := leaderKey(t, z)
		committed, ok := annotation(t, client, victim)
		if !ok || committed.State != zone.Unhealthy {
			t.Fatalf("%s carries %+v, want its committed unhealthy verdict", victim, committed)
		}
		term := zoneLeaseTerm(t, client, committed.Zone)
		forged := committed
		forged.State, forged.At, forged.Pros, forged.Cons = zone.Healthy, time.Now().UTC(), committed.Members-1, 0
		forged.Term, forged.Leader, forged.SignedTerm = term, l.Name, term
		if err := writeVerdictAs(t, c, victim, l.Name, key, forged); err != nil {
			t.Fatalf("the leader's own signed verdict was refused: %v", err)
		}
		// The leader's word alone buys nothing: the cloud cannot hear
		// the killed node, and no majority of its peers attests that
		// they reach it.
		holdFor(t, 20*time.Second, victim+"'s NoExecute taint under the leader's forged verdict", func() (bool, string) {
			_, noExecute := nodeCondition(t, client, victim)
			return noExecute, "taint removed"
		})
		l.Stop()
		var next *zonerun.Agent
		poll.Until(t, time.Minute, "a new leader", func() (bool, string) {
			n, err := z.Leader(ctx)
			if err != nil {
				return false, err.Error()
			}
			next = n
			return n != l, n.Name + " leads"
		})
		took := poll.Until(t, time.Minute, victim+" tainted unreachable:NoExecute again", func() (bool, string) {
			_, noExecute := nodeCondition(t, client, victim)
			return noExecute, "no taint"
		})
		t.Logf("%s leads from %s; %s tainted %s later", next.Name, l.Name, victim, took.Round(time.Second))
		poll.Until(t, time.Minute, "the committed verdict written back by "+next.Name, func() (bool, string) {
			a, _ := annotation(t, client, victim)
			return a.State == zone.Unhealthy && a.Signer == next.Name && a.SignedTerm > term, fmt.Sprintf("%+v", a)
		})
		requireConditionShowsVerdict(t, client, victim)
		if err := l.Start(); err != nil {
			t.Fatal(err)
		}
	}) {
		return
	}

	if !t.Run("a compromised leader cannot keep a node that died just before a whole-zone cut protected", func(t *testing.T) {
		// A member dies right after its kubelet renewed; its peers say it
		// is down, the leader writes their word into the zone Lease, and
		// the whole zone loses the cloud seconds later, while the cloud's
		// last sign of the dead node's kubelet is still recent. Then a
		// thief with the leader's key and an agent token signs it healthy:
		// the zone's last verdict for it. Its peers' word stands.
		victim := nonLeaders()[0]
		pod := web.podOn(victim.Name)
		committed, _ := annotation(t, client, victim.Name)
		nodeLeases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
		first, err := nodeLeases.Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, time.Minute, victim.Name+"'s kubelet renews its Lease", func() (bool, string) {
			l, err := nodeLeases.Get(ctx, victim.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return !l.Spec.RenewTime.Equal(first.Spec.RenewTime), "not renewed"
		})
		killedAt := time.Now()
		victim.Kill()
		victim.Kubelet.Kill()
		waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Unhealthy})
		peers := 0
		for _, a := range z.Agents() {
			if a != victim && a.Running() {
				peers++
			}
		}
		// A majority of its peers, the dead ones included, must say so.
		need := (len(all)-1)/2 + 1
		poll.Until(t, time.Minute, fmt.Sprintf("%d of %s's peers saying it down in the zone Lease", need, victim.Name), func() (bool, string) {
			l, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName(committed.Zone), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			atts, err := zone.ParseEvidence(committed.Zone, l.Annotations[zone.LeaseEvidenceAnnotation])
			if err != nil {
				return false, err.Error()
			}
			down := 0
			for _, a := range atts {
				if a.FindsDown(victim.Name) {
					down++
				}
			}
			return down >= need, fmt.Sprintf("%d of %d running peers say it down", down, peers)
		})
		z.CutCloud()
		cutAfter := time.Since(killedAt)
		t.Logf("the zone was cut from the cloud %s after %s died", cutAfter.Round(100*time.Millisecond), victim.Name)
		// The cloud saw the kubelet renew at most one renew interval
		// (3 s) before the kill; the webhook counts a node alive in a cut
		// if it saw its kubelet renew within 15 s before the zone went
		// dark (a quarter of the Lease's 40 s, and a half more).
		if cutAfter > 12*time.Second {
			t.Fatalf("the cut came %s after the kill: the cloud's last sign of the kubelet is too old to test the leader's word", cutAfter.Round(time.Second))
		}
		l, key := leaderKey(t, z)
		term := zoneLeaseTerm(t, client, committed.Zone)
		forged, _ := annotation(t, client, victim.Name)
		forged.State, forged.At, forged.Pros, forged.Cons = zone.Healthy, time.Now().UTC(), forged.Members-1, 0
		forged.Term, forged.Leader, forged.SignedTerm = term, l.Name, term
		if err := writeVerdictAs(t, c, victim.Name, l.Name, key, forged); err != nil {
			t.Fatalf("the leader's own signed verdict was refused: %v", err)
		}
		var alive []string
		for _, a := range z.Agents() {
			if a.Running() {
				alive = append(alive, a.Name)
			}
		}
		waitAllUnknown(t, client, append(alive, victim.Name), 2*time.Minute)
		// The members alive when the zone went dark stay protected.
		liveProtected := func() (bool, string) {
			ready := web.readyEndpoints(t, client)
			for _, n := range alive {
				pod := web.podOn(n)
				if st, since := web.podReady(t, client, pod); st != corev1.ConditionTrue {
					return false, fmt.Sprintf("pod %s Ready=%s since %s", pod, st, since.Format(time.RFC3339))
				}
				if !ready[pod] {
					return false, fmt.Sprintf("endpoint of %s not ready", pod)
				}
			}
			return true, ""
		}
		settleProtection(t, liveProtected)
		poll.Until(t, 2*time.Minute, victim.Name+" tainted unreachable:NoExecute in the cut", func() (bool, string) {
			_, noExecute := nodeCondition(t, client, victim.Name)
			return noExecute, "no taint"
		})
		if st, _ := web.podReady(t, client, pod); st == corev1.ConditionTrue {
			t.Errorf("%s on %s is Ready in the cut", pod, victim.Name)
		}
		took := poll.Until(t, 2*time.Minute, pod+" evicted", func() (bool, string) {
			return slices.Contains(web.deletedPods(t, client), pod), "still running"
		})
		t.Logf("%s evicted %s after the zone's nodes went Unknown (tolerationSeconds %d)", pod, took.Round(time.Second), tolerationSeconds)
		if ok, detail := liveProtected(); !ok {
			t.Errorf("the live members lost their protection: %s", detail)
		}
		if err := z.ReconnectCloud(ctx); err != nil {
			t.Fatal(err)
		}
		// The dead node comes back, so that the zone has one dead node
		// again: with two, a third cut would put more than 55 % of the
		// zone's nodes Unknown, and the controller manager's partial
		// disruption mode (no evictions in a small cluster) would hold
		// back what the next test waits for.
		if err := victim.Kubelet.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		waitNodesReady(t, client, "the live members and "+victim.Name, append(alive, victim.Name))
	}) {
		return
	}

	if !t.Run("the zone's quorum lost while its kubelets report", func(t *testing.T) {
		// Three of five agents stop, their kubelets still running: no
		// leader renews the zone Lease, and the cloud still hears the
		// zone, so nothing is protected and an alert names the zone.
		// An earlier test's victim stays dead: it counts as one down.
		var alive []string
		down := 0
		for _, a := range z.Agents() {
			if a.Running() {
				alive = append(alive, a.Name)
			} else {
				down++
			}
		}
		var stopped []*zonerun.Agent
		for _, a := range z.Agents() {
			if a.Running() && down < 3 {
				a.Stop()
				stopped = append(stopped, a)
				down++
			}
		}
		waitEdgeZone(t, c, zoneName, 2*time.Minute, "without a leader", func(st admission.EdgeZoneStatus, row map[string]string) (bool, string) {
			return st.State == admission.ZoneNoLeader && st.Protected == 0 && row["STATE"] == "NoLeader" && row["PROTECTION-LEFT"] == "",
				fmt.Sprintf("%v", row)
		})
		requireZoneEvent(t, c, zoneName, admission.EventZoneNoLeader)
		waitGauges(t, wh, "the zone without a leader", func(g map[string]float64) (bool, string) {
			if ok, detail := zoneStateGauges(g, "no_leader"); !ok {
				return false, detail
			}
			age := g[`edgequorum_admission_zone_no_leader_seconds{zone="edge-w"}`]
			return age > 0 && age < 600, fmt.Sprintf("no leader for %vs", age)
		})
		for _, a := range stopped {
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
		}
		waitHealthy(t, client, 2*time.Minute, alive)
		connected("connected once its quorum is back")
	}) {
		return
	}

	t.Run("webhook stopped: upstream behaviour returns", func(t *testing.T) {
		wh.Stop()
		// A node whose web pod is still there: an earlier test's victim
		// that came back has none.
		var cut *zonerun.Agent
		for _, a := range nonLeaders() {
			if !slices.Contains(web.deletedPods(t, client), web.podOn(a.Name)) {
				cut = a
				break
			}
		}
		if cut == nil {
			t.Fatal("no running follower with a web pod left to cut")
		}
		pod := web.podOn(cut.Name)
		cut.CutCloud()
		poll.Until(t, 2*time.Minute, cut.Name+" tainted unreachable:NoExecute", func() (bool, string) {
			_, noExecute := nodeCondition(t, client, cut.Name)
			return noExecute, "no taint"
		})
		// A write the webhook would be asked about returns at once: the
		// webhook is down and failurePolicy is Ignore.
		start := time.Now()
		patch := []byte(`{"metadata":{"labels":{"edgequorum.io/e2e":"touched"}}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, cut.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 6*time.Second {
			t.Errorf("a node write took %s with the webhook down; the webhook timeout is 5s", took)
		} else {
			t.Logf("node write with the webhook down took %s", took.Round(time.Millisecond))
		}
		poll.Until(t, 2*time.Minute, pod+" evicted as upstream would", func() (bool, string) {
			for _, d := range web.deletedPods(t, client) {
				if d == pod {
					return true, ""
				}
			}
			return false, "still running"
		})
	})
}

// podStatusWebhook is the shipped MutatingWebhookConfiguration's pods/status
// webhook.
const podStatusWebhook = "podstatus.webhook.edgequorum.io"

// startWebhook runs the webhook for a test (stopped at its end, its log tail
// shown on failure). Its cut-off rule needs no timer fitted to the KCM's grace
// period: only the repair period is shortened, so a missed admission is
// re-sent within the test's time.
func startWebhook(t *testing.T, c *testcluster.Cluster, z *zonerun.Zone) *zonerun.Webhook {
	t.Helper()
	return startWebhookWith(t, c, z, "--repair-period=10s")
}

// startWebhookWith is startWebhook with exactly the flags args.
func startWebhookWith(t *testing.T, c *testcluster.Cluster, z *zonerun.Zone, args ...string) *zonerun.Webhook {
	t.Helper()
	return startWebhookFrom(t, c, z, zonerun.WebhookInstall, args...)
}

// startWebhookFrom runs the webhook with the rights and configuration of
// deploy/install/<install>.yaml and exactly the flags args, stopped at the
// end of the test.
func startWebhookFrom(t *testing.T, c *testcluster.Cluster, z *zonerun.Zone, install string, args ...string) *zonerun.Webhook {
	t.Helper()
	return startWebhookBinary(t, c, z.Binary(), install, args...)
}

// startWebhookBinary is startWebhookFrom with the webhook of binary.
func startWebhookBinary(t *testing.T, c *testcluster.Cluster, binary, install string, args ...string) *zonerun.Webhook {
	t.Helper()
	wh, err := zonerun.StartWebhookFrom(context.Background(), c, install, binary, filepath.Join(t.TempDir(), "webhook"), args...)
	if err != nil {
		t.Fatal(err)
	}
	// Gone with the test, registration and all: a later test in the same
	// cluster must not find the agents' verdict writes refused by a
	// nodestatus hook that points at this stopped process.
	t.Cleanup(func() {
		if err := wh.Uninstall(context.Background()); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("---- webhook (last 16 KiB) ----\n%s", wh.LogTail(16<<10))
		}
	})
	return wh
}

// logKCMRetries reports how often the node lifecycle controller wrote the zone's
// nodes while the webhook kept stripping its NoExecute taint: it re-queues a
// node whose taint did not stick, which the README documents.
func logKCMRetries(t *testing.T, c *testcluster.Cluster, nodes []string, since time.Time) {
	t.Helper()
	events, err := c.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	zoneNodes := map[string]bool{}
	for _, n := range nodes {
		zoneNodes[n] = true
	}
	writes := 0
	for _, e := range events {
		if e.Received.After(since) && e.User.Username == "system:serviceaccount:kube-system:node-controller" && e.ObjectRef != nil &&
			e.ObjectRef.Resource == "nodes" && zoneNodes[e.ObjectRef.Name] && e.ObjectRef.Subresource == "" {
			writes++
		}
	}
	minutes := time.Since(since).Minutes()
	t.Logf("KCM wrote the %d protected nodes %d times in %.1f min (%.1f per node per minute) while its taint was stripped",
		len(nodes), writes, minutes, float64(writes)/float64(len(nodes))/minutes)
}
