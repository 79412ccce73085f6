package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// The policies of deploy/agent/agent-policy.yaml.
const (
	nodeWritesPolicy  = "edgequorum-agent-node-writes"
	leaseWritesPolicy = "edgequorum-agent-lease-writes"
	eventWritesPolicy = "edgequorum-agent-event-writes"
)

// TestAgentPolicyOnRealAPIServer installs deploy/agent's RBAC and policies, and
// the webhook's RBAC, on a real apiserver (NodeRestriction and the Node
// authorizer on) and checks what the agent ServiceAccount's token, the one that
// sits on every edge node, may still do: change edgequorum.io/ annotations of
// Nodes and nothing else of any Node, and write only edgequorum-... Leases of
// its own namespace held by its own node. The tokens are the ones kubelets
// fetch for agent pods: bound to a pod, carrying the pod's node-name claim.
func TestAgentPolicyOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	admin := c.Client()

	ns, sa := installAgent(ctx, t, c)
	agentUser := "system:serviceaccount:" + ns + ":" + sa
	webhookNS, repairLease := installWebhookRBAC(ctx, t, c)
	const zoneName, nodeA, nodeB, cpNode = "edge-p", "edge-p-1", "edge-p-2", "cp-p-1"
	for _, name := range []string{nodeA, nodeB} {
		if _, err := c.AddNode(ctx, testcluster.NodeOptions{Name: name, Zone: zoneName}); err != nil {
			t.Fatal(err)
		}
	}
	// A control-plane node as kubeadm leaves it.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cpNode, Labels: map[string]string{testcluster.LabelControlPlane: ""}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: testcluster.LabelControlPlane, Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	agentA := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, podRef(createPodOn(ctx, t, admin, ns, sa, "agent-a", nodeA))))
	agentB := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, podRef(createPodOn(ctx, t, admin, ns, sa, "agent-b", nodeB))))
	unbound := tokenClient(t, c, createToken(ctx, t, admin, ns, sa, nil))
	requireNodeClaim(ctx, t, agentA, agentUser, []string{nodeA})
	requireNodeClaim(ctx, t, unbound, agentUser, nil)

	// Policies take effect once the apiserver's policy informer has them; each
	// try is a write RBAC allows and the policy refuses.
	took := untilDenied(t, nodeWritesPolicy, "the agent labelling its node", func(try int) error {
		return patchNode(ctx, agentA, nodeA, types.MergePatchType, fmt.Sprintf(`{"metadata":{"labels":{"example.com/probe":"%d"}}}`, try), "")
	})
	t.Logf("%s in force %s after its first check", nodeWritesPolicy, took.Round(time.Millisecond))
	took = untilDenied(t, leaseWritesPolicy, "the agent creating a Lease of another name", func(try int) error {
		return createLease(ctx, agentA, ns, fmt.Sprintf("probe-%d", try), nodeA)
	})
	t.Logf("%s in force %s after its first check", leaseWritesPolicy, took.Round(time.Millisecond))
	took = untilDenied(t, eventWritesPolicy, "the agent recording an Event as another node", func(try int) error {
		return createEvent(ctx, agentA, "default", nodeB, "Node", "", fmt.Sprintf("probe-%d", try))
	})
	t.Logf("%s in force %s after its first check", eventWritesPolicy, took.Round(time.Millisecond))
	for _, p := range []string{nodeWritesPolicy, leaseWritesPolicy, eventWritesPolicy, "edgequorum-verdict-writer", "edgequorum-node-key-writer"} {
		requirePolicyTypeChecked(ctx, t, admin, p)
	}
	// What RBAC grants the token (in force since the writes above got past
	// it): Nodes cluster-wide, and Leases in the agent's namespace only. The
	// rest of this test checks what the policies take away from that.
	requireAgentRules(ctx, t, agentA, ns, webhookNS, ns, "default", "kube-system", "kube-node-lease", webhookNS)

	t.Run("nodes", func(t *testing.T) {
		// What the agent writes: its node key on its own Node, as the leader a
		// verdict on any member's, by merge patch or, replacing one, by JSON
		// patch (apiwriter's verdictPatch).
		if err := patchAnnotation(ctx, agentA, nodeA, zone.NodeKeyAnnotation, `"a"`, ""); err != nil {
			t.Errorf("the agent registering its node key: %v", err)
		}
		if err := setVerdict(ctx, agentA, nodeB, `{"state":"healthy","zone":"edge-p"}`, ""); err != nil {
			t.Errorf("the agent writing the verdict of %s: %v", nodeB, err)
		}
		replace, err := json.Marshal([]map[string]string{
			{"op": "test", "path": "/metadata/annotations/edgequorum.io~1verdict", "value": `{"state":"healthy","zone":"edge-p"}`},
			{"op": "replace", "path": "/metadata/annotations/edgequorum.io~1verdict", "value": `{"state":"unhealthy","zone":"edge-p"}`},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := patchNode(ctx, agentA, nodeB, types.JSONPatchType, string(replace), ""); err != nil {
			t.Errorf("the agent replacing the verdict of %s by JSON patch: %v", nodeB, err)
		}

		// Everything else is refused, on every node.
		if err := patchAnnotation(ctx, admin, nodeA, "example.com/kept", `"yes"`, ""); err != nil {
			t.Fatal(err)
		}
		taint := `{"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`
		for _, tc := range []struct {
			what, node, patch, want string
		}{
			{"tainting its own node", nodeA, taint, "changes spec"},
			{"tainting another node", nodeB, taint, "changes spec"},
			{"tainting a control-plane node", cpNode, taint, "changes spec"},
			{"cordoning its own node", nodeA, `{"spec":{"unschedulable":true}}`, "changes spec"},
			{"labelling its own node", nodeA, `{"metadata":{"labels":{"example.com/role":"x"}}}`, "changes labels"},
			{"labelling a control-plane node", cpNode, `{"metadata":{"labels":{"example.com/role":"x"}}}`, "changes labels"},
			{"moving its node to another zone", nodeA, fmt.Sprintf(`{"metadata":{"labels":{%q:"edge-q"}}}`, zone.DefaultZoneLabel), "changes labels"},
			{"taking another node out of its zone", nodeB, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, zone.DefaultZoneLabel), "changes labels"},
			{"setting another annotation", nodeA, `{"metadata":{"annotations":{"example.com/owner":"agent"}}}`, "annotation example.com/owner"},
			{"changing another annotation", nodeA, `{"metadata":{"annotations":{"example.com/kept":"no"}}}`, "annotation example.com/kept"},
			{"removing another annotation", nodeA, `{"metadata":{"annotations":{"example.com/kept":null}}}`, "annotation example.com/kept"},
			{"adding a finalizer", nodeB, `{"metadata":{"finalizers":["example.com/hold"]}}`, "changes finalizers"},
			{"its node key along with a taint", nodeA,
				`{"metadata":{"annotations":{"edgequorum.io/node-key":"b"}},"spec":{"taints":[{"key":"example.com/evict","effect":"NoExecute"}]}}`, "changes spec"},
			// Named keys only, each within its size: the 200 KB annotation
			// a stolen token stored on a Node.
			{"storing an edgequorum.io/ annotation of its own", nodeB, `{"metadata":{"annotations":{"edgequorum.io/notes":"x"}}}`,
				"may set only edgequorum.io/verdict (at most 2048 bytes)"},
			{"storing 200 KB under an edgequorum.io/ key", nodeB,
				`{"metadata":{"annotations":{"edgequorum.io/bulk":"` + strings.Repeat("x", 200_000) + `"}}}`, "edgequorum.io/bulk (200000 bytes)"},
			{"a verdict of 3 KB", nodeB, `{"metadata":{"annotations":{"edgequorum.io/verdict":"` + strings.Repeat("x", 3000) + `"}}}`,
				"edgequorum.io/verdict (3000 bytes)"},
			{"a node key of 200 bytes", nodeA, `{"metadata":{"annotations":{"edgequorum.io/node-key":"` + strings.Repeat("k", 200) + `"}}}`,
				"edgequorum.io/node-key (200 bytes)"},
		} {
			err := patchNode(ctx, agentA, tc.node, types.MergePatchType, tc.patch, "")
			if requireDeniedBy(t, nodeWritesPolicy, "the agent "+tc.what, err) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the refusal of the agent %s does not say it %s: %v", tc.what, tc.want, err)
			}
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Annotations["example.com/kept"] != "yes" || n.Annotations[zone.NodeKeyAnnotation] != "a" || n.Labels[zone.DefaultZoneLabel] != zoneName {
			t.Errorf("%s changed by refused writes: annotations %v, labels %v", nodeA, n.Annotations, n.Labels)
		}

		// The status subresource: the leader writes a verdict and the
		// EdgeQuorum condition that shows it in one write. Nothing else in
		// status, and no condition the verdict does not say.
		verdictWithCondition := func(state, status string) string {
			return fmt.Sprintf(`{"metadata":{"annotations":{"edgequorum.io/verdict":"{\"state\":\"%s\",\"zone\":\"edge-p\"}"}},`+
				`"status":{"conditions":[{"type":"EdgeQuorum","status":"%s","reason":"Probe"}]}}`, state, status)
		}
		if err := patchNode(ctx, agentA, nodeB, types.StrategicMergePatchType, verdictWithCondition("healthy", "True"), "status"); err != nil {
			t.Errorf("the agent writing the verdict of %s with its condition through nodes/status: %v", nodeB, err)
		}
		if err := patchNode(ctx, agentA, nodeB, types.StrategicMergePatchType, verdictWithCondition("unhealthy", "False"), "status"); err != nil {
			t.Errorf("the agent changing the verdict of %s and its condition through nodes/status: %v", nodeB, err)
		}
		for _, tc := range []struct {
			what, node, patch, want string
		}{
			{"changing another condition", nodeA, `{"status":{"conditions":[{"type":"EdgequorumProbe","status":"True","reason":"Probe"}]}}`,
				"changes status.conditions other than EdgeQuorum"},
			{"marking another node Ready", nodeB, `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Probe"}]}}`,
				"changes status.conditions other than EdgeQuorum"},
			{"changing an address", nodeB, `{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.9"}]}}`, "changes status"},
			{"a condition along with another address", nodeB,
				`{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.9"}],"conditions":[{"type":"EdgeQuorum","status":"False","reason":"Probe"}]}}`,
				"changes status"},
			{"a condition the verdict does not say", nodeB, verdictWithCondition("healthy", "False"), "whose status its edgequorum.io/verdict annotation says"},
			{"a condition without a verdict", nodeA, `{"status":{"conditions":[{"type":"EdgeQuorum","status":"True","reason":"Probe"}]}}`,
				"whose status its edgequorum.io/verdict annotation says"},
			{"a condition with a message of 2 KB", nodeB, `{"status":{"conditions":[{"type":"EdgeQuorum","status":"False","reason":"Probe","message":"` +
				strings.Repeat("m", 2048) + `"}]}}`, "a message of at most 1024"},
		} {
			err := patchNode(ctx, agentA, tc.node, types.StrategicMergePatchType, tc.patch, "status")
			if requireDeniedBy(t, nodeWritesPolicy, "the agent through nodes/status "+tc.what, err) && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the refusal of the agent %s does not say %q: %v", tc.what, tc.want, err)
			}
		}
		err = patchNode(ctx, agentA, nodeA, types.StrategicMergePatchType, `{"status":{"phase":"Terminated"}}`, "status")
		if requireDeniedBy(t, nodeWritesPolicy, "the agent changing the phase through nodes/status", err) &&
			!strings.Contains(err.Error(), "node "+nodeA+"/status, which changes status") {
			t.Errorf("the refusal does not name the node, the subresource and status: %v", err)
		}

		// RBAC grants the agent no creating or deleting Nodes. Should a
		// wider role be bound to it, the policy still refuses them.
		bindClusterRole(ctx, t, admin, "edgequorum-agent-wider", ns, sa, []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"create", "delete"}},
		})
		poll.Until(t, time.Minute, "RBAC to let the agent create nodes", func() (bool, string) {
			_, err := agentA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-p-new"}}, metav1.CreateOptions{})
			return err != nil && !deniedByRBAC(err), fmt.Sprint(err)
		})
		_, err = agentA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-p-new"}}, metav1.CreateOptions{})
		requireDeniedBy(t, nodeWritesPolicy, "the agent creating a node", err)
		_, err = agentA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "edge-p-"}}, metav1.CreateOptions{})
		if requireDeniedBy(t, nodeWritesPolicy, "the agent creating a node by generateName", err) && !strings.Contains(err.Error(), "may not create node edge-p-") {
			t.Errorf("the refusal does not name the node: %v", err)
		}
		requireDeniedBy(t, nodeWritesPolicy, "the agent deleting a control-plane node",
			agentA.CoreV1().Nodes().Delete(ctx, cpNode, metav1.DeleteOptions{}))
	})

	t.Run("leases", func(t *testing.T) {
		// The founder creates the genesis Lease and the leader the zone Lease,
		// each under its own node name, and renews it.
		for _, name := range []string{zone.GenesisLeaseName(zoneName), zone.LeaseName(zoneName)} {
			if err := createLease(ctx, agentA, ns, name, nodeA); err != nil {
				t.Errorf("the agent on %s creating %s held by its node: %v", nodeA, name, err)
			}
		}
		if err := updateLease(ctx, t, admin, agentA, ns, zone.LeaseName(zoneName), nodeA); err != nil {
			t.Errorf("the agent on %s renewing the zone Lease it holds: %v", nodeA, err)
		}

		for _, tc := range []struct {
			what      string
			cs        kubernetes.Interface
			name      string
			holder    string
			wantClaim string
		}{
			{"creating a zone Lease held by another node", agentA, "edgequorum-p-b", nodeB, "with node-name claim " + nodeA},
			{"creating a zone Lease held by nobody", agentA, "edgequorum-p-none", "", "with holder (none)"},
			{"creating a Lease named kube-foo", agentA, "kube-foo", nodeA, "refused for Lease " + ns + "/kube-foo"},
			{"creating a Lease named other", agentA, "other", nodeA, "refused for Lease " + ns + "/other"},
			{"with a token of no node creating a zone Lease", unbound, "edgequorum-p-u", nodeA, "without a node-name claim"},
		} {
			err := createLease(ctx, tc.cs, ns, tc.name, tc.holder)
			if requireDeniedBy(t, leaseWritesPolicy, "the agent "+tc.what, err) && !strings.Contains(err.Error(), tc.wantClaim) {
				t.Errorf("the refusal of the agent %s does not say %q: %v", tc.what, tc.wantClaim, err)
			}
		}
		requireDeniedBy(t, leaseWritesPolicy, "the agent with a token of no node renewing the zone Lease",
			updateLease(ctx, t, admin, unbound, ns, zone.LeaseName(zoneName), nodeA))

		// What a zone or genesis Lease carries, and no more: a stolen token
		// stores nothing of its own in this namespace, and bloats no Lease.
		for _, tc := range []struct {
			what        string
			name        string
			annotations map[string]string
			labels      map[string]string
		}{
			{"an annotation of its own", "edgequorum-p-a", map[string]string{"edgequorum.io/notes": "x"}, nil},
			{"another annotation", "edgequorum-p-b2", map[string]string{"example.com/x": "y"}, nil},
			{"endorsements of 20 KB", "edgequorum-p-c", map[string]string{zone.LeaseEndorsesAnnotation: strings.Repeat("n=1,", 5000)}, nil},
			{"a signature of 1 KB", "edgequorum-p-d", map[string]string{zone.LeaseSignatureAnnotation: strings.Repeat("s", 1024)}, nil},
			{"a label of its own", "edgequorum-p-e", nil, map[string]string{"example.com/x": "y"}},
			{"a name of 120 characters", "edgequorum-" + strings.Repeat("z", 109), nil, nil},
		} {
			err := createLeaseWith(ctx, agentA, ns, tc.name, nodeA, tc.annotations, tc.labels)
			if requireDeniedBy(t, leaseWritesPolicy, "the agent creating a Lease with "+tc.what, err) && !strings.Contains(err.Error(), "each within its size") {
				t.Errorf("the refusal of a Lease with %s does not say what a Lease may carry: %v", tc.what, err)
			}
		}
		full := map[string]string{zone.LeaseTermAnnotation: "18446744073709551615", "edgequorum.io/members": "129",
			zone.LeaseEndorsesAnnotation: strings.Repeat("edge-p-100=12,", 129), zone.LeaseSignatureAnnotation: strings.Repeat("s", 88),
			zone.LeaseFormatAnnotation: zone.FormatLevel(zone.LeaseQuietFormat)}
		if err := createLeaseWith(ctx, agentA, ns, zone.LeaseName("edge-p-big"), nodeA, full, map[string]string{"edgequorum.io/zone": "edge-p-big"}); err != nil {
			t.Errorf("the agent creating the zone Lease of a zone of 129: %v", err)
		}

		// A new leader takes the zone Lease over; no agent renews a Lease for
		// another node.
		const handover = "edgequorum-p-handover"
		if err := createLease(ctx, agentB, ns, handover, nodeB); err != nil {
			t.Fatalf("the agent on %s creating a Lease held by its node: %v", nodeB, err)
		}
		requireDeniedBy(t, leaseWritesPolicy, "the agent on "+nodeA+" renewing a Lease "+nodeB+" holds",
			updateLease(ctx, t, admin, agentA, ns, handover, nodeB))
		if err := updateLease(ctx, t, admin, agentA, ns, handover, nodeA); err != nil {
			t.Errorf("the agent on %s taking over a Lease %s held: %v", nodeA, nodeB, err)
		}
		requireDeniedBy(t, leaseWritesPolicy, "the agent on "+nodeB+" handing a Lease to "+nodeA,
			updateLease(ctx, t, admin, agentB, ns, handover, nodeA))

		// Other namespaces are RBAC's: the kubelets' Leases, the webhook's
		// repair-loop lock, anywhere else.
		requireDeniedByRBAC(t, "the agent creating a kubelet Lease", createLease(ctx, agentA, "kube-node-lease", "edge-p-x", nodeA))
		requireDeniedByRBAC(t, "the agent renewing its kubelet's Lease", updateLease(ctx, t, admin, agentA, "kube-node-lease", nodeA, nodeA))
		requireDeniedByRBAC(t, "the agent creating a zone Lease in default", createLease(ctx, agentA, "default", zone.LeaseName(zoneName), nodeA))
		requireDeniedByRBAC(t, "the agent creating the webhook's repair lock", createLease(ctx, agentA, webhookNS, repairLease, nodeA))
		if err := createLease(ctx, admin, webhookNS, repairLease, "edgequorum-webhook-7d9f-abcde"); err != nil {
			t.Fatal(err)
		}
		_, err := agentA.CoordinationV1().Leases(webhookNS).Get(ctx, repairLease, metav1.GetOptions{})
		requireDeniedByRBAC(t, "the agent reading the webhook's repair lock", err)
		requireDeniedByRBAC(t, "the agent taking the webhook's repair lock", updateLease(ctx, t, admin, agentA, webhookNS, repairLease, nodeA))

		// What the webhook's replicas read: the agent reads it and writes
		// nothing of it.
		requireDeniedByRBAC(t, "the agent creating the webhook's reads Lease", createLease(ctx, agentA, webhookNS, zone.WebhookReadsLease, nodeA))
		if err := createLease(ctx, admin, webhookNS, zone.WebhookReadsLease, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := agentA.CoordinationV1().Leases(webhookNS).Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{}); err != nil {
			t.Errorf("the agent reading the webhook's reads Lease: %v", err)
		}
		requireDeniedByRBAC(t, "the agent writing the webhook's reads Lease", updateLease(ctx, t, admin, agentA, webhookNS, zone.WebhookReadsLease, nodeA))

		// RBAC grants no delete; should a wider role be bound to the agent,
		// the policy still refuses it.
		requireDeniedByRBAC(t, "the agent deleting the zone Lease",
			agentA.CoordinationV1().Leases(ns).Delete(ctx, zone.LeaseName(zoneName), metav1.DeleteOptions{}))
		bindRole(ctx, t, admin, ns, "edgequorum-agent-wider", sa, []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete"}},
		})
		poll.Until(t, time.Minute, "RBAC to let the agent delete Leases", func() (bool, string) {
			err := agentA.CoordinationV1().Leases(ns).Delete(ctx, zone.LeaseName(zoneName), metav1.DeleteOptions{})
			switch {
			case err == nil:
				t.Fatalf("the agent deleted the zone Lease")
			case deniedByRBAC(err):
				return false, err.Error()
			}
			requireDeniedBy(t, leaseWritesPolicy, "the agent deleting the zone Lease", err)
			return true, ""
		})
	})

	t.Run("edgezones", func(t *testing.T) {
		// The zone view is the webhook's word on each zone, computed in the
		// cloud: the webhook's token writes it, no agent token may.
		webhook := tokenClient(t, c, createToken(ctx, t, admin, webhookNS, "edgequorum-webhook", nil))
		edgeZones := func(cs kubernetes.Interface) *rest.Request {
			return cs.CoreV1().RESTClient().Verb("").AbsPath("/apis/edgequorum.io/v1alpha1/edgezones")
		}
		create := func(cs kubernetes.Interface, name string) error {
			return edgeZones(cs).Verb(http.MethodPost).Body([]byte(fmt.Sprintf(
				`{"apiVersion":"edgequorum.io/v1alpha1","kind":"EdgeZone","metadata":{"name":%q},"spec":{"zone":%q}}`, name, name))).
				Do(ctx).Error()
		}
		patchStatus := func(cs kubernetes.Interface, name, state string) error {
			return edgeZones(cs).Verb(http.MethodPatch).Suffix(name, "status").SetHeader("Content-Type", string(types.MergePatchType)).
				Body([]byte(fmt.Sprintf(`{"status":{"state":%q,"nodes":2}}`, state))).Do(ctx).Error()
		}
		// The resource is served once its CRD is established.
		poll.UntilTrue(t, time.Minute, "the webhook creating the EdgeZone "+zoneName, func() bool {
			return create(webhook, zoneName) == nil
		})
		if err := patchStatus(webhook, zoneName, "CutOff"); err != nil {
			t.Errorf("the webhook writing the status of EdgeZone %s: %v", zoneName, err)
		}
		for what, err := range map[string]error{
			"creating an EdgeZone":            create(agentA, "edge-forged"),
			"writing an EdgeZone's status":    patchStatus(agentA, zoneName, "Connected"),
			"deleting an EdgeZone":            edgeZones(agentA).Verb(http.MethodDelete).Suffix(zoneName).Do(ctx).Error(),
			"writing an EdgeZone (no status)": edgeZones(agentA).Verb(http.MethodPatch).Suffix(zoneName).SetHeader("Content-Type", string(types.MergePatchType)).Body([]byte(`{"spec":{"zone":"x"}}`)).Do(ctx).Error(),
		} {
			if !apierrors.IsForbidden(err) {
				t.Errorf("the agent %s: %v, want forbidden", what, err)
			}
		}
		var got struct {
			Status struct{ State string } `json:"status"`
		}
		raw, err := edgeZones(admin).Verb(http.MethodGet).Suffix(zoneName).DoRaw(ctx)
		if err != nil || json.Unmarshal(raw, &got) != nil || got.Status.State != "CutOff" {
			t.Errorf("EdgeZone %s after the agent's tries: %s, %v; want the webhook's state CutOff", zoneName, raw, err)
		}
	})

	t.Run("events", func(t *testing.T) {
		// The leader's Event on a Node, and on the zone Lease it took over,
		// each as its own node.
		if err := createEvent(ctx, agentA, "default", nodeA, "Node", nodeB, "verdict"); err != nil {
			t.Errorf("the agent on %s recording a verdict Event: %v", nodeA, err)
		}
		if err := createEvent(ctx, agentA, ns, nodeA, "Lease", zone.LeaseName(zoneName), "leader"); err != nil {
			t.Errorf("the agent on %s recording a leadership Event on the zone Lease: %v", nodeA, err)
		}
		for _, tc := range []struct {
			what, ns, instance, kind, name string
		}{
			{"as another node", "default", nodeB, "Node", nodeA},
			{"with a token of no node", "default", nodeA, "Node", nodeA},
			{"about a Pod", "default", nodeA, "Pod", "web"},
			{"about another Lease", ns, nodeA, "Lease", "kube-scheduler"},
		} {
			cs := agentA
			if tc.what == "with a token of no node" {
				cs = unbound
			}
			requireDeniedBy(t, eventWritesPolicy, "the agent recording an Event "+tc.what,
				createEvent(ctx, cs, tc.ns, tc.instance, tc.kind, tc.name, "bad"))
		}
		requireDeniedBy(t, eventWritesPolicy, "the agent recording an Event about a Node in kube-system",
			createEvent(ctx, agentA, "kube-system", nodeA, "Node", nodeA, "elsewhere"))
		requireDeniedBy(t, eventWritesPolicy, "the agent recording an Event about its zone Lease in default",
			createEvent(ctx, agentA, "default", nodeA, "Lease", zone.LeaseName(zoneName), "elsewhere"))
	})
}

