package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

const (
	zoneSize = 50
	term     = 7
	// pool is how many distinct reviews of each kind are sent round-robin.
	pool           = 100
	nodeController = "system:serviceaccount:kube-system:node-controller"
)

// cluster is what the webhook's caches hold: every node Unknown after a cut,
// vouched by its zone's fresh signed Lease and verdict, and by its peers'
// signed evidence that they reach it.
type cluster struct {
	nodes []*corev1.Node
	pods  []*corev1.Pod
	objs  []runtime.Object
	lost  time.Time
}

func nodeName(i int) string { return fmt.Sprintf("edge-%05d", i) }
func zoneName(i int) string { return fmt.Sprintf("zone-%03d", i/zoneSize) }
func leaderOf(i int) int    { return i / zoneSize * zoneSize }
func podName(i int) string  { return fmt.Sprintf("app-%06d", i) }
func key(node string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(node))
	return ed25519.NewKeyFromSeed(seed[:])
}

// zoneEvidence is the quorum's evidence in the Lease of the zone whose first
// node is first: every member signs that it reaches every other, since every
// node is Unknown to the cloud while its zone's Lease is fresh. It is the
// webhook's most expensive case: a majority of attestations to count for
// every review.
func zoneEvidence(first, nodes int, at time.Time) string {
	var members []string
	for j := first; j < min(first+zoneSize, nodes); j++ {
		members = append(members, nodeName(j))
	}
	atts := make([]zone.Attestation, 0, len(members))
	for _, signer := range members {
		a := zone.Attestation{Zone: zoneName(first), Signer: signer, At: at}
		for _, m := range members {
			if m != signer {
				a.Reach = append(a.Reach, m)
			}
		}
		a.Sign(key(signer))
		atts = append(atts, a)
	}
	return zone.FormatEvidence(atts)
}

func buildCluster(nodes, pods int) *cluster {
	now := time.Now()
	c := &cluster{lost: now.Add(-time.Minute)}
	leaseNS := zone.DefaultLeaseNamespace
	for i := range nodes {
		name, z, leader := nodeName(i), zoneName(i), nodeName(leaderOf(i))
		a := zone.Annotation{State: zone.Healthy, Zone: z, Term: term, Leader: leader, At: c.lost, Pros: zoneSize - 1, Members: zoneSize}
		a.Sign(name, leader, key(leader))
		verdict, _ := json.Marshal(a)
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
				Labels: map[string]string{zone.DefaultZoneLabel: z, corev1.LabelHostname: name},
				Annotations: map[string]string{
					zone.NodeKeyAnnotation: zone.EncodeNodeKey(key(name).Public().(ed25519.PublicKey)),
					zone.AnnotationKey:     string(verdict),
				}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{
				{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
				{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now}},
			}},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
					Reason: "NodeStatusUnknown", LastTransitionTime: metav1.NewTime(c.lost), LastHeartbeatTime: metav1.NewTime(c.lost)}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}},
			},
		}
		c.nodes = append(c.nodes, n)
		c.objs = append(c.objs, n, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: admission.NodeLeaseNamespace, Name: name},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime: &metav1.MicroTime{Time: c.lost.Add(-30 * time.Second)}},
		})
		if i == leaderOf(i) {
			l := &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: leaseNS, Name: zone.LeaseName(z),
					Labels:      map[string]string{zonek8s.ZoneLabel: z},
					Annotations: map[string]string{zone.LeaseTermAnnotation: strconv.Itoa(term)}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600),
					RenewTime: &metav1.MicroTime{Time: now.Truncate(time.Microsecond)}},
			}
			l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(key(name))
			l.Annotations[zone.LeaseEvidenceAnnotation] = zoneEvidence(i, nodes, now)
			c.objs = append(c.objs, l)
		}
	}
	for i := range pods {
		name := podName(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
				Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%pool)}},
			Spec: corev1.PodSpec{NodeName: nodeName(i % nodes),
				Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.200.%d.%d", i>>8&255, i&255),
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.lost.Add(-time.Hour))},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(c.lost.Add(-time.Hour))},
				}},
		}
		c.pods = append(c.pods, p)
		c.objs = append(c.objs, p)
	}
	return c
}

