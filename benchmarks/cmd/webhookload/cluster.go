package main

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but the endpoints controller still writes it and the repair loop caches it.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

const (
	term = 7
	// maxPool is how many distinct reviews of each kind are replayed at
	// most: a cut that takes thousands of nodes Unknown brings reviews of
	// thousands of objects, so the webhook's caches and its memos of
	// verdicts and zone evidence must not all be hot, as they were with a
	// hundred.
	maxPool = 5000
	// podsPerService is how many pods back each Service; its one
	// EndpointSlice and one Endpoints object name them all.
	podsPerService = 10
	nodeController = "system:serviceaccount:kube-system:node-controller"
	// kubeletStopped is the message the node lifecycle controller writes on
	// every kubelet condition of a node it stopped hearing.
	kubeletStopped = "Kubelet stopped posting node status."
)

// cluster is what the webhook's caches hold: every node Unknown after a cut,
// vouched by its zone's fresh signed Lease and verdict, and by its peers'
// signed evidence that they reach it; every pod still Ready and every
// endpoint ready. It is the state after the webhook has done its work (the
// unreachable:NoExecute taint already kept off, pods and endpoints kept
// ready), so the repair loop finds nothing to write, and the reviews replay
// the node lifecycle controller's writes that the webhook changes.
type cluster struct {
	zoneSize   int
	nodes      []*corev1.Node
	pods       []*corev1.Pod
	nodeLeases []*coordinationv1.Lease
	zoneLeases []*coordinationv1.Lease
	slices     []*discoveryv1.EndpointSlice
	endpoints  []*corev1.Endpoints
	lost       time.Time
}

func nodeName(i int) string    { return fmt.Sprintf("edge-%05d", i) }
func podName(i int) string     { return fmt.Sprintf("app-%06d", i) }
func serviceName(g int) string { return fmt.Sprintf("svc-%05d", g) }

func (c *cluster) zoneName(i int) string { return fmt.Sprintf("zone-%05d", i/c.zoneSize) }
func (c *cluster) leaderOf(i int) int    { return i / c.zoneSize * c.zoneSize }

func key(node string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(node))
	return ed25519.NewKeyFromSeed(seed[:])
}

// podIP and nodeIP keep pods and nodes apart in 10.0.0.0/8 for up to 2^23
// of each.
func podIP(i int) string  { return fmt.Sprintf("10.%d.%d.%d", 128+i>>16&127, i>>8&255, i&255) }
func nodeIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&127, i>>8&255, i&255) }

// zoneEvidence is the quorum's evidence in the Lease of the zone whose first
// node is first: every member signs that it reaches every other, since every
// node is Unknown to the cloud while its zone's Lease is fresh. It is the
// webhook's most expensive case: a majority of attestations to count for
// every review.
func (c *cluster) zoneEvidence(first int, keys []ed25519.PrivateKey, at time.Time) string {
	var members []string
	for j := first; j < first+c.zoneSize; j++ {
		members = append(members, nodeName(j))
	}
	atts := make([]zone.Attestation, 0, len(members))
	for k, signer := range members {
		a := zone.Attestation{Zone: c.zoneName(first), Signer: signer, At: at}
		for _, m := range members {
			if m != signer {
				a.Reach = append(a.Reach, m)
			}
		}
		a.Sign(keys[first+k])
		atts = append(atts, a)
	}
	return zone.FormatEvidence(atts)
}