// createEvent has cs record an edgequorum.io/agent Event in ns, reported by
// instance, about the object kind/name (a Node, or a Lease in ns).
func createEvent(ctx context.Context, cs kubernetes.Interface, ns, instance, kind, name, suffix string) error {
	if name == "" {
		name = instance
	}
	ref := corev1.ObjectReference{APIVersion: "v1", Kind: kind, Name: name}
	if kind == "Lease" {
		ref.APIVersion, ref.Namespace = "coordination.k8s.io/v1", ns
	}
	if kind == "Pod" {
		ref.Namespace = ns
	}
	_, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name + "." + suffix},
		EventTime:           metav1.NowMicro(),
		ReportingController: "edgequorum.io/agent",
		ReportingInstance:   instance,
		Action:              "Judge",
		Reason:              "ZoneJudgedHealthy",
		Regarding:           ref,
		Type:                corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	return err
}

// installWebhookRBAC applies deploy/webhook's Namespace, ServiceAccount,
// RBAC and the EdgeZone resource (no Deployment or webhook configuration: nothing serves them here) and
// returns the webhook's namespace and the name of its repair-loop lock, the
// one Lease its Role lets it get and update.
func installWebhookRBAC(ctx context.Context, t *testing.T, c *testcluster.Cluster) (ns, lock string) {
	t.Helper()
	objs, err := Objects("webhook")
	if err != nil {
		t.Fatal(err)
	}
	var install []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			ns = o.GetName()
		case "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
				for _, n := range names {
					if strings.HasSuffix(n, "-repair") {
						lock = n
					}
				}
			}
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "RoleBinding", "CustomResourceDefinition":
		default:
			continue
		}
		install = append(install, o)
	}
	if ns == "" || lock == "" {
		t.Fatalf("install/webhook.yaml lacks the webhook namespace (%q) or a Role naming its repair lock (%q)", ns, lock)
	}
	if err := Apply(ctx, c.RESTConfig(), install, false); err != nil {
		t.Fatal(err)
	}
	return ns, lock
}

