package testcluster_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// gracePeriod is KCM's --node-monitor-grace-period in these tests. KCM checks
// every --node-monitor-period (5s), so Ready=Unknown comes 20–25s after the
// last Lease renewal.
const gracePeriod = 20 * time.Second

// tolerationSeconds is how long the killed node's pod tolerates the
// unreachable taint before the taint-eviction controller deletes it.
const tolerationSeconds = 10

// verdictTimeout bounds every wait for KCM: grace period, monitor period, the
// zone's taint rate limit (one node per 10s) and slack for a loaded CI box.
const verdictTimeout = gracePeriod + 60*time.Second

// TestControlPlane runs every scenario against one cluster, since starting one
// costs seconds and the scenarios use disjoint zones and so cannot disturb
// each other's verdicts.
func TestControlPlane(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{
		NodeMonitorGracePeriod: gracePeriod,
		AuditPolicy:            testcluster.WriteAuditPolicy,
	})
	pids := c.PIDs()
	if len(pids) != 3 {
		t.Fatalf("PIDs() = %v, want etcd, kube-apiserver and kube-controller-manager", pids)
	}

	t.Run("scenarios", func(t *testing.T) {
		t.Run("CutNodeGoesUnknownTaintedAndNotReady", func(t *testing.T) {
			t.Parallel()
			testCutNode(t, c)
		})
		t.Run("KilledNodesPodIsEvicted", func(t *testing.T) {
			t.Parallel()
			testKilledNode(t, c)
		})
	})

	t.Run("AuditLogShowsKubeletWrites", func(t *testing.T) {
		events, err := c.AuditEvents()
		if err != nil {
			t.Fatal(err)
		}
		renewals := 0
		for _, e := range events {
			if e.Verb == "update" && e.User.Username == "system:node:cloud" &&
				e.ObjectRef != nil && e.ObjectRef.Resource == "leases" && e.ObjectRef.Name == "cloud" {
				renewals++
			}
		}
		t.Logf("audit log: %d write events, %d Lease renewals by the cloud node", len(events), renewals)
		if renewals == 0 {
			t.Errorf("no Lease renewal by system:node:cloud among %d audited writes", len(events))
		}
	})

	t.Run("StopLeavesNoProcess", func(t *testing.T) {
		nodes := c.Nodes()
		if err := c.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		for name, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("%s (pid %d) still exists after Stop: kill(0) = %v", name, pid, err)
			}
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group of %s (pgid %d) still has members after Stop: kill(0) = %v", name, pid, err)
			}
		}
		for _, k := range nodes {
			if conn, err := net.DialTimeout("tcp", k.KubeletAddr().String(), time.Second); err == nil {
				conn.Close()
				t.Errorf("node %s still listens on %v after Stop", k.Name(), k.KubeletAddr())
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

// testCutNode: a node cut from the cloud keeps running, but the real KCM sees
// its Lease go stale, marks it Ready=Unknown, taints it unreachable, marks its
// pod not ready, and the EndpointSlice controller flips its endpoint. After
// Reconnect all of that heals.
func testCutNode(t *testing.T, c *testcluster.Cluster) {
	ctx := t.Context()
	cs := c.Client()
	k, err := c.AddNode(ctx, testcluster.NodeOptions{Name: "edge-a-1", Zone: "edge-a"})
	if err != nil {
		t.Fatal(err)
	}
	createService(t, cs, "web-a")
	createPod(t, cs, "web-a-0", "web-a", k.Name(), nil)
	poll.UntilTrue(t, verdictTimeout, "pod web-a-0 ready", func() bool {
		return podReady(ctx, cs, "web-a-0") == corev1.ConditionTrue
	})
	poll.UntilTrue(t, verdictTimeout, "endpoint of web-a-0 ready", func() bool {
		return endpointReady(ctx, cs, "web-a", "web-a-0") == "true"
	})

	cutAt := time.Now()
	k.Cut()
	if got := k.State(); got != testcluster.StateCut {
		t.Fatalf("State() after Cut = %v", got)
	}
	poll.UntilTrue(t, verdictTimeout, "node edge-a-1 Ready=Unknown", func() bool {
		return nodeReady(ctx, cs, k.Name()) == corev1.ConditionUnknown
	})
	t.Logf("cut → Ready=Unknown after %v", time.Since(cutAt).Round(100*time.Millisecond))
	poll.UntilTrue(t, verdictTimeout, "both unreachable taints on edge-a-1", func() bool {
		taints := nodeTaints(ctx, cs, k.Name())
		return taints[corev1.TaintEffectNoSchedule] && taints[corev1.TaintEffectNoExecute]
	})
	t.Logf("cut → unreachable NoSchedule and NoExecute taints after %v", time.Since(cutAt).Round(100*time.Millisecond))
	poll.UntilTrue(t, verdictTimeout, "pod web-a-0 Ready=False", func() bool {
		return podReady(ctx, cs, "web-a-0") == corev1.ConditionFalse
	})
	t.Logf("cut → pod Ready=False after %v", time.Since(cutAt).Round(100*time.Millisecond))
	poll.UntilTrue(t, verdictTimeout, "endpoint of web-a-0 not ready", func() bool {
		return endpointReady(ctx, cs, "web-a", "web-a-0") == "false"
	})
	t.Logf("cut → EndpointSlice endpoint ready=false after %v", time.Since(cutAt).Round(100*time.Millisecond))

	// Cut is not Kill: the node still answers kubelet probes.
	conn, err := net.DialTimeout("tcp", k.KubeletAddr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("cut node stopped listening on %v: %v", k.KubeletAddr(), err)
	}
	conn.Close()

	if err := k.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	reconnectAt := time.Now()
	poll.UntilTrue(t, verdictTimeout, "edge-a-1 Ready=True without unreachable taints", func() bool {
		return nodeReady(ctx, cs, k.Name()) == corev1.ConditionTrue && len(nodeTaints(ctx, cs, k.Name())) == 0
	})
	poll.UntilTrue(t, verdictTimeout, "endpoint of web-a-0 ready again", func() bool {
		return endpointReady(ctx, cs, "web-a", "web-a-0") == "true"
	})
	t.Logf("reconnect → node Ready, untainted, endpoint ready after %v", time.Since(reconnectAt).Round(100*time.Millisecond))
}

// testKilledNode: a killed node's pod outlives the unreachable:NoExecute taint
// only for its tolerationSeconds; then the taint-eviction controller deletes it,
// which with no kubelet to finish the job leaves it terminating. A restarted
// kubelet finishes the deletion.
func testKilledNode(t *testing.T, c *testcluster.Cluster) {
	ctx := t.Context()
	cs := c.Client()
	k, err := c.AddNode(ctx, testcluster.NodeOptions{Name: "edge-b-1", Zone: "edge-b"})
	if err != nil {
		t.Fatal(err)
	}
	tolerations := []corev1.Toleration{
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
	}
	createPod(t, cs, "web-b-0", "web-b", k.Name(), tolerations)
	poll.UntilTrue(t, verdictTimeout, "pod web-b-0 ready", func() bool {
		return podReady(ctx, cs, "web-b-0") == corev1.ConditionTrue
	})

	killAt := time.Now()
	k.Kill()
	if conn, err := net.DialTimeout("tcp", k.KubeletAddr().String(), time.Second); err == nil {
		conn.Close()
		t.Fatalf("killed node still listens on %v", k.KubeletAddr())
	}
	var taintedAt time.Time
	poll.UntilTrue(t, verdictTimeout, "unreachable:NoExecute taint on edge-b-1", func() bool {
		if !nodeTaints(ctx, cs, k.Name())[corev1.TaintEffectNoExecute] {
			return false
		}
		taintedAt = time.Now()
		return true
	})
	t.Logf("kill → unreachable:NoExecute taint after %v", taintedAt.Sub(killAt).Round(100*time.Millisecond))
	poll.UntilTrue(t, verdictTimeout, "web-b-0 evicted (deletionTimestamp set)", func() bool {
		pod, err := cs.CoreV1().Pods(corev1.NamespaceDefault).Get(ctx, "web-b-0", metav1.GetOptions{})
		return err == nil && pod.DeletionTimestamp != nil
	})
	evictedAfter := time.Since(taintedAt)
	t.Logf("taint → eviction after %v (tolerationSeconds %d)", evictedAfter.Round(100*time.Millisecond), tolerationSeconds)
	if evictedAfter < tolerationSeconds*time.Second-2*time.Second {
		t.Errorf("pod evicted %v after the taint, before its tolerationSeconds (%ds) ran out", evictedAfter, tolerationSeconds)
	}

	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, verdictTimeout, "restarted kubelet to finish deleting web-b-0", func() bool {
		_, err := cs.CoreV1().Pods(corev1.NamespaceDefault).Get(ctx, "web-b-0", metav1.GetOptions{})
		return isNotFound(err)
	})
}

func createService(t *testing.T, cs kubernetes.Interface, app string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if _, err := cs.CoreV1().Services(corev1.NamespaceDefault).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating service %s: %v", app, err)
	}
}

