package admission

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/syncbuf"
	"github.com/edgequorum/edgequorum/zone"
)

// TestFailoverTaintsOnlyNodesTheZoneConfirmsDead: with
// --dead-node-action=out-of-service, a node whose zone, reaching the cloud,
// signed it unhealthy while the cloud sees it Unknown gets the out-of-service
// taint once the zone's judgement held for the dwell time, by the webhook's
// clock, and the node is Unknown; it loses
// it when its zone signs it healthy again; a forged verdict written over it
// does not stall that. Never tainted: a node of a cut-off
// zone, a node whose "unhealthy" verdict the zone did not sign or signed
// before its current one (a replay), a node whose kubelet still reports, a
// healthy node. An admin's taint is never removed.
func TestFailoverTaintsOnlyNodesTheZoneConfirmsDead(t *testing.T) {
	const dwell = 20 * time.Second
	forged := testNode("edge-a5", "zone-a", "", corev1.ConditionUnknown)
	forged.Annotations[zone.AnnotationKey] = verdictJSON("nobody", zone.Unhealthy, "zone-a") // signed for another node
	admin := testNode("edge-a6", "zone-a", zone.Healthy, corev1.ConditionTrue,
		corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	objs := append(testCluster(),
		// edge-a3 (in testCluster): zone-a is fresh, the verdict unhealthy,
		// the node Unknown: confirmed dead.
		testNode("edge-b2", "zone-b", zone.Unhealthy, corev1.ConditionUnknown), // zone-b is cut off
		testNode("edge-a7", "zone-a", zone.Unhealthy, corev1.ConditionTrue),    // its kubelet reports
		forged, admin)
	freshZoneA(objs)
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
		c.DeadNodeAction = DeadNodeActionOutOfService
		c.DeadNodeDwell = dwell
		// Half of this cluster's edge nodes are Unknown: the brake
		// would see a mass outage (TestFailoverBrake).
		c.FailoverMassOutage = 1
	}, objs...)
	routeAdmission(t, env)
	env.start(t)

	nodes := corev1.SchemeGroupVersion.WithResource("nodes")
	get := func(name string) *corev1.Node {
		t.Helper()
		obj, err := env.client.Tracker().Get(nodes, "", name)
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*corev1.Node)
	}
	outOfService := func(name string) *corev1.Taint {
		for _, tt := range get(name).Spec.Taints {
			if isOutOfService(tt) {
				return &tt
			}
		}
		return nil
	}
	writes := func() float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resOutOfService, repairMutated))
	}
	// setVerdict writes raw as the node's verdict and waits until the
	// webhook's cache holds it.
	setVerdict := func(name, raw, rv string) {
		t.Helper()
		n := get(name).DeepCopy()
		n.Annotations[zone.AnnotationKey] = raw
		n.ResourceVersion = rv
		if err := env.client.Tracker().Update(nodes, n, ""); err != nil {
			t.Fatal(err)
		}
		poll.UntilTrue(t, waitTimeout, name+"'s new verdict in the webhook's cache", func() bool {
			c, err := env.w.decider.caches.Nodes.Get(name)
			return err == nil && c.Annotations[zone.AnnotationKey] == raw
		})
	}

	// A stolen token writes an unsigned "healthy" over edge-a3's verdict:
	// refused, it does not stall the failover.
	setVerdict("edge-a3", `{"state":"healthy","zone":"zone-a","term":7,"leader":"edge-a2","at":"2026-03-01T12:00:00Z"}`, "898")

	stepUntil(t, env, "edge-a3 tainted out of service", func() bool { return outOfService("edge-a3") != nil })
	taint := outOfService("edge-a3")
	if taint.Value != outOfServiceValue || taint.TimeAdded == nil || taint.TimeAdded.Sub(testNow) < dwell {
		t.Errorf("edge-a3's taint = %+v, want %s:NoExecute added no earlier than %s after the webhook started (%s)", taint, outOfServiceValue, dwell, testNow)
	}
	if _, ok := get("edge-a3").Annotations[outOfServiceAnnotation]; !ok {
		t.Errorf("edge-a3 tainted without %s", outOfServiceAnnotation)
	}
	// A stolen token replays an older "unhealthy" verdict the leader once
	// signed for edge-a1 (Unknown, in a zone reaching the cloud): refused
	// as superseded, it never counts as the zone's word.
	setVerdict("edge-a1", signedVerdict("edge-a1", zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: testTerm,
		Leader: "edge-a2", At: nodeLost.Add(-time.Minute), Pros: 0, Cons: 2, Members: 3}), "899")
	// Everything else is judged by now (the first scan), and long past the
	// dwell time.
	env.clock.Step(2 * dwell)
	stepUntil(t, env, "a dwell time more", func() bool { return env.clock.Since(testNow) > 4*dwell })
	for _, name := range []string{"edge-a1", "edge-b1", "edge-b2", "edge-a7", "edge-a5", "cloud-1"} {
		if tt := outOfService(name); tt != nil {
			t.Errorf("%s tainted out of service: %+v", name, tt)
		}
	}
	if n := writes(); n != 1 {
		t.Errorf("repairs_total{%s,%s} = %v, want 1", resOutOfService, repairMutated, n)
	}
	if n := counter(t, env.w.metrics.events.WithLabelValues(EventOutOfServiceApplied, "recorded")); n != 1 {
		t.Errorf("events_total{%s,recorded} = %v, want 1", EventOutOfServiceApplied, n)
	}

	// edge-a3 comes back and its zone signs it healthy: the taint goes.
	setVerdict("edge-a3", signedVerdict("edge-a3", zone.Annotation{State: zone.Healthy, Zone: "zone-a", Term: testTerm,
		Leader: "edge-a2", At: env.clock.Now(), Pros: 2, Members: 3}), "900")
	stepUntil(t, env, "edge-a3's taint removed", func() bool { return outOfService("edge-a3") == nil })
	if _, ok := get("edge-a3").Annotations[outOfServiceAnnotation]; ok {
		t.Errorf("edge-a3 keeps %s after its taint was removed", outOfServiceAnnotation)
	}
	if outOfService("edge-a6") == nil {
		t.Error("the admin's out-of-service taint on edge-a6 was removed")
	}

	// edge-a7, judged unhealthy all along, goes Unknown only now, after its
	// controller manager's grace period: the dwell ran from the zone's
	// judgement, so it is tainted at once.
	n := get("edge-a7").DeepCopy()
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	n.ResourceVersion = "901"
	if err := env.client.Tracker().Update(nodes, n, ""); err != nil {
		t.Fatal(err)
	}
	unknownAt := env.clock.Now()
	stepUntil(t, env, "edge-a7 tainted out of service", func() bool { return outOfService("edge-a7") != nil })
	if waited := outOfService("edge-a7").TimeAdded.Sub(unknownAt); waited >= dwell {
		t.Errorf("edge-a7 tainted %s after it went Unknown, want less than the dwell time: it was judged unhealthy long before", waited)
	}
}

