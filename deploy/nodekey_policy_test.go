package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// nodeNameExtra is where the apiserver puts the node of a pod-bound
// ServiceAccount token in the user's extra, which the node-key policy reads.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// TestNodeKeyPolicyOnRealAPIServer installs deploy/agent's RBAC and policies on
// a real apiserver (NodeRestriction and the Node authorizer on) and checks who
// may write edgequorum.io/node-key, with ServiceAccount tokens as the kubelets
// would fetch them for agent pods on two nodes: each node's agent may set and
// replace its own node's key and nobody else's; a token of the agent
// ServiceAccount that names no node, a kubelet, another ServiceAccount on the
// node and a cluster admin may not set or change any key; admins (system:masters,
// cluster-admin through RBAC, a role allowed to delete edgequorum.io nodekeys
// of that node) may remove one; writes that keep a key pass.
func TestNodeKeyPolicyOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ns, sa := installAgent(ctx, t, c)
	agentUser := "system:serviceaccount:" + ns + ":" + sa
	admin := c.Client()
	const nodeA, nodeB, probeNode = "edge-k-1", "edge-k-2", "edge-k-probe"
	for _, name := range []string{nodeA, nodeB} {
		if _, err := c.AddNode(ctx, testcluster.NodeOptions{Name: name, Zone: "edge-k"}); err != nil {
			t.Fatal(err)
		}
	}
	// A node no agent runs on, for writes that must be refused whatever the
	// node already carries.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: probeNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The credentials an agent pod on each node gets from its kubelet: a token
	// for the agent ServiceAccount bound to that pod.
	podA := createPodOn(ctx, t, admin, ns, sa, "agent-a", nodeA)
	podB := createPodOn(ctx, t, admin, ns, sa, "agent-b", nodeB)
	agentA := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, podRef(podA)))
	agentB := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, podRef(podB)))
	// Tokens of the same ServiceAccount that name no node.
	unbound := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, nil))
	secret, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token-anchor"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secretBound := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, &authenticationv1.BoundObjectReference{
		Kind: "Secret", APIVersion: "v1", Name: secret.Name, UID: secret.UID}))

	// What the policy relies on: the apiserver names the pod's node in the
	// user's extra, with no flag or feature gate of the harness's own.
	requireNodeClaim(ctx, t, agentA, agentUser, []string{nodeA})
	requireNodeClaim(ctx, t, agentB, agentUser, []string{nodeB})
	requireNodeClaim(ctx, t, unbound, agentUser, nil)
	requireNodeClaim(ctx, t, secretBound, agentUser, nil)

	// Policies take effect once the apiserver's policy informer has them. An
	// admin setting a key is refused from then on; each try sets a new one.
	took := poll.Until(t, time.Minute, "the node-key policy to refuse cluster-admin setting a key", func() (bool, string) {
		err := setNodeKey(ctx, admin, probeNode, newNodeKey(t))
		if err != nil && !deniedByNodeKeyPolicy(err) {
			t.Fatalf("admin setting a node key: %v", err)
		}
		return err != nil, "admin may still set a key"
	})
	t.Logf("node-key policy in force %s after its first check", took.Round(time.Millisecond))
	// The apiserver type-checks the expressions against the Node schema; a
	// warning there is an expression that may fail at admission time.
	requirePolicyTypeChecked(ctx, t, admin, "edgequorum-node-key-writer")
	// The agent's RBAC is in force once it may patch its node with what no
	// policy refuses (removing an edgequorum.io/ annotation it does not
	// have: agent-policy.yaml lets it remove those); refusals below are then
	// the policy's own.
	poll.Until(t, time.Minute, "the agent's RBAC to let it patch its node", func() (bool, string) {
		err := patchAnnotation(ctx, agentA, nodeA, "edgequorum.io/rbac-probe", `null`, "")
		return err == nil, fmt.Sprint(err)
	})

	// Each node's agent registers its own key.
	keyA := newNodeKey(t)
	if err := setNodeKey(ctx, agentA, nodeA, keyA); err != nil {
		t.Fatalf("the agent on %s registering its own key: %v", nodeA, err)
	}
	requireNodeKey(ctx, t, admin, nodeA, keyA)
	err = setNodeKey(ctx, agentA, nodeB, newNodeKey(t))
	requireNodeKeyDenied(t, "the agent on "+nodeA+" registering a key for "+nodeB, err)
	if err != nil && !strings.Contains(err.Error(), "with node-name claim "+nodeA) {
		t.Errorf("the refusal does not name the writer's node claim %s: %v", nodeA, err)
	}
	requireNodeKey(ctx, t, admin, nodeB, "")
	keyB := newNodeKey(t)
	if err := setNodeKey(ctx, agentB, nodeB, keyB); err != nil {
		t.Fatalf("the agent on %s registering its own key: %v", nodeB, err)
	}
	// No node replaces or removes another's key.
	requireNodeKeyDenied(t, "the agent on "+nodeA+" replacing the key of "+nodeB, setNodeKey(ctx, agentA, nodeB, newNodeKey(t)))
	requireNodeKeyDenied(t, "the agent on "+nodeA+" removing the key of "+nodeB, removeNodeKey(ctx, agentA, nodeB))
	requireNodeKey(ctx, t, admin, nodeB, keyB)
	// A node whose data dir was wiped registers its new key the same way.
	keyA = newNodeKey(t)
	if err := setNodeKey(ctx, agentA, nodeA, keyA); err != nil {
		t.Fatalf("the agent on %s replacing its own key: %v", nodeA, err)
	}
	requireNodeKey(ctx, t, admin, nodeA, keyA)

	// The agent ServiceAccount without a node-name claim sets no key at all.
	err = setNodeKey(ctx, unbound, probeNode, newNodeKey(t))
	requireNodeKeyDenied(t, "an unbound agent token setting a key", err)
	if err != nil && !strings.Contains(err.Error(), "without a node-name claim") {
		t.Errorf("the refusal does not say the writer has no node claim: %v", err)
	}
	requireNodeKeyDenied(t, "an unbound agent token replacing a key", setNodeKey(ctx, unbound, nodeA, newNodeKey(t)))
	requireNodeKeyDenied(t, "an unbound agent token removing a key", removeNodeKey(ctx, unbound, nodeA))
	requireNodeKeyDenied(t, "a Secret-bound agent token setting a key", setNodeKey(ctx, secretBound, probeNode, newNodeKey(t)))
	requireNodeKeyDenied(t, "a Secret-bound agent token replacing a key", setNodeKey(ctx, secretBound, nodeA, newNodeKey(t)))

	// A kubelet may write its own Node's annotations, but not this one.
	kubeletA := clientAs(t, c, "system:node:"+nodeA, "system:nodes", "system:authenticated")
	if err := patchAnnotation(ctx, kubeletA, nodeA, "example.com/owner", `"kubelet"`, ""); err != nil {
		t.Fatalf("a kubelet writing another annotation of its node was refused: %v", err)
	}
	requireNodeKeyDenied(t, "a kubelet replacing its node's key", setNodeKey(ctx, kubeletA, nodeA, newNodeKey(t)))
	requireNodeKeyDenied(t, "a kubelet replacing its node's key through nodes/status",
		patchAnnotation(ctx, kubeletA, nodeA, zone.NodeKeyAnnotation, jsonString(t, newNodeKey(t)), "status"))
	requireNodeKeyDenied(t, "a kubelet removing its node's key", removeNodeKey(ctx, kubeletA, nodeA))

	// Another ServiceAccount allowed to patch Nodes, from a pod on the node,
	// has the node's claim but is not the agent.
	intruder := intruderOn(ctx, t, c, nodeA)
	requireNodeKeyDenied(t, "another ServiceAccount with a pod on "+nodeA+" replacing its key", setNodeKey(ctx, intruder, nodeA, newNodeKey(t)))
	requireNodeKey(ctx, t, admin, nodeA, keyA)

	// The admin sets no key, but keeps others' writes and removes keys.
	requireNodeKeyDenied(t, "cluster-admin replacing a key", setNodeKey(ctx, admin, nodeA, newNodeKey(t)))
	_, err = admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "edge-k-new", Annotations: map[string]string{zone.NodeKeyAnnotation: newNodeKey(t)}}}, metav1.CreateOptions{})
	requireNodeKeyDenied(t, "creating a node that carries a key", err)
	n, err := admin.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels["example.com/touched"] = "yes"
	if _, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Errorf("a whole-Node update that keeps the key was refused: %v", err)
	}
	requireNodeKey(ctx, t, admin, nodeA, keyA)
	if err := removeNodeKey(ctx, admin, nodeB); err != nil {
		t.Fatalf("cluster-admin removing the key of %s: %v", nodeB, err)
	}
	requireNodeKey(ctx, t, admin, nodeB, "")
	// ... after which the node's agent registers it again.
	if err := setNodeKey(ctx, agentB, nodeB, keyB); err != nil {
		t.Fatalf("the agent on %s registering its key again after an admin removed it: %v", nodeB, err)
	}
	requireNodeKey(ctx, t, admin, nodeB, keyB)

	// Admins outside system:masters, as on managed clusters: cluster-admin
	// through RBAC, or a role allowed to delete edgequorum.io nodekeys of
	// one node.
	opsAdmin := rbacUser(ctx, t, c, "ops-admin", nodeA, rbacv1.RoleRef{
		APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"})
	requireNodeKeyDenied(t, "a cluster-admin through RBAC setting a key", setNodeKey(ctx, opsAdmin, probeNode, newNodeKey(t)))
	if err := removeNodeKey(ctx, opsAdmin, nodeA); err != nil {
		t.Fatalf("a cluster-admin through RBAC removing the key of %s: %v", nodeA, err)
	}
	requireNodeKey(ctx, t, admin, nodeA, "")
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "node-key-remover"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"edgequorum.io"}, Resources: []string{"nodekeys"}, Verbs: []string{"delete"}, ResourceNames: []string{nodeB}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remover := rbacUser(ctx, t, c, "key-remover", nodeA, rbacv1.RoleRef{
		APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "node-key-remover"})
	if err := setNodeKey(ctx, agentA, nodeA, keyA); err != nil {
		t.Fatalf("the agent on %s registering its key again after an admin removed it: %v", nodeA, err)
	}
	requireNodeKeyDenied(t, "a user allowed to remove "+nodeB+"'s key removing "+nodeA+"'s", removeNodeKey(ctx, remover, nodeA))
	requireNodeKeyDenied(t, "a user allowed to remove "+nodeB+"'s key setting it", setNodeKey(ctx, remover, nodeB, newNodeKey(t)))
	if err := removeNodeKey(ctx, remover, nodeB); err != nil {
		t.Fatalf("a user allowed to remove %s's key removing it: %v", nodeB, err)
	}
	requireNodeKey(ctx, t, admin, nodeA, keyA)
	requireNodeKey(ctx, t, admin, nodeB, "")
}

