package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// TestVerdictPolicyOnRealAPIServer installs deploy/agent's RBAC and verdict
// policy on a real apiserver (NodeRestriction and the Node authorizer on, as in
// production) and checks who may write edgequorum.io/verdict: the agent
// ServiceAccount may set, change and remove it; a kubelet may not vouch for its
// own node, through the node or its status, nor take its zone's verdict away
// (during a WAN cut the leader could not write it back); another
// ServiceAccount may do neither; cluster admins (system:masters, cluster-admin
// through RBAC, a role allowed to delete edgequorum.io verdicts of that node)
// may only remove it; nobody may create a node with it; and writes that keep
// it pass, as the node lifecycle controller, the webhook's repair loop and
// kubelets make them all the time.
func TestVerdictPolicyOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := context.Background()

	objs, err := Objects("agent")
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	var agentUser string
	for _, o := range objs {
		switch o.GetKind() {
		case "DaemonSet":
			continue
		case "ServiceAccount":
			agentUser = "system:serviceaccount:" + o.GetNamespace() + ":" + o.GetName()
		}
		install = append(install, o)
	}
	if err := Apply(ctx, c.RESTConfig(), install, false); err != nil {
		t.Fatal(err)
	}
	admin := c.Client()
	agent := clientAs(t, c, agentUser, "system:serviceaccounts", "system:authenticated")
	const nodeName = "edge-v-1"
	kubelet := clientAs(t, c, "system:node:"+nodeName, "system:nodes", "system:authenticated")

	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Policies take effect once the apiserver's policy informer has them.
	// Each try writes a new value: keeping a verdict is allowed.
	took := untilDenied(t, verdictPolicy, "cluster-admin setting a verdict", func(try int) error {
		return setVerdict(ctx, admin, nodeName, fmt.Sprintf(`{"state":"healthy","try":%d}`, try), "")
	})
	t.Logf("verdict policy in force %s after its first check", took.Round(time.Millisecond))
	requirePolicyTypeChecked(ctx, t, admin, verdictPolicy)

	const healthy = `{"state":"healthy","zone":"edge-v"}`
	if err := setVerdict(ctx, agent, nodeName, healthy, ""); err != nil {
		t.Fatalf("the agent ServiceAccount %s may not write the verdict: %v", agentUser, err)
	}
	requireDenied(t, "a kubelet vouching for its own node", setVerdict(ctx, kubelet, nodeName, `{"state":"healthy","zone":"mine"}`, ""))
	requireDenied(t, "a kubelet vouching through nodes/status", setVerdict(ctx, kubelet, nodeName, `{"state":"healthy","zone":"mine"}`, "status"))
	_, err = admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "edge-v-2", Annotations: map[string]string{zone.AnnotationKey: healthy}}}, metav1.CreateOptions{})
	requireDenied(t, "creating a node that carries a verdict", err)

	// Writes that keep the verdict as it is pass: a kubelet's own annotation,
	// a whole-object update as the node lifecycle controller makes.
	if err := patchAnnotation(ctx, kubelet, nodeName, "example.com/owner", `"kubelet"`, ""); err != nil {
		t.Errorf("a kubelet writing another annotation was refused: %v", err)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"example.com/touched": "yes"}
	if _, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Errorf("an update that keeps the verdict was refused: %v", err)
	}
	if got := getVerdict(ctx, t, admin, nodeName); got != healthy {
		t.Fatalf("verdict is %q, want the agent's %q", got, healthy)
	}
	// Nobody but the agent and admins takes a verdict away: not the node's
	// kubelet, through the node or its status, nor another ServiceAccount
	// allowed to patch Nodes, from a pod on the node.
	requireDenied(t, "a kubelet removing its node's verdict", patchAnnotation(ctx, kubelet, nodeName, zone.AnnotationKey, "null", ""))
	requireDenied(t, "a kubelet removing its node's verdict through nodes/status",
		patchAnnotation(ctx, kubelet, nodeName, zone.AnnotationKey, "null", "status"))
	intruder := intruderOn(ctx, t, c, nodeName)
	requireDenied(t, "another ServiceAccount removing the verdict", patchAnnotation(ctx, intruder, nodeName, zone.AnnotationKey, "null", ""))
	requireDenied(t, "another ServiceAccount setting the verdict", setVerdict(ctx, intruder, nodeName, `{"state":"healthy","zone":"other"}`, ""))
	if got := getVerdict(ctx, t, admin, nodeName); got != healthy {
		t.Fatalf("verdict is %q after refused removals, want the agent's %q", got, healthy)
	}

	// The agent removes it, and cluster admins may.
	if err := patchAnnotation(ctx, agent, nodeName, zone.AnnotationKey, "null", ""); err != nil {
		t.Errorf("the agent removing the verdict was refused: %v", err)
	}
	requireVerdict(ctx, t, admin, nodeName, "")
	if err := setVerdict(ctx, agent, nodeName, healthy, ""); err != nil {
		t.Fatal(err)
	}
	if err := patchAnnotation(ctx, admin, nodeName, zone.AnnotationKey, "null", ""); err != nil {
		t.Errorf("cluster-admin (system:masters) removing the verdict was refused: %v", err)
	}
	requireVerdict(ctx, t, admin, nodeName, "")

	// Admins outside system:masters: cluster-admin through RBAC, or a role
	// allowed to delete edgequorum.io verdicts of one node.
	const otherNode = "edge-v-3"
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{nodeName, otherNode} {
		if err := setVerdict(ctx, agent, node, healthy, ""); err != nil {
			t.Fatal(err)
		}
	}
	opsAdmin := rbacUser(ctx, t, c, "ops-admin", nodeName, rbacv1.RoleRef{
		APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"})
	requireDenied(t, "a cluster-admin through RBAC changing the verdict", setVerdict(ctx, opsAdmin, nodeName, `{"state":"unhealthy"}`, ""))
	if err := patchAnnotation(ctx, opsAdmin, nodeName, zone.AnnotationKey, "null", ""); err != nil {
		t.Errorf("a cluster-admin through RBAC removing the verdict was refused: %v", err)
	}
	requireVerdict(ctx, t, admin, nodeName, "")
	if err := setVerdict(ctx, agent, nodeName, healthy, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "verdict-remover"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
			{APIGroups: []string{"edgequorum.io"}, Resources: []string{"verdicts"}, Verbs: []string{"delete"}, ResourceNames: []string{otherNode}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remover := rbacUser(ctx, t, c, "verdict-remover", nodeName, rbacv1.RoleRef{
		APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "verdict-remover"})
	requireDenied(t, "a user allowed to remove "+otherNode+"'s verdict removing "+nodeName+"'s",
		patchAnnotation(ctx, remover, nodeName, zone.AnnotationKey, "null", ""))
	requireDenied(t, "a user allowed to remove "+otherNode+"'s verdict changing it", setVerdict(ctx, remover, otherNode, `{"state":"unhealthy"}`, ""))
	if err := patchAnnotation(ctx, remover, otherNode, zone.AnnotationKey, "null", ""); err != nil {
		t.Errorf("a user allowed to remove %s's verdict removing it was refused: %v", otherNode, err)
	}
	requireVerdict(ctx, t, admin, otherNode, "")
	requireVerdict(ctx, t, admin, nodeName, healthy)
}

func requireVerdict(ctx context.Context, t *testing.T, cs kubernetes.Interface, node, want string) {
	t.Helper()
	if got := getVerdict(ctx, t, cs, node); got != want {
		t.Errorf("node %s has verdict %q, want %q", node, got, want)
	}
}

func clientAs(t *testing.T, c *testcluster.Cluster, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg, err := c.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func setVerdict(ctx context.Context, cs kubernetes.Interface, node, verdict, subresource string) error {
	v, err := json.Marshal(verdict)
	if err != nil {
		return err
	}
	return patchAnnotation(ctx, cs, node, zone.AnnotationKey, string(v), subresource)
}

// patchAnnotation merge-patches one annotation to the JSON value raw (null
// removes it), on the node or on one of its subresources.
func patchAnnotation(ctx context.Context, cs kubernetes.Interface, node, key, raw, subresource string) error {
	k, err := json.Marshal(key)
	if err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%s:%s}}}`, k, raw)
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, sub...)
	return err
}

func getVerdict(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string) string {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Annotations[zone.AnnotationKey]
}

const verdictPolicy = "edgequorum-verdict-writer"

func requireDenied(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s was allowed", what)
	case !deniedBy(err, verdictPolicy):
		t.Errorf("%s was refused, but not by the verdict policy: %v", what, err)
	case !strings.Contains(err.Error(), "may be set, changed or removed only by the edgequorum agent"):
		t.Errorf("%s was refused without the policy's message: %v", what, err)
	default:
		t.Logf("%s refused: %v", what, err)
	}
}

// TestKubeletCannotChooseItsZone: zone membership decides whose votes count
// for whom, so a stolen edge node must not put itself into another zone. The
// default zone label is one NodeRestriction keeps from kubelets; the topology
// label it replaced is not (a kubelet sets that on itself at will).
func TestKubeletCannotChooseItsZone(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx := context.Background()
	k, err := c.AddNode(ctx, testcluster.NodeOptions{Name: "edge-z-1", Zone: "site-a"})
	if err != nil {
		t.Fatal(err)
	}
	kubelet := clientAs(t, c, "system:node:"+k.Name(), "system:nodes", "system:authenticated")
	label := func(key, value string) error {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, key, value)
		_, err := kubelet.CoreV1().Nodes().Patch(ctx, k.Name(), types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := label(zone.DefaultZoneLabel, "site-b"); !apierrors.IsForbidden(err) {
		t.Fatalf("kubelet moving its node to zone site-b via %s: err %v, want Forbidden", zone.DefaultZoneLabel, err)
	}
	remove := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, zone.DefaultZoneLabel)
	if _, err := kubelet.CoreV1().Nodes().Patch(ctx, k.Name(), types.MergePatchType, remove, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("kubelet removing its zone label: err %v, want Forbidden", err)
	}
	n, err := c.Client().CoreV1().Nodes().Get(ctx, k.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Labels[zone.DefaultZoneLabel]; got != "site-a" {
		t.Fatalf("zone label %q after the kubelet's attempts, want site-a", got)
	}
	// Why the default moved: this one a kubelet may set on itself.
	if err := label(corev1.LabelTopologyZone, "site-b"); err != nil {
		t.Fatalf("kubelet setting %s (expected to be allowed, which is why it is no zone label): %v", corev1.LabelTopologyZone, err)
	}
}
