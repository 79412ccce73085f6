package admission

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

// TestNodeStatusShowsOnlySignedVerdicts: through nodes/status the agent
// writes a verdict and the EdgeQuorum condition that shows it. The condition
// is what tools that cannot verify a signature read, so the webhook lets
// through only a verdict its zone signed, sets the condition to exactly the
// one that shows it, and denies anything else in status. edge-a4 is vouched
// by zone-a's fresh Lease and carries no condition yet.
func TestNodeStatusShowsOnlySignedVerdicts(t *testing.T) {
	d := newTestDecider(t, nil, testCluster()...)
	m := &mutator{decider: d, pods: d.caches.Pods, slack: 5 * time.Second, agentUser: DefaultAgentUser}
	later := nodeLost.Add(time.Minute)
	unhealthy := zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: testTerm, Leader: testLeaders["zone-a"], At: later, Pros: 0, Cons: 2, Members: 3}
	stored := func() *corev1.Node {
		n, err := d.caches.Nodes.Get("edge-a4")
		if err != nil {
			t.Fatal(err)
		}
		return n.DeepCopy()
	}
	// write is the leader's write of a over the stored node, with the
	// condition that shows it.
	write := func(a zone.Annotation) *corev1.Node {
		n := stored()
		n.Annotations[zone.AnnotationKey] = signedVerdict("edge-a4", a)
		n.Status.Conditions = append(n.Status.Conditions, corecond.Condition(a, nil))
		return n
	}
	unsigned := func(n *corev1.Node) {
		b, _ := json.Marshal(unhealthy)
		n.Annotations[zone.AnnotationKey] = string(b)
	}
	// First, as the decider keeps the newest verdict it judged: nothing
	// about the verdict changes, nothing to judge.
	if changed, deny, _, err := m.nodeStatus(stored(), stored()); changed != 0 || deny != "" || err != nil {
		t.Errorf("an unchanged node: changed %d, deny %q, err %v", changed, deny, err)
	}
	// The verdict stands and the condition is written alone (a leader
	// showing a verdict written before the condition existed).
	n := stored()
	a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = append(n.Status.Conditions, corecond.Condition(a, nil))
	if changed, deny, _, err := m.nodeStatus(n, stored()); changed != 0 || deny != "" || err != nil {
		t.Errorf("the condition of the standing verdict alone: changed %d, deny %q, err %v", changed, deny, err)
	}

	tests := []struct {
		name    string
		change  func(n *corev1.Node)
		changed bool
		deny    string
	}{
		{"the leader's verdict with its condition", nil, false, ""},
		{"a condition that says otherwise", func(n *corev1.Node) {
			c, _ := corecond.FindCondition(n.Status.Conditions)
			c.Status, c.Reason = corev1.ConditionTrue, zonek8s.ConditionReasonPeersReach
		}, true, ""},
		{"a condition with another message", func(n *corev1.Node) {
			c, _ := corecond.FindCondition(n.Status.Conditions)
			c.Message = "all is well"
		}, true, ""},
		{"the verdict without its condition", func(n *corev1.Node) {
			n.Status.Conditions = n.Status.Conditions[:1]
		}, true, ""},
		{"two conditions", func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: zonek8s.ConditionType, Status: corev1.ConditionTrue})
		}, true, ""},
		{"an unsigned verdict", unsigned, false, "not one its zone signed (unsigned)"},
		{"a verdict of a term the zone Lease has not reached", func(n *corev1.Node) {
			a := unhealthy
			a.Term = testTerm + 1
			n.Annotations[zone.AnnotationKey] = signedVerdict("edge-a4", a)
		}, false, "term-ahead-of-lease); the zone Lease that vouches for it has not reached the webhook yet"},
		{"a verdict signed by another member", func(n *corev1.Node) {
			a := unhealthy
			a.Sign("edge-a4", "edge-a1", testKey("edge-a1"))
			b, _ := json.Marshal(a)
			n.Annotations[zone.AnnotationKey] = string(b)
		}, false, "signer-not-leader"},
		{"marking the node Ready False", func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}, false, "changes status.conditions other than EdgeQuorum"},
		{"another address", func(n *corev1.Node) {
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.9"}}
		}, false, "changes status fields other than conditions"},
		{"the verdict removed, a condition left", func(n *corev1.Node) {
			delete(n.Annotations, zone.AnnotationKey)
		}, false, "carries no edgequorum.io/verdict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := write(unhealthy)
			if tt.change != nil {
				tt.change(n)
			}
			changed, deny, dec, err := m.nodeStatus(n, stored())
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(deny, tt.deny) || (tt.deny == "" && deny != "") {
				t.Fatalf("deny %q (decision %+v), want %q", deny, dec, tt.deny)
			}
			if got := changed == 1; got != tt.changed {
				t.Fatalf("changed = %v, want %v", got, tt.changed)
			}
			if deny != "" {
				return
			}
			var quorum []corev1.NodeCondition
			for _, c := range n.Status.Conditions {
				if c.Type == zonek8s.ConditionType {
					quorum = append(quorum, c)
				}
			}
			if want := corecond.Condition(unhealthy, nil); len(quorum) != 1 || !apiequality.Semantic.DeepEqual(quorum[0], want) {
				t.Errorf("EdgeQuorum conditions %+v, want exactly %+v", quorum, want)
			}
		})
	}

}