// forceDeleteEnv is a webhook with the failover on over a cluster in which:
//
//	edge-a3 (testCluster): zone-a fresh, unhealthy, Unknown, and tainted out
//	        of service by the failover (annotated): its terminating pod sts-a3
//	        and its replaced pod sts-replaced are due; web-a3-1 is not
//	        terminating (it tolerates the taint) and stays.
//	edge-a6: the same, but an admin's taint (no annotation).
//	edge-a7: tainted by the failover, unhealthy, but its kubelet is back (Ready True).
//	edge-a8: tainted by the failover, Unknown, but zone-a signed it healthy again.
//	edge-b2: tainted by the failover, unhealthy, Unknown, but zone-b is cut off.
//
// Pod deletes honour a UID precondition, as the apiserver does; sts-replaced
// is replaced by a new pod of that name just before its delete lands.
// forbid makes every pod delete Forbidden, as without the failover's
// ClusterRole.
func forceDeleteEnv(t *testing.T, dryRun, forbid bool) (*testEnv, *syncbuf.Buffer) {
	t.Helper()
	ours := func(n *corev1.Node) *corev1.Node {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: outOfServiceValue, Effect: corev1.TaintEffectNoExecute})
		n.Annotations[outOfServiceAnnotation] = testNow.Add(-time.Minute).Format(time.RFC3339)
		return n
	}
	terminating := func(name, node string) *corev1.Pod {
		p := testPod(name, node, corev1.ConditionFalse, nodeLost)
		p.DeletionTimestamp = &metav1.Time{Time: nodeLost.Add(time.Minute)}
		p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		return p
	}
	objs := testCluster()
	for i, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.Name == "edge-a3" {
			objs[i] = ours(n)
		}
	}
	objs = append(objs,
		testNode("edge-a6", "zone-a", zone.Unhealthy, corev1.ConditionUnknown,
			corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}),
		ours(testNode("edge-a7", "zone-a", zone.Unhealthy, corev1.ConditionTrue)),
		ours(testNode("edge-a8", "zone-a", zone.Healthy, corev1.ConditionUnknown)),
		ours(testNode("edge-b2", "zone-b", zone.Unhealthy, corev1.ConditionUnknown)),
		terminating("sts-a3", "edge-a3"), terminating("sts-replaced", "edge-a3"),
		terminating("sts-a6", "edge-a6"), terminating("sts-a7", "edge-a7"),
		terminating("sts-a8", "edge-a8"), terminating("sts-b2", "edge-b2"),
	)
	freshZoneA(objs)
	logs := &syncbuf.Buffer{}
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
		c.DeadNodeAction = DeadNodeActionOutOfService
		c.DryRun = dryRun
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}, objs...)
	routeAdmission(t, env)
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	env.client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		gr := pods.GroupResource()
		if forbid {
			return true, nil, apierrors.NewForbidden(gr, da.GetName(),
				fmt.Errorf(`User %q cannot delete resource "pods"`, "system:serviceaccount:edgequorum-webhook:edgequorum-webhook"))
		}
		cur, err := env.client.Tracker().Get(pods, da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		p := cur.(*corev1.Pod)
		if da.GetName() == "sts-replaced" && p.UID == "uid-sts-replaced" {
			// Its StatefulSet created it again since the webhook read it.
			p = testPod("sts-replaced", "edge-a3", corev1.ConditionFalse, testNow)
			p.UID = "uid-sts-replaced-2"
			if err := env.client.Tracker().Update(pods, p, p.Namespace); err != nil {
				return true, nil, err
			}
		}
		if pre := da.GetDeleteOptions().Preconditions; pre != nil && pre.UID != nil && *pre.UID != p.UID {
			return true, nil, apierrors.NewConflict(gr, da.GetName(),
				fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s)", *pre.UID, p.UID))
		}
		return false, nil, nil // the tracker deletes it
	})
	env.start(t)
	return env, logs
}

