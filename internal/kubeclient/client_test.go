package kubeclient

import (
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// TestSchemeHoldsOnlyWhatTheAgentUses guards the reason the package exists:
// a type of a group the agent does not reach must not be registered.
func TestSchemeHoldsOnlyWhatTheAgentUses(t *testing.T) {
	for _, g := range []string{"", "coordination.k8s.io", "events.k8s.io", "authentication.k8s.io"} {
		if !Scheme.IsGroupRegistered(g) {
			t.Errorf("group %q not registered", g)
		}
	}
	for _, g := range []string{"apps", "batch", "admissionregistration.k8s.io", "rbac.authorization.k8s.io", "policy"} {
		if Scheme.IsGroupRegistered(g) {
			t.Errorf("group %q registered: the agent never reaches it", g)
		}
	}
	// Of the core group, Nodes alone, in the agent's own type.
	for _, kind := range []string{"Pod", "Service", "Event", "Secret"} {
		if gvk := CoreGroupVersion.WithKind(kind); Scheme.Recognizes(gvk) {
			t.Errorf("%s registered: the agent never reads it", gvk)
		}
	}
	if obj, err := Scheme.New(CoreGroupVersion.WithKind("Node")); err != nil {
		t.Errorf("Node not registered: %v", err)
	} else if _, ok := obj.(*Node); !ok {
		t.Errorf("Node registered as %T, want the agent's own", obj)
	}
}

// TestNodeDeepCopySharesNothing: the informer's cache hands out its own
// objects; a copy changed must leave the cached one as it was.
func TestNodeDeepCopySharesNothing(t *testing.T) {
	n := &Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "z"}}}
	n.Status.Conditions = []zonek8s.NodeCondition{{Type: NodeReady, Status: zonek8s.ConditionTrue}}
	n.Status.Addresses = []NodeAddress{{Type: NodeInternalIP, Address: "127.0.0.2"}}
	c := n.DeepCopyObject().(*Node)
	c.Labels["zone"] = "y"
	c.Status.Conditions[0].Status = zonek8s.ConditionFalse
	c.Status.Addresses[0].Address = "127.0.0.3"
	if n.Labels["zone"] != "z" || n.Status.Conditions[0].Status != zonek8s.ConditionTrue || n.Status.Addresses[0].Address != "127.0.0.2" {
		t.Errorf("changing a copy changed the original: %+v", n)
	}
	l := (&NodeList{Items: []Node{*n}}).DeepCopyObject().(*NodeList)
	l.Items[0].Status.Addresses[0].Address = "127.0.0.4"
	if n.Status.Addresses[0].Address != "127.0.0.2" {
		t.Errorf("changing a list's copy changed the original: %+v", n)
	}
}

func TestNewRefusesQPSWithoutBurst(t *testing.T) {
	_, err := New(&rest.Config{Host: "https://127.0.0.1:1", QPS: 5})
	if err == nil || !strings.Contains(err.Error(), "burst") {
		t.Fatalf("New with QPS and no burst: err = %v, want one naming the burst", err)
	}
}

