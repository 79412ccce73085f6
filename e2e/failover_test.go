package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/deploy"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// failoverToleration is the pods' toleration of unreachable:NoExecute in the
// failover test: upstream's 300 s would make the run without the failover
// take five minutes to show the same schedule, grace period plus toleration.
const failoverToleration = 30

// failoverSamples is how many node deaths the failover is measured on.
const failoverSamples = 3

// TestDeadNodeFailover measures, on the real controller manager and
// scheduler, "node death → pod Running elsewhere" for a Deployment pod and a
// StatefulSet pod: first with the webhook's default --dead-node-action=none
// (upstream: the Deployment after grace period plus toleration, the
// StatefulSet never), then with out-of-service, on several deaths. In the same
// run it checks that the brake lets one node of the zone out of service at a
// time when two die at once, and that the failover never fires in a zone cut
// off from the cloud, even for a node that dies during the cut.
func TestDeadNodeFailover(t *testing.T) {
	c, z := startZone(t, testcluster.Options{Scheduler: true}, zonerun.Options{Zone: "edge-f", Nodes: 5})
	ctx := context.Background()
	client := c.Client()
	all := names(z)
	waitHealthy(t, client, 2*time.Minute, all)
	grace := testcluster.DefaultNodeMonitorGracePeriod

	// victims are the members that die in turn, never the leader (which
	// would only add an election to the figures); fallback is where their
	// pods may go instead.
	leader, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var others []*zonerun.Agent
	for _, a := range z.Agents() {
		if a != leader {
			others = append(others, a)
		}
	}
	fallback := others[len(others)-1].Name

	wh := startWebhook(t, c, z)
	var report []string
	t.Cleanup(func() {
		t.Logf("node death → pod Running elsewhere (grace period %s, toleration %d s):\n%s", grace, failoverToleration, strings.Join(report, "\n"))
	})

	if !t.Run("without the failover: upstream's schedule", func(t *testing.T) {
		victim := others[0]
		w := placeWorkloads(t, client, "up", victim.Name, fallback)
		dead := kill(t, victim)
		deploy := w.runningElsewhere(t, client, []string{w.deployment}, victim.Name, dead, grace+failoverToleration*time.Second+time.Minute)[0]
		report = append(report, fmt.Sprintf("  without: Deployment %s (upstream schedule: grace + toleration = %s)",
			deploy.Round(100*time.Millisecond), grace+failoverToleration*time.Second))
		// A StatefulSet pod is never replaced: nothing proves its node is
		// down, so it stays Terminating on the dead node.
		holdFor(t, 30*time.Second, w.statefulSet+" not replaced", func() (bool, string) {
			if p := w.running(t, client, w.statefulSet, victim.Name); p != "" {
				return false, p + " Running elsewhere"
			}
			return true, ""
		})
		report = append(report, fmt.Sprintf("  without: StatefulSet not Running elsewhere %s after the death (never, upstream)",
			time.Since(dead).Round(time.Second)))
		revive(t, client, victim)
		w.remove(t, client)
	}) {
		return
	}

	wh.Stop()
	// The failover as shipped: deploy/install/webhook-failover.yaml's RBAC
	// (the base's plus components/failover's `delete pods`) and the flag its
	// Deployment adds, under the webhook's ServiceAccount.
	startFailoverWebhook(t, c, z, "--repair-period=10s")
	var deploys, sets []time.Duration
	var deleters []string
	if !t.Run("with the failover", func(t *testing.T) {
		for i := range failoverSamples {
			victim := others[i%(len(others)-1)]
			w := placeWorkloads(t, client, fmt.Sprintf("fo%d", i), victim.Name, fallback)
			dead := kill(t, victim)
			took := w.runningElsewhere(t, client, []string{w.deployment, w.statefulSet}, victim.Name, dead, 2*time.Minute)
			deploys, sets = append(deploys, took[0]), append(sets, took[1])
			deleters = append(deleters, podDeleter(t, c, w.statefulSet+"-0", dead))
			if tainted := outOfServiceNodes(t, client); !slices.Equal(tainted, []string{victim.Name}) {
				t.Errorf("nodes tainted out of service: %v, want only %s", tainted, victim.Name)
			}
			revive(t, client, victim)
			poll.Until(t, 2*time.Minute, victim.Name+"'s out-of-service taint removed once its zone judges it healthy", func() (bool, string) {
				tainted := outOfServiceNodes(t, client)
				return len(tainted) == 0, fmt.Sprint(tainted)
			})
			w.remove(t, client)
		}
	}) {
		return
	}
	report = append(report, fmt.Sprintf("  with --dead-node-action=out-of-service (dwell 20 s), %d deaths: Deployment %v (max %s), StatefulSet %v (max %s); target p99 ≤ 30 s; StatefulSet pod force-deleted by %v",
		failoverSamples, rounded(deploys), rounded([]time.Duration{slices.Max(deploys)})[0], rounded(sets), rounded([]time.Duration{slices.Max(sets)})[0], deleters))
	// The webhook, not the pod garbage collector's next cycle, removes the
	// evicted StatefulSet pod: that is what brings it within the target.
	// podgc may win a race now and then (its cycle falling in the
	// milliseconds between eviction and the webhook's delete), never every
	// time.
	if !slices.Contains(deleters, webhookDeleter) {
		t.Errorf("the StatefulSet pods were force-deleted by %v, never by the webhook (%s)", deleters, zonerun.WebhookUser)
	}

	if !t.Run("a compromised leader cannot fail over a live node", func(t *testing.T) {
		// A thief with the leader's node key and an agent token signs a
		// live node unhealthy while the cloud cannot hear it (cut from
		// the cloud alone). The webhook honours the verdict as the
		// leader's, but the failover acts only when a majority of the
		// node's peers find every probe failing on it, and they reach it.
		live := others[0]
		live.CutCloud()
		poll.Until(t, 2*time.Minute, live.Name+" Ready=Unknown", func() (bool, string) {
			st, _ := nodeCondition(t, client, live.Name)
			return st == corev1.ConditionUnknown, string(st)
		})
		l, key := leaderKey(t, z)
		committed, _ := annotation(t, client, live.Name)
		term := zoneLeaseTerm(t, client, committed.Zone)
		lie := committed
		lie.State, lie.At, lie.Pros, lie.Cons = zone.Unhealthy, time.Now().UTC(), 0, committed.Members-1
		lie.Term, lie.Leader, lie.SignedTerm = term, l.Name, term
		if err := writeVerdictAs(t, c, live.Name, l.Name, key, lie); err != nil {
			t.Fatalf("the leader's own signed verdict was refused: %v", err)
		}
		// Twice the dwell: the failover would have fired by then.
		holdFor(t, 40*time.Second, live.Name+" not failed over on the leader's word", func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			return len(tainted) == 0, fmt.Sprintf("tainted out of service: %v", tainted)
		})
		if err := live.ReconnectCloud(ctx); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 2*time.Minute, live.Name+" Ready again", func() (bool, string) {
			st, _ := nodeCondition(t, client, live.Name)
			return st == corev1.ConditionTrue, string(st)
		})
	}) {
		return
	}

	t.Run("the brake: one node of a zone at a time", func(t *testing.T) {
		// Two of the zone's five nodes die at once. The webhook's
		// default --failover-max-per-zone=1 lets one be tainted out of
		// service and holds the other, saying so, until the first is
		// back.
		byName := map[string]*zonerun.Agent{}
		for _, v := range others[:2] {
			byName[v.Name] = v
			kill(t, v)
		}
		var first string
		poll.Until(t, 2*time.Minute, "one of the two dead nodes tainted out of service", func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			if len(tainted) == 1 {
				first = tainted[0]
			}
			return len(tainted) == 1, fmt.Sprintf("tainted: %v", tainted)
		})
		var held string
		for name := range byName {
			if name != first {
				held = name
			}
		}
		requireNodeEventBy(t, client, "edgequorum.io/webhook", held, admission.EventFailoverHeld)
		holdFor(t, 20*time.Second, "the brake holds "+held, func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			return slices.Equal(tainted, []string{first}), fmt.Sprintf("tainted: %v", tainted)
		})
		revive(t, client, byName[first])
		poll.Until(t, 2*time.Minute, held+" tainted once "+first+" is back", func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			return slices.Equal(tainted, []string{held}), fmt.Sprintf("tainted: %v", tainted)
		})
		revive(t, client, byName[held])
		poll.Until(t, 2*time.Minute, "no node out of service once both are back", func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			return len(tainted) == 0, fmt.Sprintf("tainted: %v", tainted)
		})
	})

	t.Run("never in a zone cut off from the cloud", func(t *testing.T) {
		z.CutCloud()
		waitAllUnknown(t, client, all, 2*time.Minute)
		// A node that dies during the cut: its peers judge it unhealthy,
		// but the leader cannot tell the cloud, and the zone Lease the
		// webhook last saw is stale.
		victim := others[0]
		kill(t, victim)
		holdFor(t, 20*time.Second+2*grace, "no out-of-service taint in the cut-off zone", func() (bool, string) {
			tainted := outOfServiceNodes(t, client)
			return len(tainted) == 0, fmt.Sprintf("tainted: %v", tainted)
		})
	})
}

