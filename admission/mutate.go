package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"
)

// mutator holds the mutation rules. Each method changes the object it is given
// in place and reports how much it changed; callers that need the original keep
// their own copy. The admission handlers and the repair loop share it, so the
// loop never re-sends an object the webhook would then leave alone.
type mutator struct {
	decider *Decider
	pods    corelisters.PodLister
	slack   time.Duration
	// agentUser is the agents' username: only its nodes/status writes are
	// judged on that route.
	agentUser string
}

// node strips node.kubernetes.io/unreachable:NoExecute from a vouched node whose
// Ready condition is Unknown, and returns how many such taints it removed. The
// NoSchedule twin stays: no new pods should land on a node the cloud cannot
// reach. not-ready stays too: that taint means the kubelet itself said so.
func (m *mutator) node(n *corev1.Node) (int, Decision, error) {
	if c := readyCondition(n.Status.Conditions); c == nil || c.Status != corev1.ConditionUnknown {
		return 0, Decision{}, nil
	}
	if !slices.ContainsFunc(n.Spec.Taints, isUnreachableNoExecute) {
		return 0, Decision{}, nil
	}
	dec, err := m.decider.Decide(n)
	if err != nil || !dec.Vouched {
		return 0, dec, err
	}
	before := len(n.Spec.Taints)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isUnreachableNoExecute)
	if len(n.Spec.Taints) == 0 {
		n.Spec.Taints = nil
	}
	return before - len(n.Spec.Taints), dec, nil
}

func isUnreachableNoExecute(t corev1.Taint) bool {
	return t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute
}

// endpointSlice marks ready and serving again the not-ready, non-terminating
// endpoints that qualify (see qualifies) and returns how many it changed. A nil
// ready condition already means ready, so only an explicit false is touched.
func (m *mutator) endpointSlice(s *discoveryv1.EndpointSlice, q *qualifier) (int, error) {
	revived, err := m.reviveEndpoints(s, q)
	return len(revived), err
}

// reviveEndpoints is endpointSlice that returns the indices of the endpoints
// it marked ready.
func (m *mutator) reviveEndpoints(s *discoveryv1.EndpointSlice, q *qualifier) ([]int, error) {
	var revived []int
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		c := ep.Conditions
		if c.Ready == nil || *c.Ready || (c.Terminating != nil && *c.Terminating) {
			continue
		}
		ok, err := q.qualifies(ep.NodeName, ep.TargetRef, s.Namespace)
		if err != nil {
			return nil, err
		}
		if ok {
			ep.Conditions.Ready = ptr.To(true)
			ep.Conditions.Serving = ptr.To(true)
			revived = append(revived, i)
		}
	}
	return revived, nil
}

// endpoints moves the qualifying notReadyAddresses of each subset into the same
// subset's addresses (same ports) and returns how many it moved.
func (m *mutator) endpoints(e *corev1.Endpoints, q *qualifier) (int, error) {
	n := 0
	for si := range e.Subsets {
		sub := &e.Subsets[si]
		var keep, moved []corev1.EndpointAddress
		for _, a := range sub.NotReadyAddresses {
			ok, err := q.qualifies(a.NodeName, a.TargetRef, e.Namespace)
			if err != nil {
				return 0, err
			}
			if ok {
				moved = append(moved, a)
			} else {
				keep = append(keep, a)
			}
		}
		if len(moved) == 0 {
			continue
		}
		n += len(moved)
		sub.NotReadyAddresses = keep
		sub.Addresses = append(sub.Addresses, moved...)
		// The endpoints controller keeps addresses sorted; so do we, so that
		// the object reads the same whoever wrote it last.
		slices.SortStableFunc(sub.Addresses, func(a, b corev1.EndpointAddress) int {
			return cmp.Or(cmp.Compare(a.IP, b.IP), cmp.Compare(targetUID(a), targetUID(b)))
		})
	}
	return n, nil
}

func targetUID(a corev1.EndpointAddress) string {
	if a.TargetRef == nil {
		return ""
	}
	return string(a.TargetRef.UID)
}