// rbacUser returns the client of user (a client certificate, no privileged
// group) bound to role, once RBAC lets it patch an unguarded annotation of
// node.
func rbacUser(ctx context.Context, t *testing.T, c *testcluster.Cluster, user, node string, role rbacv1.RoleRef) kubernetes.Interface {
	t.Helper()
	if _, err := c.Client().RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    role,
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs := clientAs(t, c, user, "system:authenticated")
	poll.Until(t, time.Minute, "RBAC to let "+user+" patch nodes", func() (bool, string) {
		err := patchAnnotation(ctx, cs, node, "example.com/rbac-probe", jsonString(t, user), "")
		return err == nil, fmt.Sprint(err)
	})
	return cs
}

// installAgent applies deploy/agent's objects but the DaemonSet (no agent
// runs; the test holds the agents' credentials) and returns the agent
// ServiceAccount's namespace and name. It fails unless they hold every policy
// the tests count on.
func installAgent(ctx context.Context, t *testing.T, c *testcluster.Cluster) (ns, sa string) {
	t.Helper()
	objs, err := Objects("agent")
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	missing := []string{"edgequorum-node-key-writer", "edgequorum-verdict-writer", nodeWritesPolicy, leaseWritesPolicy, eventWritesPolicy}
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			continue
		case "ServiceAccount":
			ns, sa = o.GetNamespace(), o.GetName()
		case "ValidatingAdmissionPolicy":
			missing = slices.DeleteFunc(missing, func(p string) bool { return p == o.GetName() })
		}
		install = append(install, o)
	}
	if len(missing) > 0 || sa == "" {
		t.Fatalf("install/agent.yaml lacks the policies %v or the ServiceAccount (%q)", missing, sa)
	}
	if err := Apply(ctx, c.RESTConfig(), install, false); err != nil {
		t.Fatal(err)
	}
	return ns, sa
}

