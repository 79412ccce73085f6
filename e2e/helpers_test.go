package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
	"github.com/edgequorum/edgequorum/zoneport"
)

func annotation(t *testing.T, c kubernetes.Interface, node string) (zone.Annotation, bool) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return zone.Annotation{}, false
	}
	raw, ok := n.Annotations[zone.AnnotationKey]
	if !ok {
		return zone.Annotation{}, false
	}
	a, err := zone.ParseAnnotation(raw)
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	return a, true
}

// waitHealthy waits until every node of nodes carries a healthy verdict.
func waitHealthy(t *testing.T, c kubernetes.Interface, timeout time.Duration, nodes []string) time.Duration {
	t.Helper()
	want := map[string]zone.State{}
	for _, n := range nodes {
		want[n] = zone.Healthy
	}
	return waitStates(t, c, timeout, want)
}

// waitStates waits until every named node's annotation has the wanted state.
func waitStates(t *testing.T, c kubernetes.Interface, timeout time.Duration, want map[string]zone.State) time.Duration {
	t.Helper()
	return poll.Until(t, timeout, fmt.Sprintf("annotations %v", want), func() (bool, string) {
		for node, st := range want {
			a, ok := annotation(t, c, node)
			if !ok || a.State != st {
				return false, fmt.Sprintf("%s: %q", node, a.State)
			}
		}
		return true, ""
	})
}

// startZone starts a control plane (auditing writes) and a zone of agents; on
// failure the agents' log tails go to the test log.
func startZone(t *testing.T, opts testcluster.Options, zopts zonerun.Options) (*testcluster.Cluster, *zonerun.Zone) {
	t.Helper()
	testcluster.RequireBinaries(t)
	if opts.AuditPolicy == "" {
		opts.AuditPolicy = testcluster.WriteAuditPolicy
	}
	c := testcluster.StartT(t, opts)
	return c, startZoneOn(t, c, zopts)
}

// startZoneOn starts a zone of agents on a running control plane, stopped when
// the test ends; on failure the agents' log tails go to the test log.
func startZoneOn(t *testing.T, c *testcluster.Cluster, zopts zonerun.Options) *zonerun.Zone {
	t.Helper()
	if zopts.Dir == "" {
		zopts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	z, err := zonerun.Start(ctx, c, zopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		z.Stop()
		if t.Failed() {
			for _, a := range z.Agents() {
				t.Logf("---- agent %s (last 40 lines above debug) ----\n%s", a.Name, a.NoticeTail(40))
			}
		}
	})
	return z
}

// agentWrites returns the successful writes the agents made, by resource. The
// reachability check, a SelfSubjectReview, is a create that stores nothing: it
// takes the place of the GET /version it replaced and is not counted.
func agentWrites(t *testing.T, c *testcluster.Cluster) map[string][]testcluster.AuditEvent {
	t.Helper()
	events, err := c.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]testcluster.AuditEvent{}
	for _, e := range events {
		if e.User.Username != zonerun.AgentUser || e.ObjectRef == nil || e.ResponseStatus == nil || e.ResponseStatus.Code >= 300 ||
			e.ObjectRef.Resource == "selfsubjectreviews" {
			continue
		}
		out[e.ObjectRef.Resource] = append(out[e.ObjectRef.Resource], e)
	}
	return out
}

func names(z *zonerun.Zone) []string {
	var out []string
	for _, a := range z.Agents() {
		out = append(out, a.Name)
	}
	return out
}

// requireConditionShowsVerdict checks that node's EdgeQuorum condition, what
// `kubectl describe node` shows, says what its verdict annotation says.
func requireConditionShowsVerdict(t *testing.T, client kubernetes.Interface, node string) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey])
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	c, _ := corecond.FindCondition(n.Status.Conditions)
	if c == nil || !corecond.SameCondition(*c, corecond.Condition(a, c)) {
		t.Errorf("node %s: EdgeQuorum condition %+v does not show its verdict %+v", node, c, a)
	}
}

// requireLeaderEvent waits for the zone leader's Event of reason on node.
func requireLeaderEvent(t *testing.T, client kubernetes.Interface, node, reason string) {
	t.Helper()
	requireNodeEventBy(t, client, "edgequorum.io/agent", node, reason)
}

// requireNodeEventBy waits for an Event of reason on node that controller
// (edgequorum.io/agent, edgequorum.io/webhook) reported.
func requireNodeEventBy(t *testing.T, client kubernetes.Interface, controller, node, reason string) {
	t.Helper()
	poll.Until(t, time.Minute, "the "+controller+" "+reason+" Event on "+node, func() (bool, string) {
		list, err := client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.ReportingController == controller && e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events, none", len(list.Items))
	})
}

