package zonek8s

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/zone"
)

// ConditionType is the Node condition that shows the zone's verdict where
// `kubectl describe node`, kube-state-metrics and node-readiness tooling look;
// none of them read a JSON annotation. The zone leader writes it together
// with the verdict annotation, in one nodes/status write.
const ConditionType corev1.NodeConditionType = "EdgeQuorum"

// Reasons of the EdgeQuorum condition.
const (
	// ConditionReasonPeersReach: a quorum of the node's zone peers reach it.
	ConditionReasonPeersReach = "PeersReachNode"
	// ConditionReasonPeersCannotReach: a quorum of its peers fail to reach it.
	ConditionReasonPeersCannotReach = "PeersCannotReachNode"
	// ConditionReasonNoQuorum: too few fresh reports to decide either way.
	ConditionReasonNoQuorum = "NoQuorum"
)

// Condition is the EdgeQuorum condition that shows verdict a. prev is the
// condition the Node carries, if any: its transition time is kept while the
// status stays. The result depends on a and prev alone, so the leader that
// writes it and the webhook that checks it agree on every field.
func Condition(a zone.Annotation, prev *corev1.NodeCondition) corev1.NodeCondition {
	status, reason := corev1.ConditionUnknown, ConditionReasonNoQuorum
	switch a.State {
	case zone.Healthy:
		status, reason = corev1.ConditionTrue, ConditionReasonPeersReach
	case zone.Unhealthy:
		status, reason = corev1.ConditionFalse, ConditionReasonPeersCannotReach
	}
	// Stored with second precision: round it here, so that a condition read
	// back compares equal to the one computed.
	at := metav1.NewTime(a.At.UTC()).Rfc3339Copy()
	c := corev1.NodeCondition{
		Type:   ConditionType,
		Status: status,
		Reason: reason,
		Message: fmt.Sprintf("zone %s: %d of %d peers reach it, %d do not (leader %s, term %d)",
			a.Zone, a.Pros, max(a.Members-1, 0), a.Cons, a.Leader, a.Term),
		LastHeartbeatTime:  at,
		LastTransitionTime: at,
	}
	if prev != nil && prev.Status == status && !prev.LastTransitionTime.IsZero() {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	return c
}

// FindCondition returns the EdgeQuorum condition among conditions and its
// index, or nil and -1.
func FindCondition(conditions []corev1.NodeCondition) (*corev1.NodeCondition, int) {
	for i := range conditions {
		if conditions[i].Type == ConditionType {
			return &conditions[i], i
		}
	}
	return nil, -1
}

// SameCondition reports whether a and b show the same verdict the same way:
// every field but the transition time, which only the order of writes decides.
func SameCondition(a, b corev1.NodeCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastHeartbeatTime.Equal(&b.LastHeartbeatTime)
}
