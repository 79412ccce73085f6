package admission

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/zone"
)

// TestPodStatusKeepsReady covers the pod rule at its edges; the review
// fixtures cover it through the route. Kubelet Leases here last 20 s, so a
// kubelet renews every 5 s and is silent once it has not for 7.5 s.
func TestPodStatusKeepsReady(t *testing.T) {
	objs := append(testCluster(),
		// The node lifecycle controller wrote edge-a5 Unknown a moment ago;
		// the cache still holds it Ready, but its kubelet is silent.
		testNode("edge-a5", "zone-a", zone.Healthy, corev1.ConditionTrue),
		testLease(NodeLeaseNamespace, "edge-a5", testNow.Add(-8*time.Second)),
		// edge-a6's kubelet renews and reports its node NotReady.
		testNode("edge-a6", "zone-a", zone.Healthy, corev1.ConditionFalse),
		testLease(NodeLeaseNamespace, "edge-a6", testNow.Add(-20*time.Second)),
		// edge-a7's kubelet renewed 7 s ago: late, but not a missed renewal.
		testNode("edge-a7", "zone-a", zone.Healthy, corev1.ConditionUnknown),
		testLease(NodeLeaseNamespace, "edge-a7", testNow.Add(-7*time.Second)),
	)
	d := newTestDecider(t, nil, objs...)
	m := &mutator{decider: d, pods: d.caches.Pods, slack: 5 * time.Second}

	// marked is what the controller writes: pod on node, Ready True until
	// now, and the Ready condition it had before.
	marked := func(node string) (*corev1.Pod, *corev1.Pod) {
		old := testPod("p", node, corev1.ConditionTrue, nodeLost.Add(-time.Hour))
		pod := testPod("p", node, corev1.ConditionFalse, testNow)
		return pod, old
	}
	tests := []struct {
		name   string
		change func(pod, old *corev1.Pod)
		node   string
		kept   bool
	}{
		{"vouched node, Unknown, kubelet silent", nil, "edge-a1", true},
		{"vouched node, no kubelet Lease", nil, "edge-a2", true},
		{"whole zone cut off", nil, "edge-b1", true},
		{"cache behind the controller: Ready, but the kubelet silent", nil, "edge-a5", true},
		{"kubelet heard, node NotReady", nil, "edge-a6", false},
		{"kubelet renewed 7 s ago", nil, "edge-a7", false},
		{"node Ready, kubelet renewing", nil, "edge-a4", false},
		{"unhealthy verdict", nil, "edge-a3", false},
		{"zone not cut off, its quorum gone", nil, "edge-c1", false},
		{"node in no zone", nil, "cloud-1", false},
		{"node not in the cache", nil, "nowhere", false},
		{"was not Ready", func(_, old *corev1.Pod) { old.Status.Conditions[1].Status = corev1.ConditionFalse }, "edge-a1", false},
		{"Ready Unknown, not False", func(pod, _ *corev1.Pod) { pod.Status.Conditions[1].Status = corev1.ConditionUnknown }, "edge-a1", false},
		{"no Ready condition before", func(_, old *corev1.Pod) { old.Status.Conditions = old.Status.Conditions[:1] }, "edge-a1", false},
		{"being deleted", func(pod, _ *corev1.Pod) { pod.DeletionTimestamp = &metav1.Time{Time: testNow} }, "edge-a1", false},
		{"moved to another node", func(_, old *corev1.Pod) { old.Spec.NodeName = "edge-a2" }, "edge-a1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, old := marked(tt.node)
			if tt.change != nil {
				tt.change(pod, old)
			}
			before := *podReadyCondition(pod.Status.Conditions)
			n, dec, _, err := m.podStatus(pod, old)
			if err != nil {
				t.Fatal(err)
			}
			if got := n == 1; got != tt.kept {
				t.Fatalf("kept = %v (decision %+v), want %v", got, dec, tt.kept)
			}
			got := *podReadyCondition(pod.Status.Conditions)
			switch {
			case tt.kept && got != *podReadyCondition(old.Status.Conditions):
				t.Errorf("Ready after keeping = %+v, want the stored %+v", got, *podReadyCondition(old.Status.Conditions))
			case !tt.kept && got != before:
				t.Errorf("Ready changed to %+v although not kept", got)
			}
		})
	}
}