// requireAgentRules checks with SelfSubjectRulesReviews what RBAC lets cs (the
// agent) do in each namespace: read and patch Nodes, in agentNS only, get,
// create and update Leases, and in webhookNS get the webhook's reads Lease.
// Self-reviews, which every user may make, are left out.
func requireAgentRules(ctx context.Context, t *testing.T, cs kubernetes.Interface, agentNS, webhookNS string, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		r, err := cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Incomplete {
			t.Fatalf("rules review in %s incomplete: %s", ns, r.Status.EvaluationError)
		}
		var got []string
		for _, rule := range r.Status.ResourceRules {
			for _, g := range rule.APIGroups {
				if g == "authorization.k8s.io" || g == "authentication.k8s.io" {
					continue
				}
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						got = append(got, fmt.Sprintf("%s/%s %s %v", g, res, v, rule.ResourceNames))
					}
				}
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		want := []string{"/nodes get []", "/nodes list []", "/nodes patch []", "/nodes watch []", "/nodes/status patch []"}
		if ns == agentNS {
			want = append(want, "coordination.k8s.io/leases create []", "coordination.k8s.io/leases get []", "coordination.k8s.io/leases update []")
		}
		if ns == webhookNS {
			want = append(want, "coordination.k8s.io/leases get ["+zone.WebhookReadsLease+"]")
		}
		// Everywhere; the event policy narrows it.
		want = append(want, "events.k8s.io/events create []")
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("RBAC lets the agent in namespace %s:\n  %s\nwant:\n  %s", ns, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// untilDenied calls write with 1, 2, ... until policy refuses it, and returns
// how long that took. Each call must make a write that RBAC allows and the
// policy refuses: one that passes, or is refused by RBAC, means RBAC or the
// policy is not in force yet.
func untilDenied(t *testing.T, policy, what string, write func(try int) error) time.Duration {
	t.Helper()
	try := 0
	return poll.Until(t, time.Minute, policy+" to refuse "+what, func() (bool, string) {
		try++
		err := write(try)
		switch {
		case err == nil:
			return false, "allowed"
		case deniedBy(err, policy):
			return true, ""
		case deniedByRBAC(err):
			return false, err.Error()
		}
		t.Fatalf("%s: %v", what, err)
		return false, ""
	})
}

// requirePolicyTypeChecked waits for the apiserver to type-check policy
// against the schemas of what it matches and fails on any warning: an
// expression that may fail at admission time.
func requirePolicyTypeChecked(ctx context.Context, t *testing.T, cs kubernetes.Interface, policy string) {
	t.Helper()
	poll.Until(t, time.Minute, policy+" to be type-checked", func() (bool, string) {
		p, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policy, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
			return false, "not checked yet"
		}
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Fatalf("type-checking %s warns: %+v", policy, w)
		}
		return true, ""
	})
}