// TestNodeStatusRoute: the nodestatus route refuses what it denies, and what
// it cannot check, with a 403 the leader's writer retries; it judges the
// agents' writes only, and in dry-run refuses nothing.
func TestNodeStatusRoute(t *testing.T) {
	review := func(user string, change func(n *corev1.Node)) []byte {
		old := testNode("edge-a4", "zone-a", zone.Healthy, corev1.ConditionTrue)
		n := old.DeepCopy()
		change(n)
		return nodeStatusReviewBody(t, user, n, old)
	}
	ready := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	respond := func(env *testEnv, body []byte) *admissionv1.AdmissionResponse {
		t.Helper()
		rec := env.post(t, "/mutate/nodestatus", body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("no response: %v %s", err, rec.Body)
		}
		return out.Response
	}

	env := newWebhook(t, nil)
	resp := respond(env, review(DefaultAgentUser, ready))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "could not check") {
		t.Errorf("before sync: %+v, want refused: it cannot check", resp)
	}
	stop := env.start(t)
	defer stop()
	resp = respond(env, review(DefaultAgentUser, ready))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "changes status.conditions other than EdgeQuorum") {
		t.Errorf("the agent marking its node not ready: %+v, want refused, saying why", resp)
	}
	if got := counter(t, env.w.metrics.requests.WithLabelValues(resNodeStatus, decisionDenied)); got != 1 {
		t.Errorf("requests_total{nodestatus,denied} = %v, want 1", got)
	}
	if resp := respond(env, review("system:node:edge-a4", ready)); !resp.Allowed || resp.Patch != nil {
		t.Errorf("a kubelet's write: %+v, want allowed unchanged (not the agent's)", resp)
	}

	dry := startWebhook(t, func(c *Config) { c.DryRun = true })
	if resp := respond(dry, review(DefaultAgentUser, ready)); !resp.Allowed {
		t.Errorf("dry-run: %+v, want allowed", resp)
	}
	if got := counter(t, dry.w.metrics.requests.WithLabelValues(resNodeStatus, decisionDryRun)); got != 1 {
		t.Errorf("dry-run: requests_total{nodestatus,dry_run} = %v, want 1", got)
	}
}

// nodeStatusReviewBody is the AdmissionReview the apiserver sends for user's
// nodes/status write of n over old.
func nodeStatusReviewBody(tb testing.TB, user string, n, old *corev1.Node) []byte {
	tb.Helper()
	raw := func(o *corev1.Node) runtime.RawExtension {
		b, err := json.Marshal(o)
		if err != nil {
			tb.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-nodestatus", Kind: nodeStatusReview.kind, Operation: admissionv1.Update,
			Name: n.Name, SubResource: "status", UserInfo: authenticationv1.UserInfo{Username: user},
			Object: raw(n), OldObject: raw(old)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