// requireStolenConditionRefused writes, with the agents' credentials as a
// stolen edge token holds them, an unsigned "unhealthy" verdict on node and
// the EdgeQuorum condition False that would show it, in one nodes/status
// write as a leader makes it. The webhook's nodestatus hook must refuse it,
// saying why, and the node keep its verdict and condition.
func requireStolenConditionRefused(t *testing.T, c *testcluster.Cluster, node string) {
	t.Helper()
	ctx := context.Background()
	stolen := stolenAgentClient(t, c)
	before, err := c.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := zone.ParseAnnotation(before.Annotations[zone.AnnotationKey])
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	lie := zone.Annotation{State: zone.Unhealthy, Zone: kept.Zone, Term: kept.Term, Leader: kept.Leader, At: time.Now(), Cons: kept.Members - 1, Members: kept.Members}
	raw, err := json.Marshal(lie)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{zone.AnnotationKey: string(raw)}},
		"status":   map[string]any{"conditions": []corev1.NodeCondition{corecond.Condition(lie, nil)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stolen.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err == nil || !strings.Contains(err.Error(), `admission webhook "nodestatus.webhook.edgequorum.io" denied the request`) ||
		!strings.Contains(err.Error(), "not one its zone signed (unsigned)") {
		t.Errorf("a stolen agent token's unsigned verdict and condition on %s: err %v, want refused by the nodestatus webhook as unsigned", node, err)
	} else {
		t.Logf("a stolen agent token's condition on %s refused: %v", node, err)
	}
	after, err := c.Client().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was, _ := corecond.FindCondition(before.Status.Conditions)
	now, _ := corecond.FindCondition(after.Status.Conditions)
	if after.Annotations[zone.AnnotationKey] != before.Annotations[zone.AnnotationKey] || !apiequality.Semantic.DeepEqual(was, now) {
		t.Errorf("node %s changed by the refused write: condition %+v, was %+v", node, now, was)
	}
}

// writeVerdictAs writes verdict a, signed by signer with key, on node together
// with the condition that shows it, through nodes/status and an agent token,
// as a thief holding signer's node key and its agent token would. It returns
// the apiserver's answer: the nodestatus webhook refuses a verdict it does
// not honour.
func writeVerdictAs(t *testing.T, c *testcluster.Cluster, node, signer string, key ed25519.PrivateKey, a zone.Annotation) error {
	t.Helper()
	stolen := stolenAgentClient(t, c)
	a.Sign(node, signer, key)
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Client().CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := corecond.FindCondition(n.Status.Conditions)
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{zone.AnnotationKey: string(raw)}},
		"status":   map[string]any{"conditions": []corev1.NodeCondition{corecond.Condition(a, prev)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stolen.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// writeUnsignedVerdict writes an unsigned "unhealthy" verdict on node's main
// resource with an agent token, as a thief may: the policies let any agent
// token write the annotation on any Node, and no hook refuses it there; only
// the webhook's judgement does.
func writeUnsignedVerdict(t *testing.T, c *testcluster.Cluster, node string) {
	t.Helper()
	ctx := context.Background()
	stolen := stolenAgentClient(t, c)
	kept, ok := annotation(t, c.Client(), node)
	if !ok {
		t.Fatalf("node %s carries no verdict", node)
	}
	lie := zone.Annotation{State: zone.Unhealthy, Zone: kept.Zone, Term: kept.Term, Leader: kept.Leader, At: time.Now(), Cons: kept.Members - 1, Members: kept.Members}
	raw, err := json.Marshal(lie)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{zone.AnnotationKey: string(raw)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stolen.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("a stolen agent token's verdict on %s: %v", node, err)
	}
}

// stolenAgentClient is a client holding an agent token, as a thief on any
// edge box would.
func stolenAgentClient(t *testing.T, c *testcluster.Cluster) kubernetes.Interface {
	t.Helper()
	cfg, err := c.UserConfig(zonerun.AgentUser, "system:serviceaccounts", "system:serviceaccounts:"+zone.DefaultLeaseNamespace, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	stolen, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stolen
}

// leaderKey is the zone's leader and its node key, as a thief on the
// leader's box holds it.
func leaderKey(t *testing.T, z *zonerun.Zone) (*zonerun.Agent, ed25519.PrivateKey) {
	t.Helper()
	l, err := z.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, err := zoneport.LoadOrCreateNodeKey(l.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return l, key
}

// zoneLeaseTerm is the term zone z's Lease is held under.
func zoneLeaseTerm(t *testing.T, client kubernetes.Interface, z string) uint64 {
	t.Helper()
	l, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(context.Background(), zone.LeaseName(z), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	term, err := strconv.ParseUint(l.Annotations[zone.LeaseTermAnnotation], 10, 64)
	if err != nil {
		t.Fatalf("zone Lease of %s: %v", z, err)
	}
	return term
}