// deniedBy tells a refusal by the ValidatingAdmissionPolicy policy from one for
// another reason (RBAC, NodeRestriction, another policy).
func deniedBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}

// deniedByRBAC tells an authorizer's refusal from a policy's.
func deniedByRBAC(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), " cannot ") &&
		!strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

// requireDeniedBy fails the test unless policy refused err's write, and says
// whether it did.
func requireDeniedBy(t *testing.T, policy, what string, err error) bool {
	t.Helper()
	return requireRefused(t, what, policy, err, func(err error) bool { return deniedBy(err, policy) })
}

func requireDeniedByRBAC(t *testing.T, what string, err error) {
	t.Helper()
	requireRefused(t, what, "RBAC", err, deniedByRBAC)
}

// requireRefused checks that a write was refused, and by whom: refusedBy
// tells that refusal (by) from any other.
func requireRefused(t *testing.T, what, by string, err error, refusedBy func(error) bool) bool {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s was allowed", what)
	case !refusedBy(err):
		t.Errorf("%s was refused, but not by %s: %v", what, by, err)
	default:
		t.Logf("%s refused: %v", what, err)
		return true
	}
	return false
}

func patchNode(ctx context.Context, cs kubernetes.Interface, node string, pt types.PatchType, patch, subresource string) error {
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err := cs.CoreV1().Nodes().Patch(ctx, node, pt, []byte(patch), metav1.PatchOptions{}, sub...)
	return err
}

