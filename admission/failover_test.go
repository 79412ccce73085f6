package admission

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/edgequorum/edgequorum/internal/poll"
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
	// zone-a's Lease stays fresh however far the test runs the clock.
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok && l.Name == zone.LeaseName("zone-a") && l.Namespace == zone.DefaultLeaseNamespace {
			withZoneLeaseDuration(24*time.Hour, l)
		}
	}
	env := newWebhook(t, func(c *Config) {
		fastElection(c)
		c.RepairPeriod = 24 * time.Hour
		c.MaxZoneLeaseDuration = 24 * time.Hour
		c.DeadNodeAction = DeadNodeActionOutOfService
		c.DeadNodeDwell = dwell
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
