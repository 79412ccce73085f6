package admission

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgequorum/edgequorum/zone"
)

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
	changeNode(t, env, "edge-a1", func(n *corev1.Node) {
		n.Annotations[zone.AnnotationKey] = verdictJSON(n.Name, zone.Unhealthy, "zone-a")
		n.ResourceVersion = "500"
	})
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
