package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// replicated is a Deployment with one pod on each zone node and a
// PodDisruptionBudget that allows one disruption while all are healthy: what
// an operator watches to know whether a workload is available.
type replicated struct {
	name     string
	replicas int32
}

// deployReplicated creates the Deployment and its budget, binds each pod the
// ReplicaSet controller creates to a node that has none yet (the harness runs
// no scheduler; the binding subresource is what one would write), and waits
// until the Deployment is available and the budget allows one disruption.
func deployReplicated(t *testing.T, c kubernetes.Interface, name string, nodes []string) *replicated {
	t.Helper()
	ctx := context.Background()
	r := &replicated{name: name, replicas: int32(len(nodes))}
	labels := map[string]string{"app": name}
	tol := []corev1.Toleration{
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](tolerationSeconds)},
	}
	if _, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &r.replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Tolerations: tol,
					Containers: []corev1.Container{{Name: "app", Image: "app"}}},
			},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PolicyV1().PodDisruptionBudgets("default").Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(r.replicas - 1)),
			Selector:     &metav1.LabelSelector{MatchLabels: labels},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, name+"'s pods bound, one per node", func() (bool, string) {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		taken := map[string]bool{}
		var unbound []corev1.Pod
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				taken[p.Spec.NodeName] = true
			} else if p.DeletionTimestamp == nil {
				unbound = append(unbound, p)
			}
		}
		for _, p := range unbound {
			for _, n := range nodes {
				if taken[n] {
					continue
				}
				err := c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: n},
				}, metav1.CreateOptions{})
				if err == nil {
					taken[n] = true
				}
				break
			}
		}
		return len(taken) == len(nodes), fmt.Sprintf("%d of %d nodes have a pod", len(taken), len(nodes))
	})
	poll.Until(t, 2*time.Minute, name+" available, its budget allowing one disruption", func() (bool, string) {
		return r.available(t, c)
	})
	return r
}

// available reports whether every replica counts as available and the budget
// sees every pod healthy, allowing one disruption.
func (r *replicated) available(t *testing.T, c kubernetes.Interface) (bool, string) {
	t.Helper()
	ctx := context.Background()
	d, err := c.AppsV1().Deployments("default").Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb, err := c.PolicyV1().PodDisruptionBudgets("default").Get(ctx, r.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ok := d.Status.AvailableReplicas == r.replicas && pdb.Status.CurrentHealthy == r.replicas && pdb.Status.DisruptionsAllowed == 1
	return ok, fmt.Sprintf("Deployment %d/%d available; budget %d/%d healthy, %d disruptions allowed",
		d.Status.AvailableReplicas, r.replicas, pdb.Status.CurrentHealthy, r.replicas, pdb.Status.DisruptionsAllowed)
}

// podsReady reports whether every pod labelled app=name is stored Ready.
func podsReady(t *testing.T, c kubernetes.Interface, name string) (bool, string) {
	t.Helper()
	pods, err := c.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		ready := corev1.ConditionUnknown
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				ready = cond.Status
			}
		}
		if ready != corev1.ConditionTrue {
			return false, fmt.Sprintf("pod %s on %s is Ready=%s", p.Name, p.Spec.NodeName, ready)
		}
	}
	return true, ""
}

// webhookCalls reads from the apiserver's own metrics how often it called the
// named webhook (apiserver_admission_webhook_request_total) and how many
// requests its matchConditions kept from calling it
// (apiserver_admission_match_condition_exclusions_total), summed over every
// other label.
func webhookCalls(t *testing.T, c kubernetes.Interface, webhook string) (calls, excluded float64) {
	t.Helper()
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("apiserver /metrics: %v", err)
	}
	sum := func(metric string) float64 {
		total := 0.0
		s := bufio.NewScanner(bytes.NewReader(raw))
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			line := s.Text()
			if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, `name="`+webhook+`"`) {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("apiserver metric line %q: %v", line, err)
			}
			total += v
		}
		return total
	}
	return sum("apiserver_admission_webhook_request_total"), sum("apiserver_admission_match_condition_exclusions_total")
}

// podStatusWrites counts the pods/status updates the node lifecycle
// controller made since since, by the audit log.
func podStatusWrites(t *testing.T, c *testcluster.Cluster, since time.Time) int {
	t.Helper()
	events, err := c.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events {
		if e.Received.After(since) && e.User.Username == "system:serviceaccount:kube-system:node-controller" &&
			e.ObjectRef != nil && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "status" {
			n++
		}
	}
	return n
}

// requireNodeEvents checks the webhook's Events on nodes: one of each reason
// in every on each node, and of each reason in some on at least one node, and
// never two of the same reason on one node, however often the change was
// repeated. It logs how many repeats they stand for. The node lifecycle
// controller marks every pod of a node that goes Unknown at once, but taints
// the nodes of a fully disrupted zone one at a time (--node-eviction-rate), so
// a taint kept off is not yet due on every node.
func requireNodeEvents(t *testing.T, c kubernetes.Interface, nodes []string, every, some []string) {
	t.Helper()
	var found map[string][]eventsv1.Event
	poll.Until(t, time.Minute, "the webhook's Events on the zone's Nodes", func() (bool, string) {
		list, err := c.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		found = map[string][]eventsv1.Event{}
		for _, e := range list.Items {
			if e.ReportingController == "edgequorum.io/webhook" && e.Regarding.Kind == "Node" {
				key := e.Regarding.Name + "/" + e.Reason
				found[key] = append(found[key], e)
			}
		}
		for _, r := range every {
			for _, node := range nodes {
				if len(found[node+"/"+r]) == 0 {
					return false, fmt.Sprintf("%d kinds of Event on nodes; none %s on %s", len(found), r, node)
				}
			}
		}
		for _, r := range some {
			if !slices.ContainsFunc(nodes, func(node string) bool { return len(found[node+"/"+r]) > 0 }) {
				return false, fmt.Sprintf("%d kinds of Event on nodes; no %s yet", len(found), r)
			}
		}
		return true, ""
	})
	repeats := 0
	for key, evs := range found {
		if len(evs) != 1 {
			t.Errorf("%d Events %s, want one folding the repeats", len(evs), key)
		}
		repeats++
		if s := evs[0].Series; s != nil {
			repeats += int(s.Count) - 1
		}
	}
	t.Logf("the webhook's Events on the zone's Nodes: %d, standing for %d changes so far", len(found), repeats)
}
