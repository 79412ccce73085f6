package realnode_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/internal/realnode"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(realnode.RunInNamespace(m)) }

const (
	nodeName = "real-1"
	zone     = "edge-a"
)

// TestRealNode runs pods on a real kubelet with containerd, runc, CNI and
// kube-proxy: a hostNetwork pod to exec into (as the agent DaemonSet will be),
// a pod-network pod the test process reaches at its pod IP (as the apiserver
// will reach the webhook), and a pod that reaches the apiserver through the
// "kubernetes" ClusterIP (as rest.InClusterConfig does).
func TestRealNode(t *testing.T) {
	realnode.Require(t)
	testcluster.RequireBinaries(t)
	started := time.Now()
	cluster := testcluster.StartT(t, testcluster.Options{AdvertiseAddress: realnode.APIServerAddress})
	node := realnode.StartT(t, cluster, realnode.Options{
		Name:   nodeName,
		Labels: map[string]string{"topology.kubernetes.io/zone": zone},
	})
	t.Logf("cluster and real node ready after %v", time.Since(started).Round(time.Millisecond))
	client := cluster.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("getting node: %v", err)
	}
	if got := n.Labels["topology.kubernetes.io/zone"]; got != zone {
		t.Errorf("zone label = %q, want %q", got, zone)
	}
	if !hasAddress(n, corev1.NodeInternalIP, realnode.NodeAddress.String()) {
		t.Errorf("node addresses %v lack InternalIP %s", n.Status.Addresses, realnode.NodeAddress)
	}
	waitKubernetesEndpoints(ctx, t, client)

	imageTar := filepath.Join(t.TempDir(), "testimage.tar")
	if err := realnode.BuildGoImage(ctx, "", "github.com/edgequorum/edgequorum/internal/realnode/testimage", realnode.TestImage, imageTar); err != nil {
		t.Fatal(err)
	}
	if err := node.ImportImage(ctx, imageTar); err != nil {
		t.Fatal(err)
	}

	pods := client.CoreV1().Pods(corev1.NamespaceDefault)
	for _, p := range []*corev1.Pod{
		testPod("host", true, corev1.RestartPolicyAlways, "sleep"),
		testPod("web", false, corev1.RestartPolicyAlways, "serve", ":8080"),
		testPod("dial", false, corev1.RestartPolicyNever, "apiserver"),
	} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s: %v", p.Name, err)
		}
	}

	host := waitPod(ctx, t, client, "host", corev1.PodRunning)
	if host.Status.PodIP != realnode.NodeAddress.String() {
		t.Errorf("hostNetwork pod IP = %s, want the node's %s", host.Status.PodIP, realnode.NodeAddress)
	}
	web := waitPod(ctx, t, client, "web", corev1.PodRunning)
	if !realnode.PodCIDR.Contains(mustAddr(t, web.Status.PodIP)) {
		t.Errorf("pod IP %s not in %s", web.Status.PodIP, realnode.PodCIDR)
	}
	// The scheduler placed them: the test set no nodeName.
	if web.Spec.NodeName != nodeName {
		t.Errorf("web runs on %q, want %q", web.Spec.NodeName, nodeName)
	}
	checkPodIPReachable(ctx, t, web.Status.PodIP)
	waitPod(ctx, t, client, "dial", corev1.PodSucceeded)
	if logs := podLogs(ctx, t, client, "dial"); !strings.Contains(logs, "gitVersion") {
		t.Errorf("dial pod logs lack the apiserver's /version: %s", logs)
	}

	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.KubeconfigPath(),
		"exec", "host", "--", "/testimage", "echo", "hello", "from", "the", "node").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl exec: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "hello from the node" {
		t.Errorf("kubectl exec printed %q", got)
	}
	t.Logf("pods verified after %v", time.Since(started).Round(time.Millisecond))
}

func testPod(name string, hostNetwork bool, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": nodeName},
			HostNetwork:                   hostNetwork,
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            name,
				Image:           realnode.TestImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Args:            args,
			}},
		},
	}
}

// waitPod polls until the pod reaches phase; a pod that ends in another
// terminal phase fails the test at once, with its logs.
func waitPod(ctx context.Context, t *testing.T, client kubernetes.Interface, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(corev1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		pod = p
		if p.Status.Phase == phase {
			return true, nil
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			return false, fmt.Errorf("pod %s ended %s", name, p.Status.Phase)
		}
		return false, nil
	})
	if err != nil {
		var status any
		if pod != nil {
			status = pod.Status
		}
		t.Fatalf("waiting for pod %s to be %s: %v\nstatus: %+v\nlogs: %s", name, phase, err, status, podLogs(ctx, t, client, name))
	}
	return pod
}

func podLogs(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	b, err := client.CoreV1().Pods(corev1.NamespaceDefault).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(logs of %s: %v)", name, err)
	}
	return string(b)
}

// waitKubernetesEndpoints waits for the endpoint reconciler to publish the
// advertise address behind the "kubernetes" Service.
func waitKubernetesEndpoints(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := client.DiscoveryV1().EndpointSlices(corev1.NamespaceDefault).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=kubernetes",
		})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%+v", slices.Items)
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					if a == realnode.APIServerAddress.String() {
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("kubernetes Service endpoints never carried %s: %v (last: %s)", realnode.APIServerAddress, err, last)
	}
}

func checkPodIPReachable(ctx context.Context, t *testing.T, ip string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	url := "http://" + net.JoinHostPort(ip, "8080") + "/"
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != "ok" {
			last = fmt.Errorf("%s: %q", resp.Status, body)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod IP %s unreachable from the test process: %v (last: %v)", ip, err, last)
	}
}

func hasAddress(n *corev1.Node, typ corev1.NodeAddressType, addr string) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == typ && a.Address == addr {
			return true
		}
	}
	return false
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("pod IP %q: %v", s, err)
	}
	return a
}