// createPodOn creates a pod already scheduled on node that runs as the
// ServiceAccount sa. It tolerates every taint, as the agent's DaemonSet does,
// so no controller evicts it (which would revoke its tokens) mid-test.
func createPodOn(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, sa, name, node string) *corev1.Pod {
	t.Helper()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: sa,
			Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:         []corev1.Container{{Name: "agent", Image: "edgequorum"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod %s/%s on %s: %v", ns, name, node, err)
	}
	return pod
}

func podRef(p *corev1.Pod) *authenticationv1.BoundObjectReference {
	return &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}
}

// createToken is a TokenRequest for sa, bound to ref (nil: bound to nothing).
func createToken(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, sa string, ref *authenticationv1.BoundObjectReference) string {
	t.Helper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: ref}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s bound to %v: %v", ns, sa, ref, err)
	}
	return tr.Status.Token
}

func tokenClient(t *testing.T, c *testcluster.Cluster, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.APIServerURL(), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CACertPEM()}})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// requireNodeClaim checks, with a SelfSubjectReview, who the apiserver takes
// cs for and which node-name claim it carries (none when node is nil).
func requireNodeClaim(ctx context.Context, t *testing.T, cs kubernetes.Interface, user string, node []string) {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := r.Status.UserInfo
	if got.Username != user || !slices.Equal(got.Extra[nodeNameExtra], node) {
		t.Fatalf("apiserver sees %s with %s=%v, want %s with %v (extra: %v)", got.Username, nodeNameExtra,
			[]string(got.Extra[nodeNameExtra]), user, node, got.Extra)
	}
	t.Logf("%s: %s=%v", got.Username, nodeNameExtra, node)
}