// podExists reports whether the fake apiserver still holds the pod.
func podExists(t *testing.T, env *testEnv, name string) bool {
	t.Helper()
	_, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "default", name)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// podDeletes are the pod deletes the webhook sent, by pod name.
func podDeletes(env *testEnv) map[string][]metav1.DeleteOptions {
	out := map[string][]metav1.DeleteOptions{}
	for _, a := range env.client.Actions() {
		if da, ok := a.(clienttesting.DeleteAction); ok && da.GetResource().Resource == "pods" {
			out[da.GetName()] = append(out[da.GetName()], da.GetDeleteOptions())
		}
	}
	return out
}

// TestFailoverForceDeletesTerminatingPods: on a node the failover tainted out
// of service, still judged dead by its zone reaching the cloud and still
// Unknown, the pods the taint evicted (terminating) are force-deleted at
// once, with grace period 0 and a UID precondition, as the pod garbage
// collector would on its next cycle; a pod that turns terminating later is
// deleted on its own event, without a rescan or the clock moving. Never
// deleted: a pod that is not terminating, a pod replaced since it was read,
// pods on a node an admin tainted, on a node whose kubelet is back, on a node
// its zone judges healthy again, on a node of a cut-off zone.
func TestFailoverForceDeletesTerminatingPods(t *testing.T) {
	env, _ := forceDeleteEnv(t, false, false)
	forced := func() float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resForceDelete, repairMutated))
	}

	stepUntil(t, env, "sts-a3 force-deleted", func() bool { return !podExists(t, env, "sts-a3") })
	poll.UntilTrue(t, waitTimeout, "the replaced sts-replaced judged", func() bool {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resForceDelete, repairConflict)) == 1
	})
	deletes := podDeletes(env)
	for _, name := range []string{"sts-a3", "sts-replaced"} {
		if len(deletes[name]) != 1 {
			t.Fatalf("%s deleted %d times, want once", name, len(deletes[name]))
		}
		o := deletes[name][0]
		if o.GracePeriodSeconds == nil || *o.GracePeriodSeconds != 0 {
			t.Errorf("%s deleted with grace period %v, want 0", name, o.GracePeriodSeconds)
		}
		if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != types.UID("uid-"+name) {
			t.Errorf("%s deleted with preconditions %+v, want UID uid-%s", name, o.Preconditions, name)
		}
	}
	obj, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), "default", "sts-replaced")
	if err != nil || obj.(*corev1.Pod).UID != "uid-sts-replaced-2" {
		t.Errorf("the pod that replaced sts-replaced: %v, %v; want it kept", obj, err)
	}

	// The taint evicts a pod that was running on edge-a3: its update alone
	// brings the node's force-delete, with the clock standing still (no
	// rescan, no rate-limited retry).
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	obj, err = env.client.Tracker().Get(pods, "default", "web-a3-1")
	if err != nil {
		t.Fatal(err)
	}
	p := obj.(*corev1.Pod).DeepCopy()
	p.DeletionTimestamp = &metav1.Time{Time: env.clock.Now()}
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	p.ResourceVersion = "500"
	if err := env.client.Tracker().Update(pods, p, "default"); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, waitTimeout, "web-a3-1 force-deleted on its eviction's event", func() bool { return !podExists(t, env, "web-a3-1") })

	// Everything else is judged by now and long after; nothing else goes.
	env.clock.Step(time.Minute)
	stepUntil(t, env, "two minutes more", func() bool { return env.clock.Since(testNow) > 2*time.Minute })
	for _, name := range []string{"sts-a6", "sts-a7", "sts-a8", "sts-b2", "web-a1-1", "web-a4-1"} {
		if !podExists(t, env, name) {
			t.Errorf("%s was deleted", name)
		}
	}
	if d := podDeletes(env); len(d) != 3 {
		t.Errorf("pods deleted: %v, want sts-a3, sts-replaced, web-a3-1", d)
	}
	if n := forced(); n != 2 {
		t.Errorf("repairs_total{%s,%s} = %v, want 2", resForceDelete, repairMutated, n)
	}
	if n := counter(t, env.w.metrics.events.WithLabelValues(EventForceDeletedPods, "recorded")); n != 2 {
		t.Errorf("events_total{%s,recorded} = %v, want 2 (one per sync that deleted)", EventForceDeletedPods, n)
	}
}

