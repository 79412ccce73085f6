package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestKubeletPort: a Node's published kubelet port is a candidate's, unless
// no TCP connection could use it.
func TestKubeletPort(t *testing.T) {
	for _, tt := range []struct {
		port int32
		want int
	}{{10250, 10250}, {10350, 10350}, {65535, 65535}, {0, 0}, {-1, 0}, {65536, 0}} {
		n := &corev1.Node{}
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = tt.port
		if got := kubeletPort(n); got != tt.want {
			t.Errorf("kubeletPort(%d) = %d, want %d", tt.port, got, tt.want)
		}
	}
}
