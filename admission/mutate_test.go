package admission

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
)

// TestQualifies covers the pod rule at its edges; the fixtures cover it in
// context.
func TestQualifies(t *testing.T) {
	deleting := testPod("deleting", "edge-a1", corev1.ConditionFalse, nodeLost)
	deleting.DeletionTimestamp = &metav1.Time{Time: testNow}
	moved := testPod("moved", "edge-a2", corev1.ConditionFalse, nodeLost)
	noReady := testPod("no-ready", "edge-a1", corev1.ConditionFalse, nodeLost)
	noReady.Status.Conditions = noReady.Status.Conditions[:1]
	otherNS := testPod("elsewhere", "edge-a1", corev1.ConditionFalse, nodeLost)
	otherNS.Namespace = "other"
	noLTT := testNode("edge-z1", "zone-a", zone.Healthy, corev1.ConditionUnknown)
	noLTT.Status.Conditions[0].LastTransitionTime = metav1.Time{}

	objs := append(testCluster(), deleting, moved, noReady, otherNS, noLTT,
		testPod("at-slack", "edge-a1", corev1.ConditionFalse, nodeLost.Add(-5*time.Second)),
		testPod("past-slack", "edge-a1", corev1.ConditionFalse, nodeLost.Add(-6*time.Second)),
		testPod("ready-true", "edge-a1", corev1.ConditionTrue, nodeLost),
		testPod("ready-unknown", "edge-a1", corev1.ConditionUnknown, nodeLost),
		testPod("unknown-node-pod", "edge-z1", corev1.ConditionFalse, nodeLost))
	d := newTestDecider(t, nil, objs...)
	m := &mutator{decider: d, pods: d.caches.Pods, slack: 5 * time.Second}

	ref := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "Pod", Name: name, UID: types.UID("uid-" + name)}
	}
	tests := []struct {
		name string
		node *string
		ref  *corev1.ObjectReference
		ns   string
		want bool
	}{
		{"qualifies", ptr.To("edge-a1"), ref("web-a1-1"), "default", true},
		{"exactly at the slack", ptr.To("edge-a1"), ref("at-slack"), "default", true},
		{"past the slack", ptr.To("edge-a1"), ref("past-slack"), "default", false},
		{"pod is being deleted", ptr.To("edge-a1"), ref("deleting"), "default", false},
		{"pod runs on another node", ptr.To("edge-a1"), ref("moved"), "default", false},
		{"pod has no Ready condition", ptr.To("edge-a1"), ref("no-ready"), "default", false},
		{"pod still ready in a cache behind the endpoint", ptr.To("edge-a1"), ref("ready-true"), "default", true},
		{"pod readiness unknown", ptr.To("edge-a1"), ref("ready-unknown"), "default", false},
		{"namespace from the reference", ptr.To("edge-a1"), &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "elsewhere"}, "default", true},
		{"namespace from the object", ptr.To("edge-a1"), ref("elsewhere"), "other", true},
		{"pod in another namespace than the object", ptr.To("edge-a1"), ref("elsewhere"), "default", false},
		{"no uid in the reference", ptr.To("edge-a1"), &corev1.ObjectReference{Kind: "Pod", Name: "web-a1-1"}, "default", true},
		{"node went Unknown at no known time", ptr.To("edge-z1"), ref("unknown-node-pod"), "default", false},
		{"node not in the cache", ptr.To("nowhere"), ref("web-a1-1"), "default", false},
		{"no node name", nil, ref("web-a1-1"), "default", false},
		{"empty node name", ptr.To(""), ref("web-a1-1"), "default", false},
		{"no target", ptr.To("edge-a1"), nil, "default", false},
		{"not a pod", ptr.To("edge-a1"), &corev1.ObjectReference{Kind: "Node", Name: "web-a1-1"}, "default", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.newQualifier().qualifies(tt.node, tt.ref, tt.ns)
			if err != nil || got != tt.want {
				t.Errorf("qualifies = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestSlimNode(t *testing.T) {
	n := testNode("n", "z", zone.Healthy, corev1.ConditionUnknown, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"big"}, SizeBytes: 1 << 30}}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	got, err := slimNodes(n)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Node)
	if s.Name != "n" || s.UID != n.UID || s.Labels[zone.DefaultZoneLabel] != "z" || s.Annotations[zone.AnnotationKey] == "" ||
		len(s.Spec.Taints) != 1 || len(s.Status.Conditions) != len(n.Status.Conditions) {
		t.Errorf("slim node lost what the webhook reads: %+v", s)
	}
	if s.Status.Images != nil || s.Status.Capacity != nil || s.Status.NodeInfo.KubeletVersion != "" || s.ManagedFields != nil {
		t.Errorf("slim node kept what the webhook never reads: %+v", s.Status)
	}
	if n.Status.Images == nil || n.ManagedFields == nil {
		t.Error("slimNodes changed the Node it was given")
	}
	var other runtime.Object = &corev1.Pod{}
	if got, _ := slimNodes(other); got != other {
		t.Error("slimNodes changed a non-node")
	}
}

func TestSlimPod(t *testing.T) {
	p := testPod("p", "n", corev1.ConditionFalse, nodeLost)
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "big"}}
	p.Labels = map[string]string{"a": "b"}
	slimPod := slimPods("edgequorum-webhook")
	got, err := slimPod(p)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*corev1.Pod)
	if s.Name != "p" || s.UID != p.UID || s.Spec.NodeName != "n" || len(s.Spec.Containers) != 0 || s.Labels != nil {
		t.Errorf("slim pod kept too much or too little: %+v", s)
	}
	if len(s.Status.Conditions) != 1 || s.Status.Conditions[0].Type != corev1.PodReady {
		t.Errorf("slim pod conditions %v, want only Ready", s.Status.Conditions)
	}
	var other runtime.Object = &corev1.Node{}
	if got, _ := slimPod(other); got != other {
		t.Error("slimPod changed a non-pod")
	}
	// The webhook's own pods keep their labels: they tell its replicas.
	p.Namespace = "edgequorum-webhook"
	got, _ = slimPod(p)
	if l := got.(*corev1.Pod).Labels; l["a"] != "b" {
		t.Errorf("a pod of the webhook's namespace lost its labels: %v", l)
	}
}