// TestFailoverForceDeleteForbidden: without the failover's `delete pods`
// right, the refusal is counted, logged once as an error naming the right and
// the component that grants it, and not retried in a loop; the taint logic
// goes on: the node's taint is removed once its zone signs it healthy.
func TestFailoverForceDeleteForbidden(t *testing.T) {
	env, logs := forceDeleteEnv(t, false, true)
	forbidden := func() float64 {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resForceDelete, repairForbidden))
	}
	stepUntil(t, env, "a forbidden force-delete", func() bool { return forbidden() >= 1 })
	env.clock.Step(time.Minute)
	stepUntil(t, env, "a minute more", func() bool { return env.clock.Since(testNow) > 2*time.Minute })
	if n := forbidden(); n != 1 {
		t.Errorf("repairs_total{%s,%s} = %v, want 1: a refusal is not retried until something changes", resForceDelete, repairForbidden, n)
	}
	if !podExists(t, env, "sts-a3") {
		t.Error("sts-a3 deleted although every delete is forbidden")
	}
	var errs []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			errs = append(errs, line)
		}
	}
	if len(errs) != 1 || !strings.Contains(errs[0], "`delete pods`") || !strings.Contains(errs[0], "deploy/webhook/components/failover") {
		t.Errorf("error log lines %q, want one naming `delete pods` and deploy/webhook/components/failover", errs)
	}

	changeNode(t, env, "edge-a3", func(n *corev1.Node) {
		n.Annotations[zone.AnnotationKey] = signedVerdict("edge-a3", zone.Annotation{State: zone.Healthy, Zone: "zone-a", Term: testTerm,
			Leader: "edge-a2", At: env.clock.Now(), Pros: 2, Members: 3})
		n.ResourceVersion = "900"
	})
	stepUntil(t, env, "edge-a3's taint removed", func() bool {
		obj, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "edge-a3")
		return err == nil && !hasOutOfService(obj.(*corev1.Node))
	})
}

