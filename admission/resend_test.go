package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// repairCluster is testCluster plus an EndpointSlice and an Endpoints object
// with endpoints the webhook would revive, and one with none.
func repairCluster() []runtime.Object {
	epRef := func(pod string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod)}
	}
	endpoint := func(pod, node string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, NodeName: ptr.To(node), TargetRef: epRef(pod),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)}}
	}
	slice := func(name string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	return append(testCluster(),
		slice("web-broken", endpoint("web-a1-1", "edge-a1", false), endpoint("web-a1-early", "edge-a1", false)),
		slice("web-fine", endpoint("web-a1-early", "edge-a1", false), endpoint("web-cloud-1", "cloud-1", false)),
		&corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: "1"},
			Subsets: []corev1.EndpointSubset{{
				NotReadyAddresses: []corev1.EndpointAddress{{IP: "10.0.0.2", NodeName: ptr.To("edge-a2"), TargetRef: epRef("web-a2-1")}},
				Ports:             []corev1.EndpointPort{{Port: 80}},
			}},
		},
	)
}

// notReadySlice is an EndpointSlice in default with one endpoint, of pod at
// ip on node, not ready: as the EndpointSlice controller writes it once the
// node lifecycle controller marked the pod not ready.
func notReadySlice(name, ip, node, pod string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{ip}, NodeName: ptr.To(node),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID("uid-" + pod)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
		}},
	}
}

func TestRepairResendsThroughWebhook(t *testing.T) {
	// The fake clock runs ahead while the test waits for the queue; with
	// zone Leases lasting a day and a kubelet Lease age of a day no Lease
	// turns stale meanwhile, so every zone Lease counts as fresh and the
	// nodes to repair stay the same: all healthy, Unknown and tainted ones.
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.MaxZoneLeaseDuration = 24 * time.Hour
	}, withZoneLeaseDuration(24*time.Hour, repairCluster()...)...)
	routeAdmission(t, env)
	env.start(t)
	repaired := func(resource string) float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resource, repairMutated))
	}
	stepUntil(t, env, "4 nodes, 1 slice and 1 Endpoints repaired", func() bool {
		return repaired(resNode) == 4 && repaired(resEndpointSlice) == 1 && repaired(resEndpoints) == 1
	})
	// What is stored now gives the loop nothing more to do, so it settles
	// instead of re-sending.
	ctx := context.Background()
	nodes, err := env.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sliceList, err := env.client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := env.client.CoreV1().Endpoints("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var stored []metav1.Object
	for i := range nodes.Items {
		stored = append(stored, &nodes.Items[i])
	}
	for i := range sliceList.Items {
		stored = append(stored, &sliceList.Items[i])
	}
	for i := range eps.Items {
		stored = append(stored, &eps.Items[i])
	}
	for _, o := range stored {
		if need, err := env.w.repair.resend.needsRepair(o); need || err != nil {
			t.Errorf("%T %s still needs repair (%v)", o, o.GetName(), err)
		}
	}

	for _, name := range []string{"edge-a1", "edge-a2", "edge-b1", "edge-c1"} {
		n, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(n.(*corev1.Node).Spec.Taints, isUnreachableNoExecute) {
			t.Errorf("%s still carries unreachable:NoExecute after repair", name)
		}
	}
	s, err := env.client.Tracker().Get(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "default", "web-broken")
	if err != nil {
		t.Fatal(err)
	}
	if eps := s.(*discoveryv1.EndpointSlice).Endpoints; !*eps[0].Conditions.Ready || *eps[1].Conditions.Ready {
		t.Errorf("web-broken after repair: ready = %v, %v; want true, false", *eps[0].Conditions.Ready, *eps[1].Conditions.Ready)
	}
	// A copy older than the repaired one, as a lagging cache would hold it,
	// is refused as the apiserver refuses it, not repaired a second time.
	var stale *discoveryv1.EndpointSlice
	for _, o := range repairCluster() {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok && s.Name == "web-broken" {
			stale = s
		}
	}
	if _, err := env.client.DiscoveryV1().EndpointSlices("default").Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update of web-broken at resourceVersion %s: %v, want a conflict", stale.ResourceVersion, err)
	}

	// Nothing the webhook would leave alone was sent.
	for _, u := range updated(env) {
		switch u {
		case "nodes/edge-a1", "nodes/edge-a2", "nodes/edge-b1", "nodes/edge-c1", "endpointslices/web-broken", "endpoints/web":
		default:
			t.Errorf("repair loop sent %s, which needs no repair", u)
		}
	}
}

