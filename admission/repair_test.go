package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
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

// routeAdmission makes the fake clientset call the webhook on every update, as
// the apiserver would, and store the patched object with a new
// resourceVersion; an update the webhook leaves alone keeps its version.
//
// Like the apiserver, and unlike the fake's own tracker, it refuses with a
// Conflict an update whose resourceVersion is not the stored one. The repair
// loop re-sends objects as its informer cache holds them, and that cache can
// still hold the version before the loop's own last write: a node's update
// event, or a rescan, queues its EndpointSlice again before the slice's own
// update event has reached the cache. Accepting that stale copy would run it
// through the webhook again and count a second repair of an object that was
// repaired already.
func routeAdmission(t *testing.T, env *testEnv) {
	t.Helper()
	var rv atomic.Int64
	rv.Store(100)
	paths := map[string]string{"nodes": "/mutate/node", "endpointslices": "/mutate/endpointslice", "endpoints": "/mutate/endpoints"}
	kinds := map[string]metav1.GroupVersionKind{
		"nodes":          nodeReview.kind,
		"endpointslices": endpointSliceReview.kind,
		"endpoints":      endpointsReview.kind,
	}
	env.client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ua := a.(clienttesting.UpdateAction)
		res := ua.GetResource().Resource
		if paths[res] == "" {
			return false, nil, nil // leases and the like: the default tracker
		}
		obj := ua.GetObject()
		// The fake clientset holds its lock through the reactors, so
		// nothing written through it lands between this check and the
		// update below.
		cur, err := env.client.Tracker().Get(ua.GetResource(), ua.GetNamespace(), obj.(metav1.Object).GetName())
		if err != nil {
			return true, nil, err
		}
		if sent := obj.(metav1.Object).GetResourceVersion(); sent != "" {
			if stored := cur.(metav1.Object).GetResourceVersion(); sent != stored {
				return true, nil, apierrors.NewConflict(ua.GetResource().GroupResource(), obj.(metav1.Object).GetName(),
					fmt.Errorf("resourceVersion %s sent, %s stored", sent, stored))
			}
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		review, _ := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: "repair", Kind: kinds[res], Operation: admissionv1.Update,
				Object: runtime.RawExtension{Raw: raw}},
		})
		rec := httptestDo(env, "POST", paths[res], string(review))
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			return true, nil, fmt.Errorf("webhook answered %d %s", rec.Code, rec.Body)
		}
		if out.Response.Patch == nil {
			// The webhook left it alone: stored as sent, unless it is
			// what the store holds (a no-op update stores nothing).
			sent, now := obj.DeepCopyObject().(metav1.Object), cur.DeepCopyObject().(metav1.Object)
			sent.SetResourceVersion("")
			now.SetResourceVersion("")
			if equality.Semantic.DeepEqual(sent, now) {
				return true, obj, nil
			}
			out.Response.Patch = []byte("[]")
		}
		p, err := jsonpatch.DecodePatch(out.Response.Patch)
		if err != nil {
			return true, nil, err
		}
		patched, err := p.Apply(raw)
		if err != nil {
			return true, nil, err
		}
		// Decode into a zero object: decoding into a copy would keep the
		// fields the patch removed.
		stored := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(patched, stored); err != nil {
			return true, nil, err
		}
		stored.(metav1.Object).SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		if err := env.client.Tracker().Update(ua.GetResource(), stored, ua.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, stored, nil
	})
}

// updated lists "resource/name" of every update the client received, except
// the leader election's and the Events the webhook records.
func updated(env *testEnv) []string {
	var out []string
	for _, a := range env.client.Actions() {
		// Leases (the election), Events and ConfigMaps (the webhook's
		// memory) are the webhook's own.
		if ua, ok := a.(clienttesting.UpdateAction); ok && ua.GetResource().Resource != "leases" && ua.GetResource().Resource != "events" &&
			ua.GetResource().Resource != "configmaps" {
			out = append(out, ua.GetResource().Resource+"/"+ua.GetObject().(metav1.Object).GetName())
		}
	}
	return out
}

func fastElection(c *Config) {
	c.Repair = true
	c.RetryPeriod, c.RenewDeadline, c.LeaseDuration = 50*time.Millisecond, 200*time.Millisecond, 400*time.Millisecond
}

