// Package corecond shows the EdgeQuorum condition (package zonek8s) in
// client-go's core/v1 types, for the code that holds core/v1 Nodes: the
// cloud webhook, which checks a leader's nodes/status write with the code the
// leader wrote it with, the tests and the benchmarks.
//
// It owns only these conversions. The edge agent must not import it: it links
// k8s.io/api/core/v1, which the agent keeps out of its binary
// (internal/layering checks it).
package corecond

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// Condition is zonek8s.Condition on core/v1 conditions.
func Condition(a zone.Annotation, prev *corev1.NodeCondition) corev1.NodeCondition {
	var p *zonek8s.NodeCondition
	if prev != nil {
		c := FromCore(*prev)
		p = &c
	}
	return ToCore(zonek8s.Condition(a, p))
}

// FindCondition returns the EdgeQuorum condition among conditions and its
// index, or nil and -1.
func FindCondition(conditions []corev1.NodeCondition) (*corev1.NodeCondition, int) {
	for i := range conditions {
		if conditions[i].Type == zonek8s.ConditionType {
			return &conditions[i], i
		}
	}
	return nil, -1
}

// SameCondition is zonek8s.SameCondition on core/v1 conditions.
func SameCondition(a, b corev1.NodeCondition) bool {
	return zonek8s.SameCondition(FromCore(a), FromCore(b))
}

// FromCore is c in zonek8s's type.
func FromCore(c corev1.NodeCondition) zonek8s.NodeCondition {
	return zonek8s.NodeCondition{Type: string(c.Type), Status: string(c.Status),
		LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime,
		Reason: c.Reason, Message: c.Message}
}

// ToCore is c in core/v1's type.
func ToCore(c zonek8s.NodeCondition) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
		LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime,
		Reason: c.Reason, Message: c.Message}
}