// intruderOn returns the client of a ServiceAccount other than the agent's,
// allowed by RBAC to patch Nodes, with a token bound to a pod on node: it
// carries node's claim, which alone must not be enough.
func intruderOn(ctx context.Context, t *testing.T, c *testcluster.Cluster, node string) kubernetes.Interface {
	t.Helper()
	admin := c.Client()
	const ns, name = "default", "node-patcher"
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edgequorum-agent"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := createPodOn(ctx, t, admin, ns, name, name, node)
	cs := tokenClient(t, c, createToken(ctx, t, admin, ns, name, podRef(pod)))
	requireNodeClaim(ctx, t, cs, "system:serviceaccount:"+ns+":"+name, []string{node})
	poll.Until(t, time.Minute, "RBAC to let "+name+" patch nodes", func() (bool, string) {
		err := patchAnnotation(ctx, cs, node, "example.com/rbac-probe", `"intruder"`, "")
		return err == nil, fmt.Sprint(err)
	})
	return cs
}

func newNodeKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return zone.EncodeNodeKey(pub)
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func setNodeKey(ctx context.Context, cs kubernetes.Interface, node, key string) error {
	b, err := json.Marshal(key)
	if err != nil {
		return err
	}
	return patchAnnotation(ctx, cs, node, zone.NodeKeyAnnotation, string(b), "")
}

func removeNodeKey(ctx context.Context, cs kubernetes.Interface, node string) error {
	return patchAnnotation(ctx, cs, node, zone.NodeKeyAnnotation, "null", "")
}

func requireNodeKey(ctx context.Context, t *testing.T, cs kubernetes.Interface, node, want string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Annotations[zone.NodeKeyAnnotation]; got != want {
		t.Fatalf("node %s has key %q, want %q", node, got, want)
	}
}

// deniedByNodeKeyPolicy tells the node-key policy's refusal, with its message,
// from one for another reason (RBAC, NodeRestriction), which must not pass
// for it.
func deniedByNodeKeyPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'edgequorum-node-key-writer'") &&
		strings.Contains(err.Error(), "may be set, replaced or removed only by its own agent")
}

func requireNodeKeyDenied(t *testing.T, what string, err error) {
	t.Helper()
	requireRefused(t, what, "the node-key policy", err, deniedByNodeKeyPolicy)
}
