package admission

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// The cluster every handler test runs against, as of testNow. Nodes went
// Unknown at nodeLost.
//
//	zone-a: lease fresh.  edge-a1, edge-a2 healthy; edge-a3 unhealthy;
//	        edge-a4 healthy but Ready=True. Every member attests in the
//	        zone Lease that it reaches every other.
//	zone-b: cut off 20 min ago (zone and kubelet leases all stale).
//	        edge-b1 healthy; edge-b3 healthy, untainted, no pods.
//	zone-c: zone lease stale but edge-c2 still renews its kubelet lease.
//	        edge-c1 healthy.
//	cloud-1: no zone, no verdict.
var (
	testNow  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nodeLost = time.Date(2026, 3, 1, 11, 58, 0, 0, time.UTC)
)

// testLeaders hold the test zones' Leases and sign their verdicts.
var testLeaders = map[string]string{"zone-a": "edge-a2", "zone-b": "edge-b1", "zone-c": "edge-c1", "z": "n1"}

// testTerm is the Raft term the test zones' leaders hold their Leases under.
const testTerm = 7

// testKey is the node key of the named test node.
func testKey(node string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(node))
	return ed25519.NewKeyFromSeed(seed[:])
}

// signedVerdict is a as zone leader writes it on node: signed by the zone's
// test leader, if it has one.
func signedVerdict(node string, a zone.Annotation) string {
	if l, ok := testLeaders[a.Zone]; ok {
		a.Sign(node, l, testKey(l))
	}
	b, _ := json.Marshal(a)
	return string(b)
}

func verdictJSON(node string, state zone.State, zoneName string) string {
	return signedVerdict(node, zone.Annotation{State: state, Zone: zoneName, Term: testTerm, Leader: testLeaders[zoneName],
		At: nodeLost, Pros: 2, Members: 3})
}

// testNode is a node in zoneName (none when empty) with a verdict (none when
// state is empty) and the given Ready status, which changed at nodeLost.
func testNode(name, zoneName string, state zone.State, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Labels: map[string]string{"kubernetes.io/hostname": name},
			Annotations: map[string]string{zone.NodeKeyAnnotation: zone.EncodeNodeKey(testKey(name).Public().(ed25519.PublicKey))}},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(nodeLost),
		}}},
	}
	if zoneName != "" {
		n.Labels[zone.DefaultZoneLabel] = zoneName
	}
	if state != "" {
		n.Annotations[zone.AnnotationKey] = verdictJSON(name, state, zoneName)
	}
	return n
}

// testLeaseDuration is every test Lease's leaseDurationSeconds: a few of the
// agents' renewals, so a zone Lease renewed less than 20 s ago is fresh.
const testLeaseDuration = 20

// testLease is a Lease renewed at renew, lasting testLeaseDuration seconds. A
// zone Lease (in the agents' namespace) is held by the zone's test leader
// under testTerm and signed.
func testLease(namespace, name string, renew time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &name, RenewTime: &metav1.MicroTime{Time: renew},
			LeaseDurationSeconds: ptr.To[int32](testLeaseDuration)},
	}
	if namespace != zone.DefaultLeaseNamespace {
		return l
	}
	for z, leader := range testLeaders {
		if zone.LeaseName(z) == name {
			l.Labels = map[string]string{zonek8s.ZoneLabel: z}
			l.Annotations = map[string]string{zone.LeaseTermAnnotation: strconv.Itoa(testTerm),
				zone.LeaseEvidenceAnnotation: testEvidence(z, renew)}
			l.Spec.HolderIdentity = ptr.To(leader)
		}
	}
	return signLease(l)
}

// testMembers are the nodes that may be members of each test zone: every one
// attests in its zone Lease that it reaches every other, as an honest zone
// whose members all reach each other would. One that is no member in a test
// is not counted.
var testMembers = map[string][]string{
	"zone-a": {"edge-a1", "edge-a2", "edge-a3", "edge-a4", "edge-a5", "edge-a6", "edge-a7", "edge-a8"},
	"zone-b": {"edge-b1", "edge-b2", "edge-b3"},
	"zone-c": {"edge-c1", "edge-c2"},
	"z":      {"n1", "n2", "n3", "n4", "n5", "n6"},
}

