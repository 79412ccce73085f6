package wrap

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
)

// TestNodeIsTheNodeTheAPIServerSends: Node converts field by field; the agent
// decodes the apiserver's JSON. Both must give the same Node, and the copy
// must share nothing with the original.
func TestNodeIsTheNodeTheAPIServerSends(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC))
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"zone": "z"}, Annotations: map[string]string{"k": "v"}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: at, LastTransitionTime: at, Reason: "KubeletReady", Message: "ok"}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.2"}, {Type: corev1.NodeHostName, Address: "edge-1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			Images:          []corev1.ContainerImage{{Names: []string{"app:1"}}},
		},
	}
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	decoded := &kubeclient.Node{}
	if err := json.Unmarshal(raw, decoded); err != nil {
		t.Fatal(err)
	}
	got := Node(n)
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(decoded)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("converted:\n%s\ndecoded from the apiserver's JSON:\n%s", gotJSON, wantJSON)
	}
	got.Labels["zone"] = "y"
	got.Status.Addresses[0].Address = "127.0.0.3"
	if n.Labels["zone"] != "z" || n.Status.Addresses[0].Address != "127.0.0.2" {
		t.Errorf("changing the converted Node changed the original: %+v", n)
	}
}
