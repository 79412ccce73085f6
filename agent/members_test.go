package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// TestKubeletPort: a Node's published kubelet port is a candidate's, unless
// no TCP connection could use it.
func TestKubeletPort(t *testing.T) {
	for _, tt := range []struct {
		port int32
		want int
	}{{10250, 10250}, {10350, 10350}, {65535, 65535}, {0, 0}, {-1, 0}, {65536, 0}} {
		n := &kubeclient.Node{}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = tt.port
		if got := kubeletPort(n); got != tt.want {
			t.Errorf("kubeletPort(%d) = %d, want %d", tt.port, got, tt.want)
		}
	}
}

// TestNodeCacheKeepsWhatTheLeaderChecks: the zone's Node cache drops what
// nothing reads (managed fields, images, most conditions; its slim type does
// not even decode images) but keeps the Ready
// condition, which says whom the cloud cannot hear, and the EdgeQuorum
// condition, against which the leader checks every Node update for its
// committed verdict (apiwriter.Writer.Restore): without it, every kubelet
// status update would cost the leader a Node read and a leadership check.
func TestNodeCacheKeepsWhatTheLeaderChecks(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"zone": "z"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	node.Status.Images = []corev1.ContainerImage{{Names: []string{"registry.example/app:1"}, SizeBytes: 1 << 20}}
	node.Status.Conditions = []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		{Type: zonek8s.ConditionType, Status: corev1.ConditionTrue, Reason: "Healthy"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
	}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cloud-1", Labels: map[string]string{"zone": "cloud"}}}
	client := fake.NewClientset(node, other)
	m := newNodeMembers(wrap.Clientset(client), "zone", "z", 9470)
	delivered := make(chan *kubeclient.Node, 1)
	onNode := func(n *kubeclient.Node) {
		select {
		case delivered <- n:
		default:
		}
	}
	m.onNode.Store(&onNode)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go m.run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced) {
		t.Fatal("node cache did not sync")
	}
	// The leader's check (restoreVerdicts) is told of the Node as cached.
	select {
	case n := <-delivered:
		if n.Name != "edge-1" || n.ManagedFields != nil {
			t.Errorf("delivered %s with managed fields %v, want edge-1 without", n.Name, n.ManagedFields)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no Node delivered within 30 s")
	}
	nodes, err := m.lister.List(labels.Everything())
	if err != nil || len(nodes) != 1 || nodes[0].Name != "edge-1" {
		t.Fatalf("cached nodes %v, %v; want edge-1 alone", nodes, err)
	}
	got := nodes[0]
	if got.ManagedFields != nil {
		t.Errorf("cache kept managed fields %v", got.ManagedFields)
	}
	var types []string
	for _, c := range got.Status.Conditions {
		types = append(types, c.Type)
	}
	if want := []string{kubeclient.NodeReady, zonek8s.ConditionType}; !slices.Equal(types, want) {
		t.Errorf("cached conditions %v, want %v", types, want)
	}
	if c, _ := zonek8s.FindCondition(got.Status.Conditions); c == nil || c.Reason != "Healthy" {
		t.Errorf("EdgeQuorum condition %+v, want it as written", c)
	}
}
