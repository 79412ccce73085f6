package corecond

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// TestConditionIsCoreV1OnTheWire: the leader writes zonek8s's condition and
// the webhook reads core/v1's; both must be the same JSON, field for field,
// and survive the conversion both ways.
func TestConditionIsCoreV1OnTheWire(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC)
	for _, a := range []zone.Annotation{
		{Zone: "z", State: zone.Healthy, At: at, Pros: 2, Members: 3, Leader: "n1", Term: 4},
		{Zone: "z", State: zone.Unhealthy, At: at, Cons: 2, Members: 3, Leader: "n2", Term: 5},
		{Zone: "z", State: zone.Unknown, At: at},
	} {
		ours := zonek8s.Condition(a, nil)
		core := Condition(a, nil)
		got, err := json.Marshal(ours)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(core)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: zonek8s writes %s, core/v1 %s", a.State, got, want)
		}
		var back corev1.NodeCondition
		if err := json.Unmarshal(got, &back); err != nil || !SameCondition(back, core) || !zonek8s.SameCondition(FromCore(back), ours) ||
			!back.LastTransitionTime.Equal(&ours.LastTransitionTime) {
			t.Errorf("%s: %s read as core/v1 %+v (%v), want %+v", a.State, got, back, err, core)
		}
	}
	// A condition read back keeps its transition time while the status stays.
	prev := Condition(zone.Annotation{Zone: "z", State: zone.Healthy, At: at}, nil)
	later := Condition(zone.Annotation{Zone: "z", State: zone.Healthy, At: at.Add(time.Minute)}, &prev)
	if !later.LastTransitionTime.Equal(&prev.LastTransitionTime) {
		t.Errorf("transition moved from %v to %v with the status unchanged", prev.LastTransitionTime, later.LastTransitionTime)
	}
	if c, i := FindCondition([]corev1.NodeCondition{{Type: corev1.NodeReady}, later}); i != 1 || c.Type != zonek8s.ConditionType {
		t.Errorf("FindCondition = %v, %d", c, i)
	}
}