// buildCluster builds nodes nodes in zones of zoneSize (nodes a multiple of
// it), pods pods spread over them, and a Service of podsPerService pods at a
// time, with its EndpointSlice and Endpoints object.
func buildCluster(nodes, pods, zoneSize int) (*cluster, error) {
	now := time.Now()
	c := &cluster{zoneSize: zoneSize, lost: now.Add(-time.Minute)}
	keys := make([]ed25519.PrivateKey, nodes)
	for i := range nodes {
		keys[i] = key(nodeName(i))
	}
	for i := range nodes {
		n, err := c.node(i, keys, now)
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		c.nodeLeases = append(c.nodeLeases, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: admission.NodeLeaseNamespace, Name: n.Name, UID: types.UID("uid-lease-" + n.Name), ResourceVersion: "1",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: c.lost.Add(-30 * time.Second)}},
		})
		if i == c.leaderOf(i) {
			z := c.zoneName(i)
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: zone.DefaultLeaseNamespace, Name: zone.LeaseName(z), ResourceVersion: "1",
					Labels:      map[string]string{zonek8s.ZoneLabel: z},
					Annotations: map[string]string{zone.LeaseTermAnnotation: strconv.Itoa(term)}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name), LeaseDurationSeconds: ptr.To[int32](3600),
					RenewTime: &metav1.MicroTime{Time: now.Truncate(time.Microsecond)}},
			}
			l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(keys[i])
			l.Annotations[zone.LeaseEvidenceAnnotation] = c.zoneEvidence(i, keys, now)
			c.zoneLeases = append(c.zoneLeases, l)
		}
	}
	for i := range pods {
		name := podName(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
				Labels: map[string]string{"app": serviceName(i / podsPerService)}},
			Spec: corev1.PodSpec{NodeName: nodeName(i % nodes),
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP(i),
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.lost.Add(-time.Hour))},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.lost.Add(-time.Hour))},
				}},
		}
		c.pods = append(c.pods, p)
	}
	for g := range (pods + podsPerService - 1) / podsPerService {
		c.service(g)
	}
	return c, nil
}