// startFailoverWebhook runs the webhook as deploy/install/webhook-failover.yaml
// ships it: with exactly that file's RBAC, under the webhook's ServiceAccount,
// and with the --dead-node-action flag its Deployment adds (read from the file,
// so the test runs what ships). args are added to its flags.
func startFailoverWebhook(t *testing.T, c *testcluster.Cluster, z *zonerun.Zone, args ...string) *zonerun.Webhook {
	t.Helper()
	objs, err := deploy.Objects(zonerun.WebhookFailoverInstall)
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ctr := range cs {
			a, _, _ := unstructured.NestedStringSlice(ctr.(map[string]any), "args")
			for _, f := range a {
				if strings.HasPrefix(f, "--dead-node-action=") {
					flags = append(flags, f)
				}
			}
		}
	}
	if !slices.Equal(flags, []string{"--dead-node-action=out-of-service"}) {
		t.Fatalf("deploy/install/%s.yaml's Deployment sets %v, want --dead-node-action=out-of-service once", zonerun.WebhookFailoverInstall, flags)
	}
	return startWebhookFrom(t, c, z, zonerun.WebhookFailoverInstall, append(args, flags...)...)
}

// Who force-deleted a pod, as podDeleter names them.
const (
	webhookDeleter = "webhook"
	podgcDeleter   = "podgc"
)

