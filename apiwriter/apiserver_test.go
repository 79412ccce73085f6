package apiwriter

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// TestVerdictPatchOnRealAPIServer checks verdictPatch against the semantics
// only a real apiserver has: a stale resourceVersion in a merge patch is a
// conflict, a failed JSON-patch test rejects the whole patch. The case it
// exists for is a dying node, which the node lifecycle controller taints at
// about the moment the zone judges it: that write must not cost the verdict
// a conflict and a second write.
func TestVerdictPatchOnRealAPIServer(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := t.Context()
	nodes := c.Client().CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := func(rv, cur string, had bool, value string) error {
		pt, p, err := verdictPatch(rv, cur, had, value)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nodes.Patch(ctx, "n1", pt, p, metav1.PatchOptions{FieldManager: "edgequorum"})
		return err
	}

	// First verdict: read, the controller taints the node, then we write.
	read := getNode(ctx, t, c.Client())
	taintNode(ctx, t, c.Client(), "test.edgequorum.io/first")
	if err := patch(read.ResourceVersion, "", false, `{"state":"healthy"}`); !apierrors.IsConflict(err) {
		t.Fatalf("first verdict over a stale resourceVersion: err = %v, want a conflict (a JSON patch cannot test absence)", err)
	}
	// Read again and write, as the writer's retry does; the controller in the
	// cluster may write the node meanwhile too.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return patch(getNode(ctx, t, c.Client()).ResourceVersion, "", false, `{"state":"healthy"}`)
	})
	if err != nil {
		t.Fatalf("first verdict: %v", err)
	}

	// A later verdict: the node changes elsewhere between our read and our write.
	read = getNode(ctx, t, c.Client())
	taintNode(ctx, t, c.Client(), "test.edgequorum.io/second")
	if err := patch(read.ResourceVersion, read.Annotations[zone.AnnotationKey], true, `{"state":"unhealthy"}`); err != nil {
		t.Fatalf("verdict after an unrelated node write: %v (want it written at once)", err)
	}
	got := getNode(ctx, t, c.Client())
	if got.Annotations[zone.AnnotationKey] != `{"state":"unhealthy"}` || !hasTaint(got, "test.edgequorum.io/first") || !hasTaint(got, "test.edgequorum.io/second") {
		t.Fatalf("after the write: annotation %q, taints %v; want the new verdict and both taints kept", got.Annotations[zone.AnnotationKey], got.Spec.Taints)
	}

	// Someone else writes the annotation between our read and our write.
	read = getNode(ctx, t, c.Client())
	if err := patch("", `{"state":"unhealthy"}`, true, `{"state":"theirs"}`); err != nil {
		t.Fatal(err)
	}
	err = patch(read.ResourceVersion, read.Annotations[zone.AnnotationKey], true, `{"state":"healthy"}`)
	if err == nil {
		t.Fatal("a verdict judged against a stale annotation was written")
	}
	if got := getNode(ctx, t, c.Client()).Annotations[zone.AnnotationKey]; got != `{"state":"theirs"}` {
		t.Errorf("rejected write changed the annotation to %q", got)
	}
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
	w, err := New(cfg, client, fence, fixedMembers(3))
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
	if claim := LeaseClaimOf(l); claim.Holder != "node-1" || claim.Term != 3 ||
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
