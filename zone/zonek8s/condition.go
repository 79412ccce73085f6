package zonek8s

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/zone"
)

// ConditionType is the Node condition that shows the zone's verdict where
// `kubectl describe node`, kube-state-metrics and node-readiness tooling look;
// none of them read a JSON annotation. The zone leader writes it together
// with the verdict annotation, in one nodes/status write. Untyped, so that it
// compares with core/v1's condition type and with NodeCondition's alike.
const ConditionType = "EdgeQuorum"

// Reasons of the EdgeQuorum condition.
const (
	// ConditionReasonPeersReach: a quorum of the node's zone peers reach it.
	ConditionReasonPeersReach = "PeersReachNode"
	// ConditionReasonPeersCannotReach: a quorum of its peers fail to reach it.
	ConditionReasonPeersCannotReach = "PeersCannotReachNode"
	// ConditionReasonNoQuorum: too few fresh reports to decide either way.
	ConditionReasonNoQuorum = "NoQuorum"
)

// A Node condition's statuses, as core/v1 spells them.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// NodeCondition is a core/v1 NodeCondition, field for field and with the
// same JSON, in a type of this package's own. The edge agent must not link
// k8s.io/api/core/v1 (its init registers every core type, and their codecs
// are then a tenth of the agent's binary), so the condition is computed on
// this type; the webhook converts core/v1's to it (package corecond) and
// checks a write with the same code the leader wrote it with.
type NodeCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	LastHeartbeatTime  metav1.Time `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
}

// Condition is the EdgeQuorum condition that shows verdict a. prev is the
// condition the Node carries, if any: its transition time is kept while the
// status stays. The result depends on a and prev alone, so the leader that
// writes it and the webhook that checks it agree on every field.
func Condition(a zone.Annotation, prev *NodeCondition) NodeCondition {
	status, reason := ConditionUnknown, ConditionReasonNoQuorum
	switch a.State {
	case zone.Healthy:
		status, reason = ConditionTrue, ConditionReasonPeersReach
	case zone.Unhealthy:
		status, reason = ConditionFalse, ConditionReasonPeersCannotReach
	}
	// Stored with second precision: round it here, so that a condition read
	// back compares equal to the one computed.
	at := metav1.NewTime(a.At.UTC()).Rfc3339Copy()
	c := NodeCondition{
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
func FindCondition(conditions []NodeCondition) (*NodeCondition, int) {
	for i := range conditions {
		if conditions[i].Type == ConditionType {
			return &conditions[i], i
		}
	}
	return nil, -1
}

// SameCondition reports whether a and b show the same verdict the same way:
// every field but the transition time, which only the order of writes decides.
func SameCondition(a, b NodeCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastHeartbeatTime.Equal(&b.LastHeartbeatTime)
}