// qualifier answers qualifies for one object, deciding each node once: an
// EndpointSlice or Endpoints often lists many pods of the same node.
type qualifier struct {
	m     *mutator
	nodes map[string]nodeLoss
	// revived are the nodes of the endpoints qualifies said yes to, in
	// order.
	revived []string
}

// nodeLoss is what qualifies needs to know about a node: whether it is vouched
// and went Unknown, and when; and for its Event, its UID and why.
type nodeLoss struct {
	revivable bool
	lostAt    time.Time
	uid       types.UID
	dec       Decision
}

// events are the Events for the nodes whose endpoints were revived.
func (q *qualifier) events() []nodeEvent {
	out := make([]nodeEvent, 0, len(q.revived))
	for _, name := range q.revived {
		l := q.nodes[name]
		out = append(out, nodeEvent{node: name, uid: l.uid, reason: EventEndpointsRevive,
			note: fmt.Sprintf("marked the endpoints of pods on this node ready again: zone %s vouches for it (%s)", l.dec.Zone, l.dec.because())})
	}
	return out
}

func (m *mutator) newQualifier() *qualifier {
	return &qualifier{m: m, nodes: map[string]nodeLoss{}}
}

// qualifies says whether the endpoint of pod ref on node may be marked ready
// again: the node is vouched and its Ready condition is Unknown, and the pod,
// found in the cache on that node and not being deleted, turned not ready no
// earlier than its node went Unknown (minus the slack). That is the node
// lifecycle controller's doing; a pod that failed its own readiness probe
// before the link broke stays not ready. A pod missing from the cache is left
// alone.
//
// A pod the cache still holds as Ready qualifies too. The endpoint says not
// ready, so a newer pod status exists that the cache has not caught up with;
// and as the node's kubelet has not been heard from since before the node went
// Unknown (a whole grace period earlier), that status was written by the node
// lifecycle controller, seconds ago. Without this, an EndpointSlice update that
// races ahead of the pod's watch event would leave the endpoint not ready until
// the repair loop's next look.
func (q *qualifier) qualifies(nodeName *string, ref *corev1.ObjectReference, namespace string) (bool, error) {
	if nodeName == nil || *nodeName == "" || ref == nil || ref.Kind != "Pod" || ref.Name == "" {
		return false, nil
	}
	loss, err := q.node(*nodeName)
	if err != nil || !loss.revivable {
		return false, err
	}
	if ref.Namespace != "" {
		namespace = ref.Namespace
	}
	pod, err := q.m.pods.Pods(namespace).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read pod %s/%s from cache: %w", namespace, ref.Name, err)
	}
	if (ref.UID != "" && pod.UID != ref.UID) || pod.Spec.NodeName != *nodeName || pod.DeletionTimestamp != nil {
		return false, nil
	}
	c := podReadyCondition(pod.Status.Conditions)
	ok := c != nil && (c.Status == corev1.ConditionTrue ||
		(c.Status == corev1.ConditionFalse && !c.LastTransitionTime.Time.Before(loss.lostAt.Add(-q.m.slack))))
	if ok && !slices.Contains(q.revived, *nodeName) {
		q.revived = append(q.revived, *nodeName)
	}
	return ok, nil
}

func (q *qualifier) node(name string) (nodeLoss, error) {
	if l, ok := q.nodes[name]; ok {
		return l, nil
	}
	dec, node, err := q.m.decider.DecideNode(name)
	if err != nil {
		return nodeLoss{}, err
	}
	var l nodeLoss
	if dec.Vouched {
		// Without a transition time there is no "before the node went
		// Unknown" to compare with, so nothing qualifies.
		if c := readyCondition(node.Status.Conditions); c != nil && c.Status == corev1.ConditionUnknown && !c.LastTransitionTime.IsZero() {
			l = nodeLoss{revivable: true, lostAt: c.LastTransitionTime.Time, uid: node.UID, dec: dec}
		}
	}
	q.nodes[name] = l
	return l, nil
}

func readyCondition(cs []corev1.NodeCondition) *corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == corev1.NodeReady {
			return &cs[i]
		}
	}
	return nil
}

func podReadyCondition(cs []corev1.PodCondition) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == corev1.PodReady {
			return &cs[i]
		}
	}
	return nil
}