func runServer(nodes, pods int, dir, profile string) error {
	if dir == "" {
		return fmt.Errorf("-serve needs -dir")
	}
	c := buildCluster(nodes, pods)
	client := fake.NewClientset(c.objs...)
	if err := writeReviews(dir, c); err != nil {
		return err
	}
	c = nil
	heapBefore := liveHeapMiB()
	fakeRSS, _ := rssMiB(os.Getpid())

	certs, err := webhookcerts.Generate(webhookcerts.Options{Service: "edgequorum-webhook", Namespace: "edgequorum-webhook",
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour})
	if err != nil {
		return err
	}
	if err := certs.WriteFiles(dir, true); err != nil {
		return err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, certs.CACert, 0o600); err != nil {
		return err
	}
	cfg := admission.DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, webhookcerts.CertFile), filepath.Join(dir, webhookcerts.KeyFile)
	cfg.Repair = false
	cfg.ShutdownDelay = 0 // nothing routes reviews here after the run
	cfg.MaxZoneLeaseDuration = time.Hour
	// The webhook logs every change it makes at Info, as deployed; the
	// encoding is part of its cost, the disk is not.
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	w, err := admission.New(cfg, client)
	if err != nil {
		return err
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	for !w.Ready() {
		select {
		case err := <-errc:
			return fmt.Errorf("webhook stopped before its caches synced: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	synced := time.Since(start)
	cacheHeap := liveHeapMiB() - heapBefore
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	line, err := json.Marshal(ready{Addr: cfg.Listener.Addr().String(), CAFile: caFile, SyncSeconds: synced.Seconds(),
		FakeAPIRSSMiB: fakeRSS, CacheHeapMiB: cacheHeap})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	// Serve until the driver, our parent, closes our stdin or exits.
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	return <-errc
}

// liveHeapMiB is the heap in use after a full collection.
func liveHeapMiB() float64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// writeReviews writes pool reviews of each kind, one JSON AdmissionReview per
// line, into dir/<kind>.jsonl.
func writeReviews(dir string, c *cluster) error {
	review := func(uid string, kind metav1.GroupVersionKind, resource, sub string, obj, old any) ([]byte, error) {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		req := &admissionv1.AdmissionRequest{
			UID: types.UID(uid), Kind: kind, Operation: admissionv1.Update, SubResource: sub,
			Resource: metav1.GroupVersionResource{Group: kind.Group, Version: kind.Version, Resource: resource},
			UserInfo: authenticationv1.UserInfo{Username: nodeController},
			Object:   runtime.RawExtension{Raw: raw},
		}
		if old != nil {
			if req.OldObject.Raw, err = json.Marshal(old); err != nil {
				return nil, err
			}
		}
		return json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	}
	kinds := map[string]func(i int) ([]byte, error){
		"node": func(i int) ([]byte, error) {
			n := c.nodes[(i*zoneSize+1)%len(c.nodes)]
			return review(fmt.Sprintf("node-%d", i), metav1.GroupVersionKind{Version: "v1", Kind: "Node"}, "nodes", "", n, n)
		},
		"podstatus": func(i int) ([]byte, error) {
			old := c.pods[(i*97)%len(c.pods)]
			p := old.DeepCopy()
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.Conditions[0].LastTransitionTime = metav1.Now()
			return review(fmt.Sprintf("pod-%d", i), metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, "pods", "status", p, old)
		},
		"endpointslice": func(i int) ([]byte, error) {
			s := &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("app-%d-x", i), ResourceVersion: "1"},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080)}},
			}
			for j := range 10 {
				p := c.pods[(i+j*pool)%len(c.pods)]
				s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
					Addresses: []string{p.Status.PodIP}, NodeName: ptr.To(p.Spec.NodeName),
					TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(false)},
				})
			}
			return review(fmt.Sprintf("slice-%d", i), metav1.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}, "endpointslices", "", s, s)
		},
	}
	for kind, build := range kinds {
		var b strings.Builder
		for i := range pool {
			r, err := build(i)
			if err != nil {
				return fmt.Errorf("%s review: %w", kind, err)
			}
			b.Write(r)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, kind+".jsonl"), []byte(b.String()), 0o600); err != nil {
			return err
		}
	}
	return nil
}
