package testcluster

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testKubelet() *Kubelet {
	return &Kubelet{
		opts:    NodeOptions{Name: "n1", Zone: "z"},
		ip:      netip.MustParseAddr("127.9.9.1"),
		podCIDR: netip.MustParsePrefix("10.64.3.0/24"),
		podIPs:  map[string]netip.Addr{},
	}
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{
			NodeName:       "n1",
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox"}},
			Containers:     []corev1.Container{{Name: "a", Image: "pause"}, {Name: "b", Image: "pause"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// A second sync of a pod the kubelet already reported must write nothing:
// write counts in later tests depend on the fake kubelet not churning.
func TestRunningStatusIsStable(t *testing.T) {
	k := testKubelet()
	pod := testPod()
	ip, err := k.podIP("default/p", pod)
	if err != nil {
		t.Fatal(err)
	}
	first := k.runningStatus(pod, ip)
	if first.Phase != corev1.PodRunning || first.PodIP != "10.64.3.2" || first.HostIP != "127.9.9.1" {
		t.Fatalf("status = phase %s, podIP %s, hostIP %s", first.Phase, first.PodIP, first.HostIP)
	}
	if !conditionTrue(first.Conditions, corev1.PodReady) || len(first.ContainerStatuses) != 2 || len(first.InitContainerStatuses) != 1 {
		t.Fatalf("status not ready with every container: %+v", first)
	}
	pod.Status = *first
	if second := k.runningStatus(pod, ip); !equality.Semantic.DeepEqual(*first, *second) {
		t.Fatalf("second sync changed the status:\nfirst  %+v\nsecond %+v", first, second)
	}
}

// KCM marks the pods of an unreachable node not ready; once the kubelet is
// connected again it must report them ready.
func TestRunningStatusRestoresReadiness(t *testing.T) {
	k := testKubelet()
	pod := testPod()
	ip, _ := k.podIP("default/p", pod)
	pod.Status = *k.runningStatus(pod, ip)
	pod.Status.Conditions = setPodCondition(pod.Status.Conditions, corev1.PodReady, corev1.ConditionFalse, metav1.Now())
	if st := k.runningStatus(pod, ip); !conditionTrue(st.Conditions, corev1.PodReady) {
		t.Fatalf("Ready not restored: %+v", st.Conditions)
	}
}

func TestRunningStatusHonoursReadinessGates(t *testing.T) {
	k := testKubelet()
	pod := testPod()
	pod.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	ip, _ := k.podIP("default/p", pod)
	if st := k.runningStatus(pod, ip); conditionTrue(st.Conditions, corev1.PodReady) {
		t.Fatal("Ready=True with an unmet readiness gate")
	}
}

func TestPodIPs(t *testing.T) {
	k := testKubelet()
	a, _ := k.podIP("ns/a", testPod())
	b, _ := k.podIP("ns/b", testPod())
	if a == b || !k.podCIDR.Contains(a) || !k.podCIDR.Contains(b) {
		t.Fatalf("podIP: a=%v b=%v in %v", a, b, k.podCIDR)
	}
	if again, _ := k.podIP("ns/a", testPod()); again != a {
		t.Fatalf("podIP(ns/a) changed from %v to %v", a, again)
	}
	k.releasePodIP("ns/a")
	if c, _ := k.podIP("ns/c", testPod()); c != a {
		t.Fatalf("released %v not reused, got %v", a, c)
	}
	// A restarted kubelet keeps the address the pod already reports.
	kept := testPod()
	kept.Status.PodIP = "10.64.3.77"
	if got, _ := k.podIP("ns/kept", kept); got.String() != "10.64.3.77" {
		t.Fatalf("podIP ignored the reported address: %v", got)
	}
	for i := range 300 {
		if _, err := k.podIP("ns/x"+string(rune('A'+i%26))+string(rune('a'+i/26)), testPod()); err != nil {
			return // the /24 ran out, as it must
		}
	}
	t.Fatal("300 pods fit into a /24")
}