// node is node i as the cloud stores it once its kubelet went silent: a
// kubelet-style status (conditions, resources, images, identity) of 10-20 KB
// as JSON, the size real Nodes have, most of it the images the kubelet
// reports; the node lifecycle controller's Unknown conditions and
// unreachable:NoSchedule taint; the zone's verdict and the node's key.
func (c *cluster) node(i int, keys []ed25519.PrivateKey, now time.Time) (*corev1.Node, error) {
	name, z, leader := nodeName(i), c.zoneName(i), nodeName(c.leaderOf(i))
	a := zone.Annotation{State: zone.Healthy, Zone: z, Term: term, Leader: leader, At: c.lost, Pros: c.zoneSize - 1, Members: c.zoneSize}
	a.Sign(name, leader, keys[c.leaderOf(i)])
	verdict, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("verdict of %s: %w", name, err)
	}
	hw := hardware[i%len(hardware)]
	region := fmt.Sprintf("region-%d", i/c.zoneSize%8)
	id := sha256.Sum256([]byte("machine-" + name))
	uuid := func(b []byte) string {
		h := hex.EncodeToString(b[:16])
		return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	}
	lostAt, heard := metav1.NewTime(c.lost), metav1.NewTime(c.lost.Add(-40*time.Second))
	unknown := func(t corev1.NodeConditionType) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: kubeletStopped,
			LastHeartbeatTime: heard, LastTransitionTime: lostAt}
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			CreationTimestamp: metav1.NewTime(now.Add(-90 * 24 * time.Hour)),
			Labels: map[string]string{
				"beta.kubernetes.io/arch":          hw.arch,
				"beta.kubernetes.io/os":            "linux",
				corev1.LabelArchStable:             hw.arch,
				corev1.LabelOSStable:               "linux",
				corev1.LabelHostname:               name,
				corev1.LabelInstanceTypeStable:     hw.instanceType,
				corev1.LabelTopologyRegion:         region,
				corev1.LabelTopologyZone:           z,
				"node-role.kubernetes.io/edge":     "",
				"fleet.example.com/site":           z,
				"fleet.example.com/hardware-rev":   hw.rev,
				"fleet.example.com/maintenance":    "window-b",
				zone.DefaultZoneLabel:              z,
				"feature.node.kubernetes.io/gpu":   strconv.FormatBool(hw.gpu),
				"feature.node.kubernetes.io/usbtv": "false",
			},
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl":                           "0",
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"local.csi.fleet.example.com":"%s"}`, name),
				"projectcalico.org/IPv4Address":                          nodeIP(i) + "/16",
				"projectcalico.org/IPv4VXLANTunnelAddr":                  fmt.Sprintf("10.%d.%d.1", 192+i>>14&63, i>>6&255),
				zone.NodeKeyAnnotation:                                   zone.EncodeNodeKey(keys[i].Public().(ed25519.PublicKey)),
				zone.AnnotationKey:                                       string(verdict),
			}},
		Spec: corev1.NodeSpec{
			PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 192+i>>16&63, i>>8&255), PodCIDRs: []string{fmt.Sprintf("10.%d.%d.0/24", 192+i>>16&63, i>>8&255)},
			ProviderID: "edge://fleet/" + region + "/" + name,
			// The webhook kept unreachable:NoExecute off; NoSchedule stays.
			Taints: []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Capacity:    hw.capacity,
			Allocatable: hw.allocatable,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "CalicoIsUp", Message: "Calico is running on this node",
					LastHeartbeatTime: metav1.NewTime(now.Add(-60 * 24 * time.Hour)), LastTransitionTime: metav1.NewTime(now.Add(-60 * 24 * time.Hour))},
				unknown(corev1.NodeMemoryPressure),
				unknown(corev1.NodeDiskPressure),
				unknown(corev1.NodePIDPressure),
				unknown(corev1.NodeReady),
				corecond.Condition(a, nil),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: nodeIP(i)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: hex.EncodeToString(id[:16]), SystemUUID: uuid(id[16:]), BootID: uuid(id[8:24]),
				KernelVersion: hw.kernel, OSImage: "Ubuntu 24.04.2 LTS", ContainerRuntimeVersion: "containerd://2.0.5",
				KubeletVersion: "v1.36.0", OperatingSystem: "linux", Architecture: hw.arch,
			},
			Images: nodeImages(i),
			RuntimeHandlers: []corev1.NodeRuntimeHandler{
				{Name: "runc", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
				{Name: "", Features: &corev1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(true)}},
			},
			Features: &corev1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
		},
	}
	return n, nil
}

// box is one kind of edge machine of the fleet.
type box struct {
	arch, instanceType, rev, kernel string
	gpu                             bool
	capacity, allocatable           corev1.ResourceList
}

func resources(cpu, memory, storage, pods string) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourceEphemeralStorage: resource.MustParse(storage), corev1.ResourcePods: resource.MustParse(pods),
		"hugepages-1Gi": resource.MustParse("0"), "hugepages-2Mi": resource.MustParse("0"),
	}
}

var hardware = []box{
	{arch: "arm64", instanceType: "edge-box-s", rev: "r3", kernel: "6.8.0-1018-raspi",
		capacity: resources("4", "8139476Ki", "61255492Ki", "110"), allocatable: resources("3800m", "7512788Ki", "56453061334", "110")},
	{arch: "arm64", instanceType: "edge-box-m", rev: "r5", kernel: "6.8.0-1021-nvidia-tegra", gpu: true,
		capacity: resources("8", "16101540Ki", "121017164Ki", "110"), allocatable: resources("7600m", "15474852Ki", "111530935316", "110")},
	{arch: "amd64", instanceType: "edge-box-l", rev: "r2", kernel: "6.8.0-57-generic",
		capacity: resources("16", "32790948Ki", "479596204Ki", "250"), allocatable: resources("15500m", "31640996Ki", "441994740224", "250")},
}

// image is one container image a node's kubelet reports.
type image struct {
	repo, tag string
	mb        int64
}

// catalogue is what the fleet's nodes have pulled: the system's images and
// several versions of its applications, which the kubelet keeps until disk
// pressure collects them.
var catalogue = func() []image {
	imgs := []image{
		{"registry.k8s.io/pause", "3.10", 1}, {"registry.k8s.io/kube-proxy", "v1.36.0", 31},
		{"registry.k8s.io/kube-proxy", "v1.35.4", 30}, {"registry.k8s.io/coredns/coredns", "v1.12.1", 22},
		{"registry.k8s.io/metrics-server/metrics-server", "v0.7.2", 20}, {"registry.k8s.io/sig-storage/csi-node-driver-registrar", "v2.13.0", 11},
		{"registry.k8s.io/sig-storage/livenessprobe", "v2.15.0", 10}, {"registry.k8s.io/sig-storage/csi-provisioner", "v5.2.0", 29},
		{"registry.k8s.io/ingress-nginx/controller", "v1.12.1", 112}, {"docker.io/calico/node", "v3.29.3", 151},
		{"docker.io/calico/cni", "v3.29.3", 94}, {"docker.io/calico/kube-controllers", "v3.29.3", 34},
		{"docker.io/calico/pod2daemon-flexvol", "v3.29.3", 7}, {"docker.io/calico/csi", "v3.29.3", 9},
		{"quay.io/prometheus/node-exporter", "v1.9.1", 12}, {"quay.io/prometheus-operator/prometheus-config-reloader", "v0.81.0", 15},
		{"cr.fluentbit.io/fluent/fluent-bit", "4.0.3", 39}, {"docker.io/grafana/promtail", "3.4.3", 84},
		{"ghcr.io/edgequorum/edgequorum", "v0.4.0", 18}, {"ghcr.io/edgequorum/edgequorum", "v0.3.2", 17},
		{"quay.io/jetstack/cert-manager-controller", "v1.17.2", 21}, {"ghcr.io/fluxcd/source-controller", "v1.5.0", 40},
		{"ghcr.io/fluxcd/kustomize-controller", "v1.5.1", 38}, {"docker.io/library/busybox", "1.37.0", 2},
		{"docker.io/library/alpine", "3.21.3", 4}, {"docker.io/library/nginx", "1.27.5-alpine", 21},
		{"docker.io/library/redis", "7.4.3-alpine", 17}, {"docker.io/eclipse-mosquitto", "2.0.21", 9},
		{"docker.io/library/postgres", "17.5-bookworm", 153}, {"docker.io/influxdb", "2.7.11", 184},
		{"docker.io/grafana/grafana", "11.6.0", 187}, {"docker.io/traefik", "v3.3.6", 58},
		{"docker.io/openpolicyagent/gatekeeper", "v3.19.1", 33}, {"docker.io/library/python", "3.13-slim", 45},
	}
	apps := []struct {
		repo string
		mb   int64
	}{
		{"registry.fleet.example.com/retail/pos-backend", 96}, {"registry.fleet.example.com/retail/pos-frontend", 41},
		{"registry.fleet.example.com/retail/inventory-sync", 63}, {"registry.fleet.example.com/vision/camera-ingest", 212},
		{"registry.fleet.example.com/vision/edge-inference", 1840}, {"registry.fleet.example.com/platform/telemetry-agent", 27},
		{"registry.fleet.example.com/platform/config-sync", 19},
	}
	for _, a := range apps {
		for v := range 4 {
			imgs = append(imgs, image{a.repo, fmt.Sprintf("2.%d.%d", 14-v/2, 7-v), a.mb + int64(v)})
		}
	}
	return imgs
}()

// containerImages are the catalogue's images as kubelets report them: by
// digest and tag, and the latest of each application by its major tag too.
var containerImages = func() []corev1.ContainerImage {
	out := make([]corev1.ContainerImage, 0, len(catalogue))
	for i, im := range catalogue {
		sum := sha256.Sum256([]byte(im.repo + ":" + im.tag))
		names := []string{im.repo + "@sha256:" + hex.EncodeToString(sum[:]), im.repo + ":" + im.tag}
		if strings.HasPrefix(im.repo, "registry.fleet.example.com/") && (i == 0 || catalogue[i-1].repo != im.repo) {
			names = append(names, im.repo+":2", im.repo+":latest")
		}
		out = append(out, corev1.ContainerImage{Names: names, SizeBytes: im.mb<<20 + int64(sum[0])<<12})
	}
	return out
}()

// nodeImages are node i's images: 40 to 50 of the catalogue, largest first,
// as the kubelet lists them (it reports at most 50).
func nodeImages(i int) []corev1.ContainerImage {
	n := 40 + i%11
	out := make([]corev1.ContainerImage, 0, n)
	for j := range n {
		out = append(out, containerImages[(i*7+j)%len(containerImages)])
	}
	slices.SortStableFunc(out, func(a, b corev1.ContainerImage) int { return int(b.SizeBytes>>20 - a.SizeBytes>>20) })
	return out
}

// service adds Service g's EndpointSlice and Endpoints object: its pods,
// every one ready, as the webhook kept them.
func (c *cluster) service(g int) {
	svc := serviceName(g)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc + "-x7k2p", UID: types.UID("uid-slice-" + svc), ResourceVersion: "1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc, UID: types.UID("uid-svc-" + svc),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	e := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc, UID: types.UID("uid-ep-" + svc), ResourceVersion: "1",
			Labels: map[string]string{"app": svc}},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}},
	}
	for i := g * podsPerService; i < min((g+1)*podsPerService, len(c.pods)); i++ {
		p := c.pods[i]
		ref := &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{p.Status.PodIP}, NodeName: ptr.To(p.Spec.NodeName), TargetRef: ref,
			Zone:       ptr.To(c.zoneName(i % len(c.nodes))),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
		e.Subsets[0].Addresses = append(e.Subsets[0].Addresses, corev1.EndpointAddress{IP: p.Status.PodIP, NodeName: ptr.To(p.Spec.NodeName), TargetRef: ref})
	}
	c.slices = append(c.slices, s)
	c.endpoints = append(c.endpoints, e)
}

// objects counts what the fake API holds of c.
func (c *cluster) objects() int {
	return len(c.nodes) + len(c.pods) + len(c.nodeLeases) + len(c.zoneLeases) + len(c.slices) + len(c.endpoints)
}

// reviewStats is what writeReviews tells about the reviews it wrote.
type reviewStats struct {
	// Distinct is how many distinct reviews of each kind are replayed.
	Distinct map[string]int
	// NodeBytes is the mean size of the replayed Nodes as JSON.
	NodeBytes int
	// Bytes is the size of all reviews.
	Bytes int
}

// writeReviews writes up to maxPool distinct reviews of each kind, one JSON
// AdmissionReview per line, into dir/<kind>.jsonl, in a fixed shuffled order:
// each is a write of the node lifecycle controller or the EndpointSlice
// controller after the cut, which the webhook changes, with the stored
// object as oldObject.
func writeReviews(dir string, c *cluster) (reviewStats, error) {
	review := func(uid string, kind metav1.GroupVersionKind, resource, sub string, obj, old runtime.Object) ([]byte, int, error) {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, 0, err
		}
		req := &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Kind: kind, Operation: admissionv1.Update, SubResource: sub,
			Resource: metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
			UserInfo: authenticationv1.UserInfo{Username: nodeController},
			Object:   runtime.RawExtension{Raw: raw},
		}
		if req.OldObject.Raw, err = json.Marshal(old); err != nil {
			return nil, 0, err
		}
		b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
		return b, len(req.OldObject.Raw), err
	}
	// pick spreads a pool of distinct objects evenly over n of them.
	pick := func(i, pool, n int) int { return i * n / pool }
	nodeBytes := 0
	kinds := []struct {
		name  string
		pool  int
		build func(i, pool int) ([]byte, error)
	}{
		{"node", min(maxPool, len(c.nodes)), func(i, pool int) ([]byte, error) {
			old := c.nodes[pick(i, pool, len(c.nodes))]
			n := old.DeepCopy()
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.Now())})
			b, size, err := review(fmt.Sprintf("node-%d", i), metav1.GroupVersionKind{Version: "v1", Kind: "Node"}, "nodes", "", n, old)
			nodeBytes += size
			return b, err
		}},
		{"podstatus", min(maxPool, len(c.pods)), func(i, pool int) ([]byte, error) {
			old := c.pods[pick(i, pool, len(c.pods))]
			p := old.DeepCopy()
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.Conditions[0].LastTransitionTime = metav1.Now()
			return withoutSize(review(fmt.Sprintf("pod-%d", i), metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", "status", p, old))
		}},
		{"endpointslice", min(maxPool, len(c.slices)), func(i, pool int) ([]byte, error) {
			old := c.slices[pick(i, pool, len(c.slices))]
			s := old.DeepCopy()
			for j := range s.Endpoints {
				s.Endpoints[j].Conditions.Ready, s.Endpoints[j].Conditions.Serving = ptr.To(false), ptr.To(false)
			}
			return withoutSize(review(fmt.Sprintf("slice-%d", i), metav1.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}, "endpointslices", "", s, old))
		}},
	}
	st := reviewStats{Distinct: map[string]int{}}
	order := rand.New(rand.NewPCG(1, 2))
	for _, k := range kinds {
		var b strings.Builder
		for _, i := range order.Perm(k.pool) {
			r, err := k.build(i, k.pool)
			if err != nil {
				return st, fmt.Errorf("%s review: %w", k.name, err)
			}
			b.Write(r)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, k.name+".jsonl"), []byte(b.String()), 0o600); err != nil {
			return st, fmt.Errorf("write the %s reviews: %w", k.name, err)
		}
		st.Distinct[k.name] = k.pool
		st.Bytes += b.Len()
		if k.name == "node" {
			st.NodeBytes = nodeBytes / k.pool
		}
	}
	return st, nil
}

// withoutSize drops the size of the old object that review also returns.
func withoutSize(b []byte, _ int, err error) ([]byte, error) { return b, err }