// testEvidence is the evidence annotation of zone z's Lease renewed at at:
// every test member attests that it reaches every other, but those in down,
// on which every probe of its fails.
func testEvidence(z string, at time.Time, down ...string) string {
	var atts []zone.Attestation
	for _, signer := range testMembers[z] {
		a := zone.Attestation{Zone: z, Signer: signer, At: at}
		for _, n := range testMembers[z] {
			switch {
			case n == signer:
			case slices.Contains(down, n):
				a.Down = append(a.Down, n)
			default:
				a.Reach = append(a.Reach, n)
			}
		}
		a.Sign(testKey(signer))
		atts = append(atts, a)
	}
	return zone.FormatEvidence(atts)
}

// confirmDown has every test member of l's zone attest, in its evidence, that
// every probe fails on the nodes of down, as they would on dead nodes.
func confirmDown(l *coordinationv1.Lease, down ...string) *coordinationv1.Lease {
	l.Annotations[zone.LeaseEvidenceAnnotation] = testEvidence(l.Labels[zonek8s.ZoneLabel], l.Spec.RenewTime.Time, down...)
	return l
}

// signLease signs l as its holder would, after a test changed it.
func signLease(l *coordinationv1.Lease) *coordinationv1.Lease {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(testKey(ptr.Deref(l.Spec.HolderIdentity, "")))
	return l
}

// withZoneLeaseDuration gives every zone Lease among objs a duration of d, so
// tests that run the fake clock far ahead keep their fresh zones fresh (with
// MaxZoneLeaseDuration raised to match). Stale zone Leases stay stale only if
// renewed longer than d ago.
func withZoneLeaseDuration(d time.Duration, objs ...runtime.Object) []runtime.Object {
	for _, o := range objs {
		if l, ok := o.(*coordinationv1.Lease); ok && l.Namespace == zone.DefaultLeaseNamespace {
			l.Spec.LeaseDurationSeconds = ptr.To(int32(d / time.Second))
			signLease(l)
		}
	}
	return objs
}

// testPod is a pod on node whose Ready condition is status since since.
func testPod(name, node string, ready corev1.ConditionStatus, since time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(since)},
		}},
	}
}

var (
	unreachableNoExecute  = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	unreachableNoSchedule = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
)