// TestFailoverForceDeleteDryRun: --dry-run counts what it would delete and
// deletes nothing.
func TestFailoverForceDeleteDryRun(t *testing.T) {
	env, _ := forceDeleteEnv(t, true, false)
	stepUntil(t, env, "force-deletes counted as dry run", func() bool {
		return counter(t, env.w.metrics.repairs.WithLabelValues(resForceDelete, repairDryRun)) == 2
	})
	if d := podDeletes(env); len(d) != 0 {
		t.Errorf("pods deleted in dry run: %v", d)
	}
}

// freshZoneA keeps zone-a's Lease among objs fresh however far a test runs
// the clock.
func freshZoneA(objs []runtime.Object) {
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok && l.Name == zone.LeaseName("zone-a") && l.Namespace == zone.DefaultLeaseNamespace {
			// Its peers find every probe failing on the dead nodes.
			withZoneLeaseDuration(24*time.Hour, confirmDown(l, "edge-a3", "edge-a6", "edge-a7"))
		}
	}
}

// brakeEnv is a webhook with the failover on (dwell 20 s) over zone z of five
// nodes, n1 its leader, in which the zone judges n2, n3 and n4 dead while the
// cloud sees them Unknown, and ready more edge nodes of another zone that the
// cloud sees Ready.
func brakeEnv(t *testing.T, ready int, mod func(*Config), n5 ...corev1.Taint) *testEnv {
	t.Helper()
	live := testNode("n5", "z", zone.Healthy, corev1.ConditionTrue, n5...)
	if len(n5) > 0 {
		live.Annotations[outOfServiceAnnotation] = testNow.Format(time.RFC3339)
	}
	objs := []runtime.Object{
		testNode("n1", "z", zone.Healthy, corev1.ConditionTrue),
		testNode("n2", "z", zone.Unhealthy, corev1.ConditionUnknown),
		testNode("n3", "z", zone.Unhealthy, corev1.ConditionUnknown),
		testNode("n4", "z", zone.Unhealthy, corev1.ConditionUnknown),
		live,
		testNode("cloud-1", "", "", corev1.ConditionUnknown), // not an edge node: never counted
		withZoneLeaseDuration(24*time.Hour, confirmDown(testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow.Add(-5*time.Second)),
			"n2", "n3", "n4"))[0],
	}
	for i := range ready {
		objs = append(objs, testNode(fmt.Sprintf("y%d", i), "zone-y", "", corev1.ConditionTrue))
	}
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
		c.DeadNodeAction = DeadNodeActionOutOfService
		c.DeadNodeDwell = 20 * time.Second
		if mod != nil {
			mod(c)
		}
	}, objs...)
	routeAdmission(t, env)
	env.start(t)
	return env
}