// createLease creates Lease ns/name held by holder ("": no holder).
func createLease(ctx context.Context, cs kubernetes.Interface, ns, name, holder string) error {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](15), RenewTime: ptr.To(metav1.NowMicro())},
	}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
	return err
}

// createLeaseWith has cs create Lease ns/name held by holder, with annotations
// and labels.
func createLeaseWith(ctx context.Context, cs kubernetes.Interface, ns, name, holder string, annotations, labels map[string]string) error {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations, Labels: labels},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NowMicro())},
	}
	_, err := cs.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
	return err
}

// updateLease reads Lease ns/name as admin and has cs write it back renewed,
// held by holder.
func updateLease(ctx context.Context, t *testing.T, admin, cs kubernetes.Interface, ns, name, holder string) error {
	t.Helper()
	l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.RenewTime = ptr.To(metav1.NowMicro())
	_, err = cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// bindClusterRole creates ClusterRole name with rules and binds it to the
// ServiceAccount ns/sa.
func bindClusterRole(ctx context.Context, t *testing.T, admin kubernetes.Interface, name, ns, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bindRole creates Role ns/name with rules and binds it to the ServiceAccount
// ns/sa.
func bindRole(ctx context.Context, t *testing.T, admin kubernetes.Interface, ns, name, sa string, rules []rbacv1.PolicyRule) {
	t.Helper()
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