// TestRepairUnchangedRetries: when the webhook does not answer (here: the fake
// apiserver stores nothing), the re-send comes back unchanged, is counted,
// and is retried after a backoff rather than forgotten.
func TestRepairUnchangedRetries(t *testing.T) {
	env := newWebhook(t, fastElection)
	env.client.PrependReactor("update", "nodes", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, a.(clienttesting.UpdateAction).GetObject(), nil
	})
	env.start(t)
	unchanged := env.w.metrics.repairs.WithLabelValues(resNode, repairUnchanged)
	stepUntil(t, env, "each vouched node re-sent twice", func() bool { return counter(t, unchanged) >= 6 })
}

func TestRepairDryRunWritesNothing(t *testing.T) {
	env := startWebhook(t, func(c *Config) { fastElection(c); c.DryRun = true }, repairCluster()...)
	dry := func(resource string) float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resource, repairDryRun))
	}
	stepUntil(t, env, "dry-run repairs counted", func() bool {
		return dry(resNode) >= 3 && dry(resEndpointSlice) >= 1 && dry(resEndpoints) >= 1
	})
	if u := updated(env); len(u) != 0 {
		t.Errorf("dry-run repair wrote %v", u)
	}
}

// TestRepairFollowsNodeGoingUnknown: an EndpointSlice admitted while the node
// cache still had its node Ready was left alone; when the node's turn to
// Unknown reaches the cache, the slice is repaired at once, not at the next
// rescan (a day away here).
func TestRepairFollowsNodeGoingUnknown(t *testing.T) {
	late := notReadySlice("web-late", "10.0.0.4", "edge-a4", "web-a4-1")
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
	}, withZoneLeaseDuration(24*time.Hour, append(testCluster(), late)...)...)
	routeAdmission(t, env)
	env.start(t)
	repaired := func(resource string) float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resource, repairMutated))
	}
	stepUntil(t, env, "the tainted nodes repaired", func() bool { return repaired(resNode) == 4 })
	if n := repaired(resEndpointSlice); n != 0 {
		t.Fatalf("%v slices repaired while edge-a4 is Ready", n)
	}

	changeNode(t, env, "edge-a4", func(n *corev1.Node) {
		n.Status.Conditions[0].Status = corev1.ConditionUnknown
		n.ResourceVersion = "2"
	})
	stepUntil(t, env, "web-late repaired", func() bool { return repaired(resEndpointSlice) == 1 })
	wantRevived(t, env, "web-late")
}

// wantRevived fails t unless the first endpoint of the EndpointSlice name, as
// the fake apiserver holds it, is ready and serving again.
func wantRevived(t *testing.T, env *testEnv, name string) {
	t.Helper()
	s, err := env.client.Tracker().Get(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "default", name)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.(*discoveryv1.EndpointSlice).Endpoints[0].Conditions; !*c.Ready || !*c.Serving {
		t.Errorf("%s after repair: ready %v serving %v, want both true", name, *c.Ready, *c.Serving)
	}
}

func TestNotReadyNodes(t *testing.T) {
	ep := func(node string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	s := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		ep("n1", ptr.To(false)), ep("n1", ptr.To(false)), ep("n2", ptr.To(true)), ep("n3", nil), ep("n4", ptr.To(false)), {Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
	}}
	if got, _ := notReadyNodes(s); !reflect.DeepEqual(got, []string{"n1", "n4"}) {
		t.Errorf("slice indexed under %v, want [n1 n4]", got)
	}
	e := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{
		{Addresses: []corev1.EndpointAddress{{NodeName: ptr.To("n1")}}, NotReadyAddresses: []corev1.EndpointAddress{{NodeName: ptr.To("n2")}}},
		{NotReadyAddresses: []corev1.EndpointAddress{{NodeName: ptr.To("n2")}, {NodeName: ptr.To("n3")}, {}}},
	}}
	if got, _ := notReadyNodes(e); !reflect.DeepEqual(got, []string{"n2", "n3"}) {
		t.Errorf("Endpoints indexed under %v, want [n2 n3]", got)
	}
	if got, _ := notReadyNodes(&corev1.Pod{}); got != nil {
		t.Errorf("a pod indexed under %v", got)
	}
}