// outOfServiceIn lists the nodes among names that carry the out-of-service
// taint, as the fake apiserver holds them.
func outOfServiceIn(t *testing.T, env *testEnv, names ...string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		obj, err := env.client.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", name)
		if err != nil {
			t.Fatal(err)
		}
		if hasOutOfService(obj.(*corev1.Node)) {
			out = append(out, name)
		}
	}
	return out
}

// TestFailoverBrake: a zone that judges three of its five nodes dead at once
// gets no more of them tainted out of service than the brake allows — per
// zone (--failover-max-per-zone, and never a majority of the zone), across
// the cluster (--failover-max-unhealthy) and none while the cloud sees most
// edge nodes Unknown (--failover-mass-outage-threshold) — and every node held
// is counted, shown and recorded as an Event once. The brake lets go when a
// tainted node comes back.
func TestFailoverBrake(t *testing.T) {
	dead := []string{"n2", "n3", "n4"}
	held := func(env *testEnv, limit string) float64 {
		return counter(t, env.w.metrics.failoverHeld.WithLabelValues(limit))
	}
	// settle runs the clock well past the dwell time and waits until every
	// dead node is tainted or held, then checks how many of each.
	settle := func(t *testing.T, env *testEnv, tainted int, limit string) []string {
		t.Helper()
		stepUntil(t, env, fmt.Sprintf("%d tainted and %d held by %s", tainted, len(dead)-tainted, limit), func() bool {
			return len(outOfServiceIn(t, env, dead...)) == tainted && held(env, limit) == float64(len(dead)-tainted)
		})
		env.clock.Step(time.Minute)
		stepUntil(t, env, "a minute more", func() bool { return env.clock.Since(testNow) > 2*time.Minute })
		got := outOfServiceIn(t, env, dead...)
		if len(got) != tainted {
			t.Errorf("tainted out of service %v, want %d of %v", got, tainted, dead)
		}
		if g := counter(t, env.w.metrics.failoverHeldNodes); g != float64(len(dead)-tainted) {
			t.Errorf("failover_held_nodes = %v, want %d", g, len(dead)-tainted)
		}
		if n := counter(t, env.w.metrics.events.WithLabelValues(EventFailoverHeld, "recorded")); n != float64(len(dead)-tainted) {
			t.Errorf("events_total{%s,recorded} = %v, want one per held node, %d", EventFailoverHeld, n, len(dead)-tainted)
		}
		return got
	}

	t.Run("per zone", func(t *testing.T) {
		env := brakeEnv(t, 6, nil)
		got := settle(t, env, 1, brakeZone)
		// The tainted node comes back: its zone signs it healthy, the
		// taint goes, and the brake lets one held node go.
		back := got[0]
		setVerdictOn(t, env, back, signedVerdict(back, zone.Annotation{State: zone.Healthy, Zone: "z", Term: testTerm,
			Leader: "n1", At: env.clock.Now(), Pros: 4, Members: 5}))
		stepUntil(t, env, "another dead node tainted once "+back+" is back", func() bool {
			now := outOfServiceIn(t, env, dead...)
			return len(now) == 1 && now[0] != back
		})
	})
	t.Run("never a majority of the zone", func(t *testing.T) {
		env := brakeEnv(t, 6, func(c *Config) {
			c.FailoverMaxPerZone = 5
			c.FailoverMaxUnhealthy = intstr.FromInt32(100)
		})
		settle(t, env, 2, brakeZone)
	})
	t.Run("across the cluster", func(t *testing.T) {
		env := brakeEnv(t, 5, func(c *Config) { c.FailoverMaxPerZone = 5 }) // 10 % of 10 edge nodes: 1
		settle(t, env, 1, brakeCluster)
	})
	t.Run("a live node's own mark takes no place", func(t *testing.T) {
		// n5's stolen kubelet credential marked and tainted its own
		// Node, which its zone signs healthy: it must not spend the
		// zone's one place. A dry run writes nothing, so the mark stays.
		env := brakeEnv(t, 6, func(c *Config) { c.DryRun = true },
			corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: outOfServiceValue, Effect: corev1.TaintEffectNoExecute})
		n2, err := env.w.decider.caches.Nodes.Get("n2")
		if err != nil {
			t.Fatal(err)
		}
		limit, note, err := env.w.repair.failover.brake.check(n2, "z")
		if err != nil || limit != "" {
			t.Errorf("brake.check(n2) = %q (%s), %v; want it let go: n5 is alive by its zone", limit, note, err)
		}
	})
	t.Run("mass outage", func(t *testing.T) {
		env := brakeEnv(t, 0, nil) // 3 of 5 edge nodes Unknown: 60 %
		settle(t, env, 0, brakeMassOutage)
	})
}

