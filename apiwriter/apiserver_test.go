package apiwriter

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

// TestVerdictPatchOnRealAPIServer checks verdictPatch against the semantics
// only a real apiserver has: the nodes/status subresource stores the
// annotation and the condition together, a failed JSON-patch test rejects the
// whole patch. The case it exists for is a dying node, which the node
// lifecycle controller taints and its kubelet (or the controller) updates
// at about the moment the zone judges it: those writes must not cost the
// verdict a conflict and a second write.
func TestVerdictPatchOnRealAPIServer(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := t.Context()
	nodes := c.Client().CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	verdict := func(s zone.State, term uint64) (string, zone.Annotation) {
		a := zone.Annotation{State: s, Zone: "zone-a", Term: term, Leader: "node-1", At: at.Add(time.Duration(term) * time.Second), Pros: 2, Members: 3}
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), a
	}
	patch := func(read *corev1.Node, value string, a zone.Annotation) error {
		cur, had := read.Annotations[zone.AnnotationKey]
		p, err := verdictPatch(wrap.Node(read), cur, had, value, a)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodes.Patch(ctx, "n1", types.JSONPatchType, p, metav1.PatchOptions{FieldManager: "edgequorum"}, "status")
		return err
	}
	shows := func(want zone.Annotation, wantValue string) {
		t.Helper()
		got := getNode(ctx, t, c.Client())
		cond, _ := corecond.FindCondition(got.Status.Conditions)
		if got.Annotations[zone.AnnotationKey] != wantValue || cond == nil || !corecond.SameCondition(*cond, corecond.Condition(want, nil)) {
			t.Fatalf("node shows annotation %q, condition %+v; want %q and the condition for it", got.Annotations[zone.AnnotationKey], cond, wantValue)
		}
	}

	// First verdict: read, the controller taints the node, then we write.
	healthy, h := verdict(zone.Healthy, 1)
	read := getNode(ctx, t, c.Client())
	taintNode(ctx, t, c.Client(), "test.edgequorum.io/first")
	if err := patch(read, healthy, h); err == nil {
		t.Fatal("first verdict over a stale resourceVersion was written (a JSON patch cannot test absence, so it must test the resourceVersion)")
	}
	// Read again and write, as the writer's retry does; the controller in the
	// cluster may write the node meanwhile too.
	poll.Until(t, time.Minute, "the first verdict written", func() (bool, string) {
		err := patch(getNode(ctx, t, c.Client()), healthy, h)
		return err == nil, fmt.Sprint(err)
	})
	shows(h, healthy)

	// A later verdict: the node's spec and its other conditions change
	// between our read and our write.
	unhealthy, u := verdict(zone.Unhealthy, 2)
	read = getNode(ctx, t, c.Client())
	taintNode(ctx, t, c.Client(), "test.edgequorum.io/second")
	addCondition(ctx, t, c.Client(), "TestCondition")
	if err := patch(read, unhealthy, u); err != nil {
		t.Fatalf("verdict after unrelated node writes: %v (want it written at once)", err)
	}
	shows(u, unhealthy)
	got := getNode(ctx, t, c.Client())
	if !hasTaint(got, "test.edgequorum.io/first") || !hasTaint(got, "test.edgequorum.io/second") || !hasCondition(got, "TestCondition") {
		t.Fatalf("after the write: taints %v, conditions %v; want both taints and the other condition kept", got.Spec.Taints, got.Status.Conditions)
	}

	// The annotation stands but the condition was edited: the condition
	// alone is written back.
	read = getNode(ctx, t, c.Client())
	if err := patch(read, "", u); err != nil {
		t.Fatalf("condition alone: %v", err)
	}
	shows(u, unhealthy)

	// Someone else writes the annotation between our read and our write.
	read = getNode(ctx, t, c.Client())
	theirs, th := verdict(zone.Healthy, 7)
	if err := patch(read, theirs, th); err != nil {
		t.Fatal(err)
	}
	if err := patch(read, healthy, h); err == nil {
		t.Fatal("a verdict judged against a stale annotation was written")
	}
	shows(th, theirs)
}

// addCondition stands in for a kubelet or node-problem-detector writing a
// condition of its own: a status update of the whole object.
func addCondition(ctx context.Context, t *testing.T, client kubernetes.Interface, typ corev1.NodeConditionType) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := getNode(ctx, t, client)
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionTrue})
		_, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasCondition(n *corev1.Node, typ corev1.NodeConditionType) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}

func getNode(ctx context.Context, t *testing.T, client kubernetes.Interface) *corev1.Node {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// taintNode stands in for the node lifecycle controller's taint write: an
// update of the whole object. Its own keys, because the real controller in
// the cluster manages the node.kubernetes.io ones and may write the node too.
func taintNode(ctx context.Context, t *testing.T, client kubernetes.Interface, key string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := getNode(ctx, t, client)
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute})
		_, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == key {
			return true
		}
	}
	return false
}

// TestForgedTermsOnRealAPIServer: a verdict and a zone Lease written under
// term 2^64-1 (a stolen credential, or a hand edit) do not stop the honest
// leader on a real apiserver: confirmed by its quorum after reading them, it
// overwrites both. Before, both fenced every leader out for good.
func TestForgedTermsOnRealAPIServer(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx := t.Context()
	client := c.Client()
	forged, err := json.Marshal(zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: math.MaxUint64, Leader: "intruder"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Annotations: map[string]string{zone.AnnotationKey: string(forged)}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: zone.DefaultLeaseNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: zone.LeaseName("zone-a"),
			Annotations: map[string]string{zone.LeaseTermAnnotation: strconv.FormatUint(math.MaxUint64, 10)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("intruder"), LeaseDurationSeconds: ptr.To[int32](1 << 30),
			RenewTime: &metav1.MicroTime{Time: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	fence := &fakeFence{}
	fence.term.Store(3)
	cfg := DefaultConfig()
	cfg.Zone, cfg.Node, cfg.NodeKey = "zone-a", "node-1", testNodeKey
	narrow, err := kubeclient.New(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(cfg, narrow, fence, fixedMembers(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RenewLease(ctx); err != nil {
		t.Fatalf("renewing the zone Lease over term 2^64-1: %v", err)
	}
	l, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim := zonek8s.LeaseClaimOf(l); claim.Holder != "node-1" || claim.Term != 3 ||
		!claim.Verify(l.Annotations[zone.LeaseSignatureAnnotation], testNodeKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("zone Lease after renewal: %+v, want node-1's, term 3, signed", claim)
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()
	w.Verdicts(3, []zone.Verdict{{Node: "n1", State: zone.Healthy, Term: 3, Leader: "node-1", DecidedAt: time.Now()}}, false)
	poll.Until(t, time.Minute, "the honest verdict written over term 2^64-1", func() (bool, string) {
		raw := getNode(ctx, t, client).Annotations[zone.AnnotationKey]
		a, err := zone.ParseAnnotation(raw)
		return err == nil && a.Term == 3 && a.Signer == "node-1", raw
	})
}
