package zonek8s

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// TestConditionShowsTheVerdict: the condition says what the verdict says, and
// keeps its transition time only while its status stays, so `kubectl describe`
// tells since when a node is judged as it is.
func TestConditionShowsTheVerdict(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 400_000_000, time.UTC)
	a := zone.Annotation{Zone: "z", State: zone.Healthy, At: at, Members: 3, Pros: 2, Leader: "n1", Term: 4}
	c := Condition(a, nil)
	if c.Type != ConditionType || c.Status != ConditionTrue || c.Reason != ConditionReasonPeersReach {
		t.Fatalf("healthy verdict: %+v", c)
	}
	if !c.LastTransitionTime.Equal(&metav1.Time{Time: at.Truncate(time.Second)}) {
		t.Errorf("transition time %v, want the verdict's time to the second", c.LastTransitionTime)
	}

	later := a
	later.At = at.Add(time.Minute)
	if c2 := Condition(later, &c); !c2.LastTransitionTime.Equal(&c.LastTransitionTime) || SameCondition(c, c2) {
		t.Errorf("a later healthy verdict: %+v; want the transition time kept and the heartbeat moved", c2)
	}
	down := later
	down.State, down.Pros, down.Cons = zone.Unhealthy, 0, 2
	c3 := Condition(down, &c)
	if c3.Status != ConditionFalse || c3.Reason != ConditionReasonPeersCannotReach || c3.LastTransitionTime.Equal(&c.LastTransitionTime) {
		t.Errorf("an unhealthy verdict after a healthy one: %+v", c3)
	}
	if unknown := Condition(zone.Annotation{Zone: "z", State: zone.Unknown, At: at}, nil); unknown.Status != ConditionUnknown ||
		unknown.Reason != ConditionReasonNoQuorum {
		t.Errorf("an unknown verdict: %+v", unknown)
	}

	conds := []NodeCondition{{Type: "Ready"}, c3}
	if got, i := FindCondition(conds); got == nil || i != 1 || !SameCondition(*got, c3) {
		t.Errorf("FindCondition: %v at %d", got, i)
	}
	if got, i := FindCondition(conds[:1]); got != nil || i != -1 {
		t.Errorf("FindCondition without one: %v at %d", got, i)
	}
}

// TestLeaseClaimOfReadsWhatIsThere: the claim is read as written, and a Lease
// missing parts reads as a claim the webhook then refuses, never as a panic.
func TestLeaseClaimOfReadsWhatIsThere(t *testing.T) {
	renewed := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ZoneLabel: "z"},
			Annotations: map[string]string{zone.LeaseTermAnnotation: "7", zone.LeaseEndorsesAnnotation: "n2:abc"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](17),
			RenewTime: &metav1.MicroTime{Time: renewed}},
	}
	want := zone.LeaseClaim{Zone: "z", Holder: "n1", Term: 7, Renewed: renewed, DurationSeconds: 17, Endorses: "n2:abc"}
	if got := LeaseClaimOf(l); got != want {
		t.Errorf("LeaseClaimOf = %+v, want %+v", got, want)
	}
	// Its format level is read with it: a quiet renewal is one of the
	// quiet format.
	l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(zone.LeaseQuietFormat)
	want.Format = zone.LeaseQuietFormat
	if got := LeaseClaimOf(l); got != want || !got.Quiet() {
		t.Errorf("LeaseClaimOf of a quiet Lease = %+v, want %+v, quiet", got, want)
	}
	l.Annotations[zone.LeaseFormatAnnotation] = "1"
	if got := LeaseClaimOf(l); got.Format != skew.Level1 || got.Quiet() {
		t.Errorf("LeaseClaimOf of a format-1 Lease = %+v", got)
	}
	delete(l.Annotations, zone.LeaseFormatAnnotation)
	l.Annotations[zone.LeaseTermAnnotation] = "not a term"
	l.Spec = coordinationv1.LeaseSpec{}
	if got := LeaseClaimOf(l); got != (zone.LeaseClaim{Zone: "z", Endorses: "n2:abc"}) {
		t.Errorf("LeaseClaimOf of a bare Lease = %+v", got)
	}
}