// testCluster is the state described above.
func testCluster() []runtime.Object {
	ns := zone.DefaultLeaseNamespace
	markedAt := nodeLost.Add(time.Second) // the node lifecycle controller's MarkPodsNotReady
	objs := []runtime.Object{
		testNode("edge-a1", "zone-a", zone.Healthy, corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),
		testNode("edge-a2", "zone-a", zone.Healthy, corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),
		testNode("edge-a3", "zone-a", zone.Unhealthy, corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),
		testNode("edge-a4", "zone-a", zone.Healthy, corev1.ConditionTrue),
		testNode("edge-b1", "zone-b", zone.Healthy, corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),
		testNode("edge-b3", "zone-b", zone.Healthy, corev1.ConditionUnknown),
		testNode("edge-c1", "zone-c", zone.Healthy, corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),
		testNode("edge-c2", "zone-c", zone.Healthy, corev1.ConditionTrue),
		testNode("cloud-1", "", "", corev1.ConditionUnknown, unreachableNoSchedule, unreachableNoExecute),

		testLease(ns, zone.LeaseName("zone-a"), testNow.Add(-5*time.Second)),
		testLease(ns, zone.LeaseName("zone-b"), testNow.Add(-20*time.Minute)),
		testLease(ns, zone.LeaseName("zone-c"), testNow.Add(-10*time.Minute)),
		testLease(NodeLeaseNamespace, "edge-a1", nodeLost.Add(-40*time.Second)),
		testLease(NodeLeaseNamespace, "edge-a4", testNow.Add(-3*time.Second)),
		testLease(NodeLeaseNamespace, "edge-b1", testNow.Add(-20*time.Minute-30*time.Second)),
		testLease(NodeLeaseNamespace, "edge-b3", testNow.Add(-20*time.Minute-30*time.Second)),
		testLease(NodeLeaseNamespace, "edge-c1", nodeLost.Add(-40*time.Second)),
		testLease(NodeLeaseNamespace, "edge-c2", testNow.Add(-3*time.Second)),

		testPod("web-a1-1", "edge-a1", corev1.ConditionFalse, markedAt),
		testPod("web-a1-2", "edge-a1", corev1.ConditionFalse, markedAt),
		testPod("web-a1-early", "edge-a1", corev1.ConditionFalse, nodeLost.Add(-10*time.Minute)),
		testPod("web-a1-slack", "edge-a1", corev1.ConditionFalse, nodeLost.Add(-3*time.Second)),
		testPod("web-a1-nil", "edge-a1", corev1.ConditionFalse, markedAt),
		testPod("web-a1-term", "edge-a1", corev1.ConditionFalse, markedAt),
		testPod("web-a2-1", "edge-a2", corev1.ConditionFalse, markedAt),
		testPod("web-a3-1", "edge-a3", corev1.ConditionFalse, markedAt),
		testPod("web-a4-1", "edge-a4", corev1.ConditionFalse, markedAt),
		testPod("web-a4-2", "edge-a4", corev1.ConditionTrue, nodeLost.Add(-time.Hour)),
		testPod("web-a4-3", "edge-a4", corev1.ConditionTrue, nodeLost.Add(-time.Hour)),
		testPod("web-b1-1", "edge-b1", corev1.ConditionFalse, markedAt),
		testPod("web-c1-1", "edge-c1", corev1.ConditionFalse, markedAt),
		testPod("web-cloud-1", "cloud-1", corev1.ConditionFalse, markedAt),
		testPod("vm-1", "edge-a1", corev1.ConditionFalse, markedAt),
	}
	return objs
}

// testEnv is a running webhook over a fake clientset.
type testEnv struct {
	w      *Webhook
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	cfg    Config
	addr   string // the HTTPS listener
	caPool []byte // PEM of the CA that signed the serving certificate
	dir    string // where tls.crt and tls.key live
}

// startWebhook runs a webhook over objs (testCluster when nil) with the test
// defaults, after mod changed cfg, and waits until it is ready. It is stopped
// at the end of the test, and the test fails if Run returned an error.
func startWebhook(t *testing.T, mod func(*Config), objs ...runtime.Object) *testEnv {
	t.Helper()
	env := newWebhook(t, mod, objs...)
	env.start(t)
	return env
}

// start runs a webhook made by newWebhook on a loopback port and returns a
// function that stops it early; the test's cleanup stops it otherwise.
// Reactors on the fake clientset must be in place before: the fake does not
// guard them.
func (env *testEnv) start(t *testing.T) (stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.w.cfg.Listener = ln
	env.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return within 30s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	poll.UntilTrue(t, waitTimeout, "caches to sync", env.w.Ready)
	return stop
}

// newWebhook builds but does not run a webhook.
func newWebhook(t *testing.T, mod func(*Config), objs ...runtime.Object) *testEnv {
	t.Helper()
	if objs == nil {
		objs = testCluster()
	}
	dir := t.TempDir()
	bundle := writeTestCerts(t, dir)
	env := &testEnv{
		client: optimisticLeases(fake.NewClientset(objs...)),
		clock:  clocktesting.NewFakeClock(testNow),
		reg:    prometheus.NewRegistry(),
		caPool: bundle.CACert,
		dir:    dir,
	}
	cfg := DefaultConfig()
	cfg.TLSCertFile = filepath.Join(dir, webhookcerts.CertFile)
	cfg.TLSKeyFile = filepath.Join(dir, webhookcerts.KeyFile)
	cfg.Repair = false
	cfg.ShutdownDelay = 0
	cfg.Identity = "test"
	cfg.Clock = env.clock
	cfg.Registerer = env.reg
	cfg.MaxRequestBytes = 256 << 10
	if mod != nil {
		mod(&cfg)
	}
	env.cfg = cfg
	w, err := New(cfg, env.client)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.w = w
	return env
}