// createPod binds the pod to node directly: the harness runs no scheduler.
func createPod(t *testing.T, cs kubernetes.Interface, name, app, node string, tolerations []corev1.Toleration) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: tolerations,
			Containers: []corev1.Container{{
				Name:  "web",
				Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
	if _, err := cs.CoreV1().Pods(corev1.NamespaceDefault).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
}

func nodeReady(ctx context.Context, cs kubernetes.Interface, name string) corev1.ConditionStatus {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// nodeTaints returns the effects of the node's node.kubernetes.io/unreachable
// taints.
func nodeTaints(ctx context.Context, cs kubernetes.Interface, name string) map[corev1.TaintEffect]bool {
	node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	effects := map[corev1.TaintEffect]bool{}
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable {
			effects[taint.Effect] = true
		}
	}
	return effects
}

func podReady(ctx context.Context, cs kubernetes.Interface, name string) corev1.ConditionStatus {
	pod, err := cs.CoreV1().Pods(corev1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// endpointReady returns "true" or "false" for the pod's endpoint in the
// service's EndpointSlices, or "" if there is none.
func endpointReady(ctx context.Context, cs kubernetes.Interface, service, pod string) string {
	slices, err := cs.DiscoveryV1().EndpointSlices(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return ""
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.Name == pod {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					return "true"
				}
				return "false"
			}
		}
	}
	return ""
}

func isNotFound(err error) bool {
	var status interface{ Status() metav1.Status }
	return errors.As(err, &status) && status.Status().Reason == metav1.StatusReasonNotFound
}