// stepUntil advances the fake clock a second at a time (past the repair
// queue's first delays) until cond holds or a real-time deadline passes.
func stepUntil(t *testing.T, env *testEnv, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; updates so far: %v; repairs counted: %v", what, updated(env), repairCounts(t, env))
		}
		env.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

// repairCounts lists the repair counters that are not zero, as
// "resource/result=n".
func repairCounts(t *testing.T, env *testEnv) []string {
	t.Helper()
	var out []string
	for _, res := range []string{resNode, resEndpointSlice, resEndpoints, resPodStatus} {
		for _, result := range []string{repairMutated, repairUnchanged, repairDryRun, repairConflict, repairError} {
			if n := counter(t, env.w.metrics.repairs.WithLabelValues(res, result)); n != 0 {
				out = append(out, fmt.Sprintf("%s/%s=%v", res, result, n))
			}
		}
	}
	return out
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
		if need, err := env.w.repair.needsRepair(o); need || err != nil {
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

// TestRepairLeaderElection runs two replicas on one cluster: while the first
// leads the second waits, and when the first stops the second takes over.
func TestRepairLeaderElection(t *testing.T) {
	a := newWebhook(t, func(c *Config) { fastElection(c); c.Identity = "replica-a" })
	stopA := a.start(t)
	leading := func(w *Webhook) bool { return counter(t, w.metrics.repairLeader) == 1 }
	poll.UntilTrue(t, waitTimeout, "replica a to lead", func() bool { return leading(a.w) })
	// The lock is in the webhook's own namespace, never among the zone Leases,
	// which agent credentials may write.
	leases := a.client.CoordinationV1()
	if l, err := leases.Leases(a.cfg.ElectionNamespace).Get(context.Background(), a.cfg.LeaderElectionID, metav1.GetOptions{}); err != nil {
		t.Errorf("election Lease not in %s: %v", a.cfg.ElectionNamespace, err)
	} else if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "replica-a" {
		t.Errorf("election Lease held by %v, want replica-a", l.Spec.HolderIdentity)
	}
	if _, err := leases.Leases(a.cfg.LeaseNamespace).Get(context.Background(), a.cfg.LeaderElectionID, metav1.GetOptions{}); err == nil {
		t.Errorf("election Lease created in %s, the zone Leases' namespace", a.cfg.LeaseNamespace)
	}

	regB := prometheus.NewRegistry()
	cfgB := a.cfg
	cfgB.Identity, cfgB.Registerer, cfgB.Gatherer = "replica-b", regB, regB
	wb, err := New(cfgB, a.client)
	if err != nil {
		t.Fatal(err)
	}
	b := &testEnv{w: wb, client: a.client, clock: a.clock}
	b.start(t)
	if leading(b.w) {
		t.Fatal("replica b leads while replica a holds the lease")
	}

	stopA()
	poll.UntilTrue(t, waitTimeout, "replica b to take over", func() bool { return leading(b.w) })
	if leading(a.w) {
		t.Error("replica a still counts itself leader after stopping")
	}
}

// TestRepairFollowsNodeGoingUnknown: an EndpointSlice admitted while the node
// cache still had its node Ready was left alone; when the node's turn to
// Unknown reaches the cache, the slice is repaired at once, not at the next
// rescan (a day away here).
func TestRepairFollowsNodeGoingUnknown(t *testing.T) {
	late := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-late", ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.0.0.4"}, NodeName: ptr.To("edge-a4"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-a4-1", UID: "uid-web-a4-1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
		}},
	}
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

	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	obj, err := env.client.Tracker().Get(nodes, "", "edge-a4")
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node).DeepCopy()
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	n.ResourceVersion = "2"
	if err := env.client.Tracker().Update(nodes, n, ""); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, env, "web-late repaired", func() bool { return repaired(resEndpointSlice) == 1 })
	s, err := env.client.Tracker().Get(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "default", "web-late")
	if err != nil {
		t.Fatal(err)
	}
	if c := s.(*discoveryv1.EndpointSlice).Endpoints[0].Conditions; !*c.Ready || !*c.Serving {
		t.Errorf("web-late after repair: ready %v serving %v, want both true", *c.Ready, *c.Serving)
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

// TestRepairFollowsZoneLeaseRegained: a vouched-by-verdict Unknown node still
// tainted unreachable:NoExecute, and a not-ready endpoint on it, are left alone
// while their zone Lease is stale and the zone not cut off. When a new leader
// renews the Lease, both are re-sent at once: the rescan is hours away, and no
// event on the node or the slice comes to do it.
func TestRepairFollowsZoneLeaseRegained(t *testing.T) {
	const period = 6 * time.Hour
	// zone-c: the zone Lease is stale (renewed 10 min ago, lasting a minute)
	// while edge-c2 renews its kubelet Lease, so the zone's quorum is what is
	// missing and edge-c1 is not vouched. The other zones' Leases last a
	// day, so their nodes are repaired first and show the loop is running.
	objs := withZoneLeaseDuration(24*time.Hour, testCluster()...)
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok && l.Name == zone.LeaseName("zone-c") && l.Namespace == zone.DefaultLeaseNamespace {
			l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
			signLease(l)
		}
	}
	objs = append(objs, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-c", ResourceVersion: "1"},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.0.0.5"}, NodeName: ptr.To("edge-c1"),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-c1-1", UID: "uid-web-c1-1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
		}},
	})
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = period
		c.MaxZoneLeaseDuration = 24 * time.Hour
	}, objs...)
	routeAdmission(t, env)
	env.start(t)
	repaired := func(resource string) float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resource, repairMutated))
	}
	rechecks := func() float64 { return counter(t, env.w.metrics.zoneRechecks) }

	// edge-a1, edge-a2 (zone Lease fresh) and edge-b1 (cut off) are repaired;
	// edge-c1 is not, nor is its slice: the webhook would leave both alone.
	stepUntil(t, env, "the nodes of zone-a and zone-b repaired", func() bool { return repaired(resNode) == 3 })
	cachedNode, err := env.w.repair.nodes.Get("edge-c1")
	if err != nil {
		t.Fatal(err)
	}
	cachedSlice, err := env.w.repair.slices.EndpointSlices("default").Get("web-c")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []any{cachedNode, cachedSlice} {
		if need, err := env.w.repair.needsRepair(o); need || err != nil {
			t.Fatalf("%T needs repair (%v) while zone-c's Lease is stale", o, err)
		}
	}
	if u := updated(env); slices.Contains(u, "nodes/edge-c1") || slices.Contains(u, "endpointslices/web-c") {
		t.Fatalf("zone-c's objects re-sent while its Lease is stale: %v", u)
	}
	// The replay of the cached Leases when the loop starts walks no zone.
	if n := rechecks(); n != 0 {
		t.Fatalf("%v zone re-checks before any Lease changed", n)
	}

	// A new leader takes the Lease over.
	start := env.clock.Now()
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	l, err := leases.Get(context.Background(), zone.LeaseName("zone-c"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("edge-c2")
	l.Spec.AcquireTime = &metav1.MicroTime{Time: start}
	l.Spec.RenewTime = &metav1.MicroTime{Time: start}
	l.Spec.LeaseDurationSeconds = ptr.To[int32](int32(time.Hour / time.Second))
	l.Annotations[zone.LeaseTermAnnotation] = strconv.Itoa(testTerm + 1)
	// edge-c1's verdicts stand: the new leader vouches for them.
	l.Annotations[zone.LeaseEndorsesAnnotation] = "edge-c1=" + strconv.Itoa(testTerm)
	if _, err := leases.Update(context.Background(), signLease(l), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, env, "edge-c1 and web-c repaired", func() bool {
		return repaired(resNode) == 4 && repaired(resEndpointSlice) == 1
	})
	if d := env.clock.Since(start); d >= period {
		t.Fatalf("the fake clock ran %s, past the rescan period; the test proves nothing", d)
	}
	if n := rechecks(); n != 1 {
		t.Errorf("%v zone re-checks, want 1", n)
	}
	n, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "edge-c1")
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(n.(*corev1.Node).Spec.Taints, isUnreachableNoExecute) {
		t.Error("edge-c1 still carries unreachable:NoExecute")
	}
	s, err := env.client.Tracker().Get(discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), "default", "web-c")
	if err != nil {
		t.Fatal(err)
	}
	if c := s.(*discoveryv1.EndpointSlice).Endpoints[0].Conditions; !*c.Ready || !*c.Serving {
		t.Errorf("web-c after repair: ready %v serving %v, want both true", *c.Ready, *c.Serving)
	}
}

