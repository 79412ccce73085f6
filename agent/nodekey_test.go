package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/edgequorum/edgequorum/deploy"
	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

func newPublicKey(t *testing.T) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// logLines records what registerNodeKey logs, one message per call.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) log(msg string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprint(append([]any{msg}, args...)...))
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// nodeWrites lists the verbs of the write actions on Nodes a fake clientset saw.
func nodeWrites(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "nodes" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}

func fakeNode(name string, annotations map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}
}

func TestRegisterNodeKeyWritesOnlyWhatDiffers(t *testing.T) {
	pub := newPublicKey(t)
	want := zone.EncodeNodeKey(pub)
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		writes      []string
		logged      string
	}{
		{"missing", map[string]string{"example.com/other": "kept"}, []string{"patch"}, "registered this node's key"},
		{"equal", map[string]string{"example.com/other": "kept", zone.NodeKeyAnnotation: want}, nil, "already registered"},
		// The data dir was wiped: the Node holds the old key.
		{"different", map[string]string{"example.com/other": "kept", zone.NodeKeyAnnotation: zone.EncodeNodeKey(newPublicKey(t))},
			[]string{"patch"}, "replaced the key registered for this node"},
		{"unparsable", map[string]string{"example.com/other": "kept", zone.NodeKeyAnnotation: "garbage"}, []string{"patch"}, "replaced"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cs := fake.NewClientset(fakeNode("edge-1", tt.annotations))
			var logs logLines
			if err := registerNodeKey(context.Background(), wrap.Clientset(cs), "edge-1", pub, logs.log); err != nil {
				t.Fatal(err)
			}
			if got := nodeWrites(cs); !slices.Equal(got, tt.writes) {
				t.Errorf("writes %v, want %v", got, tt.writes)
			}
			for _, a := range cs.Actions() {
				if p, ok := a.(k8stesting.PatchAction); ok && p.GetPatchType() != types.MergePatchType {
					t.Errorf("patch type %s, want a JSON merge patch", p.GetPatchType())
				}
			}
			n, err := cs.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := n.Annotations[zone.NodeKeyAnnotation]; got != want {
				t.Errorf("annotation %q, want %q", got, want)
			}
			if n.Annotations["example.com/other"] != "kept" {
				t.Errorf("other annotations changed: %v", n.Annotations)
			}
			if logs.count(tt.logged) != 1 {
				t.Errorf("log lacks %q:\n%s", tt.logged, logs.String())
			}
		})
	}
}

// TestRegisterNodeKeyRetriesUntilReachable: an agent that starts while the
// apiserver cannot be reached registers its key once it can.
func TestRegisterNodeKeyRetriesUntilReachable(t *testing.T) {
	cs := fake.NewClientset(fakeNode("edge-1", nil))
	var fails atomic.Int32
	unreachable := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails.Add(1) <= 2 {
			return true, nil, unreachable
		}
		return false, nil, nil
	})
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails.Add(1) <= 4 {
			return true, nil, apierrors.NewServiceUnavailable("apiserver is shutting down")
		}
		return false, nil, nil
	})
	var logs logLines
	pub := newPublicKey(t)
	if err := registerNodeKeyPaced(context.Background(), wrap.Clientset(cs), "edge-1", pub, logs.log, time.Millisecond, 4*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// Two failed gets, then a get and a failed patch, then both succeed.
	if got := logs.count("retrying"); got != 3 {
		t.Errorf("%d retries logged, want 3:\n%s", got, logs.String())
	}
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Annotations[zone.NodeKeyAnnotation], zone.EncodeNodeKey(pub); got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}
}