// setVerdictOn writes raw as the node's verdict and waits until the webhook's
// cache holds it.
func setVerdictOn(t *testing.T, env *testEnv, name, raw string) {
	t.Helper()
	changeNode(t, env, name, func(n *corev1.Node) { n.Annotations[zone.AnnotationKey] = raw })
	poll.UntilTrue(t, waitTimeout, name+"'s new verdict in the webhook's cache", func() bool {
		c, err := env.w.decider.caches.Nodes.Get(name)
		return err == nil && c.Annotations[zone.AnnotationKey] == raw
	})
}

// TestFailoverNeedsItsPeersWord: the zone's leader signs n2 unhealthy, the
// cloud sees n2 Unknown, the dwell has long passed, but n2's peers attest
// that they reach it (a node cut from the cloud alone, or a lying leader): no
// taint, however long, and the wait is counted once. Once a majority finds
// every probe failing on n2, it is failed over.
func TestFailoverNeedsItsPeersWord(t *testing.T) {
	lease := withZoneLeaseDuration(24*time.Hour, testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow.Add(-5*time.Second)))[0]
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
		c.DeadNodeAction = DeadNodeActionOutOfService
		c.DeadNodeDwell = 20 * time.Second
	}, testNode("n1", "z", zone.Healthy, corev1.ConditionTrue), testNode("n2", "z", zone.Unhealthy, corev1.ConditionUnknown),
		testNode("n3", "z", zone.Healthy, corev1.ConditionTrue), testNode("n4", "z", zone.Healthy, corev1.ConditionTrue),
		testNode("n5", "z", zone.Healthy, corev1.ConditionTrue), lease)
	routeAdmission(t, env)
	env.start(t)
	stepUntil(t, env, "the wait for n2's peers counted", func() bool {
		return counter(t, env.w.metrics.failoverUnconfirmed) == 1
	})
	env.clock.Step(2 * time.Minute)
	stepUntil(t, env, "two minutes more", func() bool { return env.clock.Since(testNow) > 3*time.Minute })
	if got := outOfServiceIn(t, env, "n2"); len(got) != 0 {
		t.Fatalf("%v tainted out of service on the leader's word alone", got)
	}
	if n := counter(t, env.w.metrics.failoverUnconfirmed); n != 1 {
		t.Errorf("failover_unconfirmed_total = %v, want 1 (once per stretch)", n)
	}

	// The peers' word comes with the next renewal.
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	l, err := leases.Get(context.Background(), zone.LeaseName("z"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
	if _, err := leases.Update(context.Background(), signLease(confirmDown(l, "n2")), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, env, "n2 tainted out of service on its peers' word", func() bool {
		return len(outOfServiceIn(t, env, "n2")) == 1
	})
}