// podDeleter names who deleted the pod default/name for good (a delete with
// grace period 0 answered 200, after since): the webhook, the pod garbage
// collector, or the user the audit log names; "none" if nobody did.
func podDeleter(t *testing.T, c *testcluster.Cluster, name string, since time.Time) string {
	t.Helper()
	events, err := c.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	who := "none"
	for _, e := range events {
		if e.Verb != "delete" || e.ObjectRef == nil || e.ObjectRef.Resource != "pods" || e.ObjectRef.Subresource != "" ||
			e.ObjectRef.Namespace != "default" || e.ObjectRef.Name != name || e.Received.Before(since) ||
			e.ResponseStatus == nil || e.ResponseStatus.Code != 200 {
			continue
		}
		switch e.User.Username {
		case zonerun.WebhookUser:
			who = webhookDeleter
		case "system:serviceaccount:kube-system:pod-garbage-collector":
			who = podgcDeleter
		case "system:serviceaccount:kube-system:node-controller":
			// The taint manager's eviction: graceful, the pod stays
			// Terminating.
			continue
		default:
			who = e.User.Username
		}
	}
	return who
}

// workloads are a one-pod Deployment and a one-pod StatefulSet placed on one
// node, allowed on one other.
type workloads struct {
	deployment, statefulSet string
}

