package admission

import (
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

// resNodeStatus is the nodes/status route in the resource label: the agents'
// verdict writes, each with the EdgeQuorum condition that shows it.
const resNodeStatus = "nodestatus"

// decisionDenied: a guarded route refused the write.
const decisionDenied = "denied"

// transientRefusals are the refusals of a verdict that the zone's next Lease
// renewal can lift: a leader's first verdicts may reach the apiserver before
// the Lease that vouches for them reaches the webhook's cache. Denied, the
// leader writes again with back-off.
var transientRefusals = []Reason{ReasonNoZoneLease, ReasonTermAheadOfLease, ReasonSignerNotLeader, ReasonLeaderMismatch}

// nodeStatus judges an agent's nodes/status write (n, over old as stored):
// the zone leader's verdict annotation and the EdgeQuorum condition that
// shows it, in one write. Tools that cannot verify a signature
// (kubectl describe, kube-state-metrics, MachineHealthCheck) read the
// condition, so it must say only what the zone signed: a write that changes
// anything else in status, or carries a verdict the webhook does not honour,
// is denied (why, in deny), and a condition that does not show the honoured
// verdict exactly is set to the one that does (changed 1). The route's
// failurePolicy is Fail: a stolen agent token cannot write a condition while
// no replica answers.
func (m *mutator) nodeStatus(n, old *corev1.Node) (changed int, deny string, dec Decision, err error) {
	if other := otherStatus(n.Status, old.Status); other != "" {
		return 0, fmt.Sprintf("the edgequorum agent may change only the %s condition in the status of node %s; this write changes %s",
			zonek8s.ConditionType, n.Name, other), Decision{}, nil
	}
	newCond, i := corecond.FindCondition(n.Status.Conditions)
	oldCond, _ := corecond.FindCondition(old.Status.Conditions)
	if n.Annotations[zone.AnnotationKey] == old.Annotations[zone.AnnotationKey] &&
		apiequality.Semantic.DeepEqual(newCond, oldCond) {
		return 0, "", Decision{}, nil // neither the verdict nor its condition
	}
	if _, ok := n.Annotations[zone.AnnotationKey]; !ok {
		return 0, fmt.Sprintf("node %s carries no %s to show in its %s condition", n.Name, zone.AnnotationKey, zonek8s.ConditionType), Decision{}, nil
	}
	dec, judged, _, err := m.decider.decide(n)
	if err != nil {
		return 0, "", dec, err
	}
	if dec.Refused != "" || judged == nil {
		why := dec.Refused
		if why == "" {
			why = dec.Reason
		}
		deny = fmt.Sprintf("the %s annotation written on node %s is not one its zone signed (%s)", zone.AnnotationKey, n.Name, why)
		if slices.Contains(transientRefusals, why) {
			deny += "; the zone Lease that vouches for it has not reached the webhook yet, write it again"
		}
		return 0, deny, dec, nil
	}
	want := corecond.Condition(judged.verdict, oldCond)
	count := 0
	for _, c := range n.Status.Conditions {
		if c.Type == zonek8s.ConditionType {
			count++
		}
	}
	if count == 1 && apiequality.Semantic.DeepEqual(*newCond, want) {
		return 0, "", dec, nil
	}
	// Exactly one EdgeQuorum condition, where the first one was.
	if newCond == nil {
		n.Status.Conditions = append(n.Status.Conditions, want)
	} else {
		n.Status.Conditions[i] = want
		n.Status.Conditions = slices.Concat(n.Status.Conditions[:i+1],
			slices.DeleteFunc(n.Status.Conditions[i+1:], func(c corev1.NodeCondition) bool { return c.Type == zonek8s.ConditionType }))
	}
	return 1, "", dec, nil
}

// otherStatus names what differs between two node statuses besides their
// EdgeQuorum conditions, or is empty.
func otherStatus(a, b corev1.NodeStatus) string {
	isQuorum := func(c corev1.NodeCondition) bool { return c.Type == zonek8s.ConditionType }
	ac := slices.DeleteFunc(slices.Clone(a.Conditions), isQuorum)
	bc := slices.DeleteFunc(slices.Clone(b.Conditions), isQuorum)
	a.Conditions, b.Conditions = nil, nil
	switch {
	case !apiequality.Semantic.DeepEqual(ac, bc):
		return "status.conditions other than " + string(zonek8s.ConditionType)
	case !apiequality.Semantic.DeepEqual(a, b):
		return "status fields other than conditions"
	}
	return ""
}

func mutateNodeStatus(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error) {
	var n, old corev1.Node
	if err := decodeObject(req.Object.Raw, &n); err != nil {
		return mutation{}, err
	}
	if req.UserInfo.Username != m.agentUser {
		// Not the agent: not ours to judge (the configuration's
		// matchConditions should not have sent it).
		return mutation{attrs: []any{"user", req.UserInfo.Username}}, nil
	}
	if err := decodeObject(req.OldObject.Raw, &old); err != nil {
		return mutation{}, fmt.Errorf("old object: %w", err)
	}
	var deny string
	mut, err := encodePair(&n, func(n *corev1.Node) (int, []any, []nodeEvent, error) {
		changed, why, dec, err := m.nodeStatus(n, &old)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%w: %w", errCache, err)
		}
		deny = why
		return changed, []any{"node", n.Name, "zone", dec.Zone, "because", dec.because()}, nil, nil
	})
	mut.deny = deny
	return mut, err
}