// TestRegisterNodeKeyStopsWithContext: the retries end with ctx, and the error
// names the node, the annotation and the last failure.
func TestRegisterNodeKeyStopsWithContext(t *testing.T) {
	cs := fake.NewClientset(fakeNode("edge-1", nil))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "edge-1", errors.New("denied by policy"))
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attempts := 0
	log := func(msg string, args ...any) {
		if strings.Contains(msg, "refused") {
			if attempts++; attempts == 3 {
				cancel()
			}
		}
	}
	err := registerNodeKeyPaced(ctx, wrap.Clientset(cs), "edge-1", newPublicKey(t), log, time.Millisecond, time.Millisecond)
	if err == nil {
		t.Fatal("registered although every patch was refused")
	}
	if !apierrors.IsForbidden(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v wraps neither the refusal nor the context's end", err)
	}
	for _, want := range []string{"edge-1", zone.NodeKeyAnnotation, "3 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestRegisterNodeKeyGivesUpOnInvalid: a request the apiserver rejects as
// malformed would be rejected forever; there is no point in retrying.
func TestRegisterNodeKeyGivesUpOnInvalid(t *testing.T) {
	cs := fake.NewClientset(fakeNode("edge-1", nil))
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "edge-1",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations"), "x", "bad")})
	})
	var logs logLines
	err := registerNodeKeyPaced(context.Background(), wrap.Clientset(cs), "edge-1", newPublicKey(t), logs.log, time.Hour, time.Hour)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "edge-1") || !strings.Contains(err.Error(), zone.NodeKeyAnnotation) {
		t.Fatalf("err %v, want Invalid naming node and annotation", err)
	}
	if got := nodeWrites(cs); len(got) != 1 {
		t.Errorf("writes %v, want one attempt", got)
	}
}

func TestRegisterNodeKeyRefusesAShortKey(t *testing.T) {
	cs := fake.NewClientset(fakeNode("edge-1", nil))
	err := registerNodeKey(context.Background(), wrap.Clientset(cs), "edge-1", ed25519.PublicKey{1, 2, 3}, func(string, ...any) {})
	if err == nil || !strings.Contains(err.Error(), "edge-1") {
		t.Fatalf("err %v, want one naming the node", err)
	}
	if len(cs.Actions()) != 0 {
		t.Errorf("made requests for a bad key: %v", cs.Actions())
	}
}

// TestCandidatesCarryRegisteredKeys: a candidate's key is the one on its Node;
// a Node with no key or one that does not parse has none.
func TestCandidatesCarryRegisteredKeys(t *testing.T) {
	pub := newPublicKey(t)
	node := func(name, ip string, annotations map[string]string) *corev1.Node {
		n := fakeNode(name, annotations)
		n.Labels = map[string]string{zone.DefaultZoneLabel: testZone}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		return n
	}
	cs := fake.NewClientset(
		node("edge-1", "127.0.0.1", map[string]string{zone.NodeKeyAnnotation: zone.EncodeNodeKey(pub)}),
		node("edge-2", "127.0.0.2", nil),
		node("edge-3", "127.0.0.3", map[string]string{zone.NodeKeyAnnotation: "ed25519:bm90IGEga2V5"}),
		node("edge-4", "127.0.0.4", map[string]string{zone.NodeKeyAnnotation: "rsa:AAAA"}),
	)
	m := newNodeMembers(wrap.Clientset(cs), zone.DefaultZoneLabel, testZone, 9470)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx) }()
	defer func() { cancel(); <-done }()
	var got []ed25519.PublicKey
	poll.Until(t, 10*time.Second, "the member list to sync", func() (bool, string) {
		cands, ok := m.Candidates()
		if !ok {
			return false, "not synced"
		}
		got = got[:0]
		for _, c := range cands {
			got = append(got, c.PublicKey)
		}
		return len(cands) == 4, fmt.Sprintf("%d candidates", len(cands))
	})
	if !pub.Equal(got[0]) {
		t.Errorf("edge-1 key %x, want %x", got[0], pub)
	}
	for i, k := range got[1:] {
		if k != nil {
			t.Errorf("edge-%d key %x, want none", i+2, k)
		}
	}
}