// TestZoneLeaseChanged drives the repairer's zone Lease handler directly: only
// a Lease that turns valid, is created, or changes holder or term walks its
// zone, and the walk reaches exactly that zone's nodes.
func TestZoneLeaseChanged(t *testing.T) {
	env := startWebhook(t, func(c *Config) { c.Repair = true; c.RepairPeriod = time.Hour })
	r := env.w.repair
	now := env.clock.Now()
	lease := func(holder string, renewedAgo time.Duration, seconds *int32, term string) *coordinationv1.Lease {
		l := testLease(zone.DefaultLeaseNamespace, zone.LeaseName("zone-a"), now.Add(-renewedAgo))
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.LeaseDurationSeconds = seconds
		l.Annotations = map[string]string{zone.LeaseTermAnnotation: term}
		return l
	}
	secs := ptr.To[int32](15)
	fresh := lease("edge-a1", time.Second, secs, "3")
	tests := []struct {
		name string
		old  *coordinationv1.Lease // nil: an Add
		new  *coordinationv1.Lease
		walk bool
	}{
		{"created", nil, fresh, true},
		{"plain renewal of a valid Lease", lease("edge-a1", 6*time.Second, secs, "3"), fresh, false},
		{"same object again (relist)", fresh, fresh, false},
		{"renewed after it expired", lease("edge-a1", time.Minute, secs, "3"), fresh, true},
		{"renewed exactly as it expired", lease("edge-a1", 15*time.Second, secs, "3"), fresh, true},
		{"a duration set on a Lease that had none", lease("edge-a1", time.Second, nil, "3"), fresh, true},
		{"taken over while valid", lease("edge-a2", time.Second, secs, "3"), fresh, true},
		{"new term, same holder", lease("edge-a1", time.Second, secs, "2"), fresh, true},
		{"expired and still expired", lease("edge-a1", 2*time.Minute, secs, "3"), lease("edge-a1", time.Minute, secs, "3"), false},
		{"renewed without a duration", lease("edge-a1", time.Minute, secs, "3"), lease("edge-a1", 0, nil, "3"), false},
		{"the peers' word on a node it did not name", lease("edge-a1", 6*time.Second, secs, "3"),
			withEvidence(fresh, "edge-a2"), true},
		{"the peers' word renewed, on the same node", withEvidence(lease("edge-a1", 6*time.Second, secs, "3"), "edge-a2"),
			withEvidence(lease("edge-a1", time.Second, secs, "3"), "edge-a2"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &recordingQueue{}
			before := counter(t, env.w.metrics.zoneRechecks)
			if tt.old == nil {
				r.zoneLeaseChanged(q, nil, tt.new)
			} else {
				r.zoneLeaseChanged(q, tt.old, tt.new)
			}
			walked := counter(t, env.w.metrics.zoneRechecks) - before
			wantWalks, want := 0.0, []repairKey(nil)
			if tt.walk {
				// zone-a's nodes that need repair (edge-a1, edge-a2:
				// healthy, Unknown, tainted) and nothing of another zone.
				wantWalks = 1
				want = []repairKey{{resource: resNode, name: "edge-a1"}, {resource: resNode, name: "edge-a2"}}
			}
			if walked != wantWalks {
				t.Errorf("%v zone walks counted, want %v", walked, wantWalks)
			}
			slices.SortFunc(q.added, func(a, b repairKey) int { return strings.Compare(a.name, b.name) })
			if !slices.Equal(q.added, want) {
				t.Errorf("queued %v, want %v", q.added, want)
			}
		})
	}
}