// optimisticLeases makes the fake clientset refuse a stale Lease write as an
// apiserver does: every Lease written gets a new resourceVersion, and an
// update that names another than the stored one is a Conflict. The fake's
// own tracker keeps whichever write comes last, so two replicas' Get-then-
// Update of the reads Lease could overwrite each other in a test, which a
// real apiserver never lets happen.
func optimisticLeases(c *fake.Clientset) *fake.Clientset {
	var (
		mu   sync.Mutex
		next int64
	)
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	c.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// Create and update actions are the same interface: tell them by verb.
		w, ok := a.(k8stesting.CreateAction)
		if !ok || (a.GetVerb() != "create" && a.GetVerb() != "update") {
			return false, nil, nil
		}
		l, ok := w.GetObject().(*coordinationv1.Lease)
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		l = l.DeepCopy()
		ns := a.GetNamespace()
		if a.GetVerb() == "update" {
			cur, err := c.Tracker().Get(gvr, ns, l.Name)
			if err != nil {
				return true, nil, err
			}
			stored := cur.(*coordinationv1.Lease).ResourceVersion
			if rv := l.ResourceVersion; rv != "" && rv != stored {
				return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name,
					fmt.Errorf("resourceVersion %s is not the stored %s", rv, stored))
			}
		}
		next++
		l.ResourceVersion = strconv.FormatInt(next, 10)
		var err error
		if a.GetVerb() == "create" {
			err = c.Tracker().Create(gvr, l, ns)
		} else {
			err = c.Tracker().Update(gvr, l, ns)
		}
		if err != nil {
			return true, nil, err
		}
		return true, l.DeepCopy(), nil
	})
	return c
}

func writeTestCerts(t *testing.T, dir string) *webhookcerts.Bundle {
	t.Helper()
	b, err := webhookcerts.Generate(webhookcerts.Options{
		Service: "edgequorum-webhook", Namespace: DefaultNamespace,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFiles(dir, true); err != nil {
		t.Fatal(err)
	}
	return b
}

// waitTimeout bounds every poll.UntilTrue of these tests: generous, since it
// only matters when a test fails.
const waitTimeout = 30 * time.Second

// post sends body to path on the webhook's handler and returns the recorder.
func (env *testEnv) post(t *testing.T, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	env.w.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec
}

// readFixture reads a testdata file. Verdicts on the objects in it are written
// unsigned, to stay readable; they are signed here by the zone's test leader,
// as the zone would have.
func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(zone.AnnotationKey)) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return b // a malformed fixture stays as it is
	}
	signFixtureVerdicts(t, doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// signFixtureVerdicts signs, in place, the verdict of every object in doc
// whose metadata names it and carries one.
func signFixtureVerdicts(t *testing.T, doc any) {
	switch v := doc.(type) {
	case []any:
		for _, e := range v {
			signFixtureVerdicts(t, e)
		}
	case map[string]any:
		if meta, ok := v["metadata"].(map[string]any); ok {
			name, _ := meta["name"].(string)
			ann, _ := meta["annotations"].(map[string]any)
			if raw, ok := ann[zone.AnnotationKey].(string); ok && name != "" {
				if a, err := zone.ParseAnnotation(raw); err == nil {
					ann[zone.AnnotationKey] = signedVerdict(name, a)
				}
			}
		}
		for _, e := range v {
			signFixtureVerdicts(t, e)
		}
	}
}

func counter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func httptestDo(env *testEnv, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	env.w.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}
