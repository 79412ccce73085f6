package fleet

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// fleetNamespace holds the sites' pods.
const fleetNamespace = "fleet"

// simNode is one node of the fleet: its name, its site, its node key, and
// what its simulated kubelet last wrote.
type simNode struct {
	name string
	site string
	key  ed25519.PrivateKey

	mu    sync.Mutex
	lease *coordinationv1.Lease
	// cut stops the kubelet's writes: its site lost the cloud.
	cut atomic.Bool
}

// siteName and nodeName name the fleet's objects; the site is the zone.
func siteName(i int) string              { return fmt.Sprintf("site-%05d", i) }
func nodeName(site string, j int) string { return fmt.Sprintf("%s-n%d", site, j) }

// nodeKey is node's Ed25519 key, derived from its name: the run needs
// thirty thousand of them and no secrecy.
func nodeKey(node string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("edgequorum-fleet-bench/" + node))
	return ed25519.NewKeyFromSeed(seed[:])
}

// nodeObject is n's Node as a kubelet of 1.36 registers it, padded with
// container images to about size bytes of JSON, with its zone labels.
func nodeObject(n *simNode, size int, now time.Time) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.name,
			Labels: map[string]string{
				"kubernetes.io/hostname":           n.name,
				"kubernetes.io/os":                 "linux",
				"kubernetes.io/arch":               "amd64",
				"topology.kubernetes.io/zone":      n.site,
				zone.DefaultZoneLabel:              n.site,
				"node.kubernetes.io/instance-type": "edge-small",
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
		},
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("120Gi"),
	}
	node.Status = corev1.NodeStatus{
		Capacity: res, Allocatable: res,
		Conditions: testcluster.HealthyConditions(now, now),
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.name}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: "v1.36.0", ContainerRuntimeVersion: "containerd://2.1.0",
			OperatingSystem: "linux", Architecture: "amd64", OSImage: "Debian GNU/Linux 12 (bookworm)",
			KernelVersion: "6.1.0-edge", MachineID: hex.EncodeToString(n.key[:16]),
		},
	}
	for i := 0; ; i++ {
		b, err := json.Marshal(node)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
		if len(b) >= size {
			return node, nil
		}
		digest := sha256.Sum256(fmt.Appendf(nil, "%s/%d", n.name, i))
		node.Status.Images = append(node.Status.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example/edge/app-%d@sha256:%x", i, digest),
				fmt.Sprintf("registry.example/edge/app-%d:v1.%d.0", i, i%40),
			},
			SizeBytes: int64(20_000_000 + i*1_000_003),
		})
	}
}

// kubelets simulates the fleet's kubelets on a pacer: each renews its node
// Lease every kubeletLeaseRenew and posts its status every
// kubeletStatusEvery (dilated), as system:node:<name>, through one
// connection.
type kubelets struct {
	rest     rest.Interface // core/v1
	coord    rest.Interface // coordination.k8s.io/v1
	dilation float64
	errors   atomic.Int64
	lastErr  atomic.Value
}

// asNode makes req one of node's kubelet's.
func asNode(req *rest.Request, node string) *rest.Request {
	return req.SetHeader("Impersonate-User", "system:node:"+node).SetHeader("Impersonate-Group", "system:nodes", "system:authenticated")
}

func (k *kubelets) failed(err error) {
	k.errors.Add(1)
	k.lastErr.Store(err.Error())
}

// register creates n's Node, its status and its Lease, as its kubelet does.
func (k *kubelets) register(ctx context.Context, admin kubernetes.Interface, n *simNode, size int) error {
	now := time.Now()
	node, err := nodeObject(n, size, now)
	if err != nil {
		return err
	}
	status := node.Status
	created, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.name, err)
	}
	// A patch: the node lifecycle controller taints a new Node at once.
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if _, err := admin.CoreV1().Nodes().Patch(ctx, n.name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("post status of node %s: %w", n.name, err)
	}
	// Its agent registers its node key, as only it may.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		zone.NodeKeyAnnotation: zone.EncodeNodeKey(n.key.Public().(ed25519.PublicKey))}}})
	if err != nil {
		return err
	}
	if err := asAgent(k.rest.Patch(types.MergePatchType).Resource("nodes").Name(n.name).Body(patch), n.name).Do(ctx).Error(); err != nil {
		return fmt.Errorf("register the node key of %s as its agent: %w", n.name, err)
	}
	renew := metav1.NewMicroTime(now)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: n.name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: created.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.name),
			LeaseDurationSeconds: ptr.To(int32(40 * k.dilation)), RenewTime: &renew},
	}
	got, err := admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node lease %s: %w", n.name, err)
	}
	n.mu.Lock()
	n.lease = got
	n.mu.Unlock()
	return nil
}

// renewLease is one kubelet Lease renewal: an update of the Lease it last
// wrote, read again after a conflict.
func (k *kubelets) renewLease(ctx context.Context, n *simNode) {
	if n.cut.Load() {
		return
	}
	n.mu.Lock()
	l := n.lease.DeepCopy()
	n.mu.Unlock()
	now := metav1.NewMicroTime(time.Now())
	l.Spec.RenewTime = &now
	var out coordinationv1.Lease
	err := asNode(k.coord.Put().Namespace(corev1.NamespaceNodeLease).Resource("leases").Name(n.name).Body(l), n.name).
		Do(ctx).Into(&out)
	if err != nil {
		if ctx.Err() == nil {
			k.failed(fmt.Errorf("renew node lease %s: %w", n.name, err))
			// Read it again next time.
			if err := asNode(k.coord.Get().Namespace(corev1.NamespaceNodeLease).Resource("leases").Name(n.name), n.name).
				Do(ctx).Into(&out); err != nil {
				return
			}
		} else {
			return
		}
	}
	n.mu.Lock()
	n.lease = &out
	n.mu.Unlock()
}

// postStatus is the kubelet's periodic status report: its conditions'
// heartbeat, as a strategic merge patch of nodes/status.
func (k *kubelets) postStatus(ctx context.Context, n *simNode) {
	if n.cut.Load() {
		return
	}
	now := metav1.NewTime(time.Now())
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{
		{"type": corev1.NodeReady, "status": corev1.ConditionTrue, "reason": "KubeletReady",
			"message": "kubelet is posting ready status", "lastHeartbeatTime": now},
	}}})
	if err != nil {
		k.failed(err)
		return
	}
	err = asNode(k.rest.Patch(types.StrategicMergePatchType).Resource("nodes").Name(n.name).SubResource("status").Body(patch), n.name).
		Do(ctx).Error()
	if err != nil && ctx.Err() == nil {
		k.failed(fmt.Errorf("post status of node %s: %w", n.name, err))
	}
}

// pod is one of the fleet's workload pods on node, bound to it, as a
// controller would create it.
func pod(node string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-app-%d", node, i), Namespace: fleetNamespace,
			Labels: map[string]string{"app": "edge-app"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/edge/app-0:v1.0.0"}}},
	}
}

// runPod marks p running and ready, as its kubelet would.
func runPod(ctx context.Context, admin kubernetes.Interface, p *corev1.Pod) error {
	now := metav1.Now()
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}}
	if _, err := admin.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("run pod %s: %w", p.Name, err)
	}
	return nil
}