// recordingQueue records what the repairer queues, as it is queued; no other
// method may be called on it.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[repairKey]
	added []repairKey
}

func (q *recordingQueue) AddRateLimited(k repairKey) { q.added = append(q.added, k) }

func TestNodeZoneLease(t *testing.T) {
	idx := nodeZoneLease("example.com/site")
	n := testNode("n1", "", "", corev1.ConditionTrue)
	if got, _ := idx(n); got != nil {
		t.Errorf("node in no zone indexed under %v", got)
	}
	n.Labels["example.com/site"] = "Site_1"
	if got, _ := idx(n); !reflect.DeepEqual(got, []string{zone.LeaseName("Site_1")}) {
		t.Errorf("node indexed under %v, want [%s]", got, zone.LeaseName("Site_1"))
	}
	if got, _ := idx(&corev1.Pod{}); got != nil {
		t.Errorf("a pod indexed under %v", got)
	}
}

// TestRepairHandsBackKeptPods: a pod the webhook kept Ready on an Unknown
// node goes back to not ready, as the node lifecycle controller would have
// marked it, once the node's zone no longer vouches for the node: at once
// when the verdict changes, not at the next rescan (a day away here). Pods on
// vouched or Ready nodes stay as they are.
func TestRepairHandsBackKeptPods(t *testing.T) {
	kept := func(name, node string) *corev1.Pod {
		p := testPod(name, node, corev1.ConditionTrue, nodeLost.Add(-time.Hour))
		p.ResourceVersion = "7"
		return p
	}
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
	}, withZoneLeaseDuration(24*time.Hour, append(testCluster(),
		kept("kept-a1", "edge-a1"), kept("kept-a3", "edge-a3"), kept("kept-a4", "edge-a4"), kept("kept-cloud", "cloud-1"))...)...)
	routeAdmission(t, env)
	env.start(t)

	pods := corev1.SchemeGroupVersion.WithResource("pods")
	ready := func(name string) corev1.PodCondition {
		t.Helper()
		obj, err := env.client.Tracker().Get(pods, "default", name)
		if err != nil {
			t.Fatal(err)
		}
		return *podReadyCondition(obj.(*corev1.Pod).Status.Conditions)
	}
	handedBack := func() float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resPodStatus, repairMutated))
	}
	stepUntil(t, env, "kept-a3 (unhealthy node) handed back and the tainted nodes repaired", func() bool {
		return handedBack() == 1 && counter(t, env.w.metrics.repairs.WithLabelValues(resNode, repairMutated)) == 4
	})
	c := ready("kept-a3")
	if c.Status != corev1.ConditionFalse || c.Reason != "NodeNotVouched" || !c.LastTransitionTime.After(testNow) {
		t.Errorf("kept-a3 Ready after hand-back = %+v, want False, NodeNotVouched, as of the webhook's clock", c)
	}
	if n := counter(t, env.w.metrics.events.WithLabelValues(EventPodsHandedBack, "recorded")); n != 1 {
		t.Errorf("events_total{%s,recorded} = %v after one hand-back, want 1", EventPodsHandedBack, n)
	}
	for _, name := range []string{"kept-a1", "kept-a4", "kept-cloud"} {
		if c := ready(name); c.Status != corev1.ConditionTrue {
			t.Errorf("%s (vouched, on a Ready node, or on a node no zone judges) handed back: %+v", name, c)
		}
	}

	// edge-a1's zone finds it dead: its kept pod follows.
	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	obj, err := env.client.Tracker().Get(nodes, "", "edge-a1")
	if err != nil {
		t.Fatal(err)
	}
	n := obj.(*corev1.Node).DeepCopy()
	n.Annotations[zone.AnnotationKey] = verdictJSON(n.Name, zone.Unhealthy, "zone-a")
	n.ResourceVersion = "500"
	if err := env.client.Tracker().Update(nodes, n, ""); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, env, "kept-a1 handed back", func() bool { return handedBack() == 2 })
	if c := ready("kept-a1"); c.Status != corev1.ConditionFalse {
		t.Errorf("kept-a1 Ready after its node's verdict turned unhealthy: %+v", c)
	}
	for _, name := range []string{"kept-a4", "kept-cloud"} {
		if c := ready(name); c.Status != corev1.ConditionTrue {
			t.Errorf("%s handed back: %+v", name, c)
		}
	}
}

// withEvidence is a copy of l whose evidence has edge-a1 attest, at l's
// renewal, that it reaches the nodes of reach.
func withEvidence(l *coordinationv1.Lease, reach ...string) *coordinationv1.Lease {
	l = l.DeepCopy()
	a := zone.Attestation{Zone: "zone-a", Signer: "edge-a1", At: l.Spec.RenewTime.Time, Reach: reach}
	a.Sign(testKey("edge-a1"))
	l.Annotations[zone.LeaseEvidenceAnnotation] = zone.FormatEvidence([]zone.Attestation{a})
	return l
}