// TestRegisterNodeKeyOnRealAPIServer registers node keys with the credentials
// an agent pod gets (a token for the agent ServiceAccount bound to its pod), on
// a real apiserver with deploy/agent's RBAC and node-key policy: the agent
// registers and replaces its own node's key, writes nothing when the key is
// already there, and is refused for another node.
func TestRegisterNodeKeyOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.Client()

	objs, err := deploy.Objects("agent")
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	var ns, sa string
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			continue
		case "ServiceAccount":
			ns, sa = o.GetNamespace(), o.GetName()
		}
		install = append(install, o)
	}
	if err := deploy.Apply(ctx, c.RESTConfig(), install, false); err != nil {
		t.Fatal(err)
	}
	const nodeA, nodeB, probeNode = "edge-r-1", "edge-r-2", "edge-r-probe"
	for _, name := range []string{nodeA, nodeB} {
		if _, err := c.AddNode(ctx, testcluster.NodeOptions{Name: name, Zone: "edge-r"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, fakeNode(probeNode, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a"},
		Spec: corev1.PodSpec{NodeName: nodeA, ServiceAccountName: sa,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:  []corev1.Container{{Name: "agent", Image: "edgequorum"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Count the agent's writes on the wire.
	var patches atomic.Int32
	cfg := &rest.Config{Host: c.APIServerURL(), BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CACertPEM()},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method != http.MethodGet {
					patches.Add(1)
				}
				return rt.RoundTrip(r)
			})
		}}
	agentA, err := kubeclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// The policy is in force once it refuses an admin setting a key.
	poll.Until(t, time.Minute, "the node-key policy to be in force", func() (bool, string) {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, zone.NodeKeyAnnotation, zone.EncodeNodeKey(newPublicKey(t)))
		_, err := admin.CoreV1().Nodes().Patch(ctx, probeNode, types.MergePatchType, patch, metav1.PatchOptions{})
		return apierrors.IsForbidden(err), fmt.Sprint(err)
	})

	register := func(node string, pub ed25519.PublicKey, logs *logLines) error {
		// Short retries: RBAC may take a moment to reach the authorizer.
		return registerNodeKeyPaced(ctx, agentA, node, pub, logs.log, 10*time.Millisecond, 100*time.Millisecond)
	}
	keyOf := func(node string) string {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Annotations[zone.NodeKeyAnnotation]
	}

	pub := newPublicKey(t)
	var logs logLines
	if err := register(nodeA, pub, &logs); err != nil {
		t.Fatalf("registering %s's key with its own agent's token: %v\n%s", nodeA, err, logs.String())
	}
	if got := keyOf(nodeA); got != zone.EncodeNodeKey(pub) {
		t.Fatalf("%s's key %q, want %q", nodeA, got, zone.EncodeNodeKey(pub))
	}
	before := patches.Load()
	logs = logLines{}
	if err := register(nodeA, pub, &logs); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load() - before; n != 0 {
		t.Errorf("a key already registered cost %d writes", n)
	}
	// The data dir was wiped: a new key replaces the old one.
	wiped := newPublicKey(t)
	logs = logLines{}
	if err := register(nodeA, wiped, &logs); err != nil {
		t.Fatalf("replacing %s's key: %v\n%s", nodeA, err, logs.String())
	}
	if got := keyOf(nodeA); got != zone.EncodeNodeKey(wiped) {
		t.Fatalf("%s's key %q after a wiped data dir, want %q", nodeA, got, zone.EncodeNodeKey(wiped))
	}
	if logs.count("replaced") != 1 {
		t.Errorf("replacement not logged:\n%s", logs.String())
	}

	// Another node's key: refused by the policy, retried until ctx ends
	// (here: the third refusal).
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	refusals := 0
	err = registerNodeKeyPaced(bctx, agentA, nodeB, pub, func(msg string, args ...any) {
		logs.log(msg, args...)
		if strings.Contains(msg, "refused") {
			if refusals++; refusals == 3 {
				bcancel()
			}
		}
	}, time.Millisecond, time.Millisecond)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "edgequorum-node-key-writer") {
		t.Fatalf("registering a key for %s with %s's token: %v, want the node-key policy's refusal", nodeB, nodeA, err)
	}
	if !strings.Contains(err.Error(), "node "+nodeB) || !strings.Contains(err.Error(), zone.NodeKeyAnnotation) {
		t.Errorf("error does not name node and annotation: %v", err)
	}
	if got := keyOf(nodeB); got != "" {
		t.Errorf("%s got key %q from %s's agent", nodeB, got, nodeA)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