// TestClientOnRealAPIServer exercises every call of Interface, and the
// informer, against a real kube-apiserver: what the fake clientset cannot
// show is that the narrow scheme encodes requests and decodes answers,
// watch events and errors as the full clientset does.
func TestClientOnRealAPIServer(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx := t.Context()
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 50, 100
	cl, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	admin := c.Client()
	for _, n := range []struct{ name, zone string }{{"kc-a", "z1"}, {"kc-b", "z2"}} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n.name, Labels: map[string]string{"zone": n.zone}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// What a kubelet publishes, read through the agent's slim Node.
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "kc-a", types.MergePatchType,
		[]byte(`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.9"}],"daemonEndpoints":{"kubeletEndpoint":{"Port":10350}},`+
			`"images":[{"names":["registry.example/app:1"],"sizeBytes":1}]}}`),
		metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	// Nodes: get, list by label, watch, patch (merge and JSON, status).
	n, err := cl.Nodes().Get(ctx, "kc-a", metav1.GetOptions{})
	if err != nil || n.Name != "kc-a" || n.Labels["zone"] != "z1" || n.UID == "" {
		t.Fatalf("Get kc-a = %v, %v", n, err)
	}
	if len(n.Status.Addresses) != 1 || n.Status.Addresses[0] != (NodeAddress{Type: NodeInternalIP, Address: "127.0.0.9"}) ||
		n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10350 {
		t.Fatalf("kc-a's status read as %+v, want its address and kubelet port", n.Status)
	}
	if _, err := cl.Nodes().Get(ctx, "kc-none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing Node: err = %v, want NotFound", err)
	}
	list, err := cl.Nodes().List(ctx, metav1.ListOptions{LabelSelector: "zone=z1"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != "kc-a" {
		t.Fatalf("List zone=z1 = %v, %v; want kc-a alone", list, err)
	}
	w, err := cl.Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: "zone=z1", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := cl.Nodes().Patch(ctx, "kc-a", types.MergePatchType, []byte(`{"metadata":{"annotations":{"k":"v1"}}}`),
		metav1.PatchOptions{FieldManager: "kubeclient-test"}); err != nil {
		t.Fatal(err)
	}
	// Other writers change kc-a too (the controller-manager's TTL
	// annotation): their MODIFIED events may come first, and are decoded
	// Nodes as well; the patch's own event must follow.
	for timeout := time.After(30 * time.Second); ; {
		select {
		case ev := <-w.ResultChan():
			got, ok := ev.Object.(*Node)
			if ev.Type != watch.Modified || !ok || got.Name != "kc-a" {
				t.Fatalf("watch event = %s %T %v, want kc-a MODIFIED", ev.Type, ev.Object, ev.Object)
			}
			if got.Annotations["k"] != "v1" {
				continue
			}
		case <-timeout:
			t.Fatal("no watch event for the patch within 30 s")
		}
		break
	}
	patched, err := cl.Nodes().Patch(ctx, "kc-a", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/status/conditions","value":[{"type":"Probe","status":"True","reason":"R","message":"m"}]}]`),
		metav1.PatchOptions{FieldManager: "kubeclient-test"}, "status")
	if err != nil || len(patched.Status.Conditions) != 1 || patched.Status.Conditions[0].Type != "Probe" {
		t.Fatalf("status patch = %v, %v", patched, err)
	}

	// The informer sees the selected Nodes only, and their changes, and
	// hands its handler each Node as the transform left it.
	seen := make(chan string, 16)
	tell := func(obj any) {
		if n, ok := obj.(*Node); ok && n.Annotations["transformed"] == "yes" {
			select {
			case seen <- n.Name:
			default: // a resync's repeat; the test has what it needs
			}
		}
	}
	inf, lister := NewNodeInformer(cl, "zone=z1", time.Minute,
		cache.ResourceEventHandlerFuncs{AddFunc: tell, UpdateFunc: func(_, obj any) { tell(obj) }},
		func(obj any) (any, error) {
			if n, ok := obj.(*Node); ok {
				n.Annotations = map[string]string{"transformed": "yes"}
			}
			return obj, nil
		})
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	all, err := lister.List(labels.Everything())
	if err != nil || len(all) != 1 || all[0].Name != "kc-a" {
		t.Fatalf("informer lists %v, %v; want kc-a alone", all, err)
	}
	if _, err := admin.CoreV1().Nodes().Patch(ctx, "kc-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"zone":"z1"}}}`),
		metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := lister.Get("kc-b"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("kc-b, relabelled into the zone, never reached the informer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for want := map[string]bool{"kc-a": true, "kc-b": true}; len(want) > 0; {
		select {
		case n := <-seen:
			delete(want, n)
		case <-time.After(30 * time.Second):
			t.Fatalf("the handler was never told of %v after the transform", want)
		}
	}

	// Leases: create, get, update with the version read, and a stale
	// update refused as a conflict.
	leases := cl.Leases("default")
	created, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kc-lease"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}, metav1.CreateOptions{FieldManager: "kubeclient-test"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := leases.Get(ctx, "kc-lease", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "a" {
		t.Fatalf("Get lease = %v, %v", got, err)
	}
	got.Spec.HolderIdentity = ptr.To("b")
	if _, err := leases.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	created.Spec.HolderIdentity = ptr.To("c")
	if _, err := leases.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update from a stale version: err = %v, want Conflict", err)
	}

	// Events and who the credentials are.
	ev, err := cl.Events("default").Create(ctx, &Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kc-"}, EventTime: metav1.NowMicro(),
		ReportingController: "edgequorum.io/test", ReportingInstance: "kc", Action: "Test", Reason: "Test",
		Regarding: ObjectReference{Kind: "Node", Name: "kc-a", APIVersion: "v1", UID: n.UID}, Type: EventTypeNormal, Note: "n",
	}, metav1.CreateOptions{})
	if err != nil || ev.Name == "" {
		t.Fatalf("Create event = %v, %v", ev, err)
	}
	// As a full client reads it: every field the agent sets, where
	// events.k8s.io/v1 has it.
	full, err := admin.EventsV1().Events("default").Get(ctx, ev.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if full.Regarding != (corev1.ObjectReference{Kind: "Node", Name: "kc-a", APIVersion: "v1", UID: n.UID}) ||
		full.Reason != "Test" || full.Action != "Test" || full.Note != "n" || full.Type != corev1.EventTypeNormal ||
		full.ReportingController != "edgequorum.io/test" || full.ReportingInstance != "kc" || full.EventTime.IsZero() {
		t.Fatalf("the Event as recorded: %+v", full)
	}
	review, err := cl.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username == "" {
		t.Fatalf("SelfSubjectReview = %v, %v", review, err)
	}
}