// placeWorkloads creates the Deployment <prefix>-deploy and the StatefulSet
// <prefix>-sts, each of one pod that prefers node and may also run on
// fallback, and waits until both run on node.
func placeWorkloads(t *testing.T, c kubernetes.Interface, prefix, node, fallback string) *workloads {
	t.Helper()
	ctx := context.Background()
	w := &workloads{deployment: prefix + "-deploy", statefulSet: prefix + "-sts"}
	template := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					// Terms are ORed; a field selector takes one name.
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						named(node), named(fallback),
					}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: named(node)}},
				}},
				Tolerations: []corev1.Toleration{
					{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](failoverToleration)},
					{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](failoverToleration)},
				},
				Containers: []corev1.Container{{Name: "app", Image: "app"}},
			},
		}
	}
	selector := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.deployment},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector(w.deployment), Template: template(w.deployment)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().StatefulSets("default").Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.statefulSet},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: w.statefulSet,
			Selector: selector(w.statefulSet), Template: template(w.statefulSet)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{w.deployment, w.statefulSet} {
		poll.Until(t, 2*time.Minute, app+" Running on "+node, func() (bool, string) {
			p := w.running(t, c, app, "")
			return p == node, "on " + p
		})
	}
	return w
}

// running returns the node of a Running, Ready pod of app that is not being
// deleted and not on node except; "" if none.
func (w *workloads) running(t *testing.T, c kubernetes.Interface, app, except string) string {
	t.Helper()
	pods, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == except {
			continue
		}
		if c := podCondition(p.Status.Conditions, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
			return p.Spec.NodeName
		}
	}
	return ""
}

// runningElsewhere waits until a pod of each of apps runs on another node
// than from, where placeWorkloads put them, and returns how long after dead
// each was first seen so (within poll's 100 ms). The apps are watched
// together, so one app's wait adds nothing to another's figure.
func (w *workloads) runningElsewhere(t *testing.T, c kubernetes.Interface, apps []string, from string, dead time.Time, timeout time.Duration) []time.Duration {
	t.Helper()
	took := make([]time.Duration, len(apps))
	poll.Until(t, timeout, strings.Join(apps, " and ")+" Running elsewhere than "+from, func() (bool, string) {
		var waiting []string
		for i, app := range apps {
			if took[i] != 0 {
				continue
			}
			if w.running(t, c, app, from) != "" {
				took[i] = time.Since(dead)
				continue
			}
			waiting = append(waiting, app)
		}
		return len(waiting) == 0, "not yet: " + strings.Join(waiting, ", ")
	})
	return took
}

// remove deletes the workloads; their pods go with them, and the next
// workloads select other labels.
func (w *workloads) remove(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	if err := c.AppsV1().Deployments("default").Delete(ctx, w.deployment, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.AppsV1().StatefulSets("default").Delete(ctx, w.statefulSet, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kill turns the member's node off, agent and kubelet, and returns when.
func kill(t *testing.T, a *zonerun.Agent) time.Time {
	t.Helper()
	dead := time.Now()
	a.Kill()
	a.Kubelet.Kill()
	return dead
}

// revive starts a killed member again and waits until its zone judges it
// healthy.
func revive(t *testing.T, c kubernetes.Interface, a *zonerun.Agent) {
	t.Helper()
	if err := a.Kubelet.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	waitStates(t, c, 2*time.Minute, map[string]zone.State{a.Name: zone.Healthy})
}

// outOfServiceNodes lists the nodes carrying the out-of-service taint.
func outOfServiceNodes(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	nodes, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range nodes.Items {
		for _, taint := range n.Spec.Taints {
			if taint.Key == corev1.TaintNodeOutOfService {
				out = append(out, n.Name)
				break
			}
		}
	}
	return out
}

// named selects the node of that name.
func named(node string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
	}}
}

func podCondition(cs []corev1.PodCondition, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Millisecond)
	}
	return out
}
