package raftzone

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// contactHealth is an APIHealth whose last answer is known: Reachable says what
// the last finished call said, LastContact when the apiserver last answered.
type contactHealth struct {
	reachable bool
	last      time.Time
}

func (h contactHealth) Reachable() bool        { return h.reachable }
func (h contactHealth) LastContact() time.Time { return h.last }

// TestAPIOutageCountsFromLastAnswer: a leader whose health check hangs still
// reports "reachable" from its last finished call; the outage must count from
// the last answer, or the handover waits out the client's timeout on top.
func TestAPIOutageCountsFromLastAnswer(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	s := &Member{cfg: Config{APIServerFailTimeout: 5 * time.Second}, clock: clk}
	for _, tc := range []struct {
		name   string
		health APIHealth
		after  time.Duration
		want   bool
	}{
		{"answered just now", contactHealth{true, t0}, 0, true},
		{"call hanging, last answer within the timeout", contactHealth{true, t0}, 4 * time.Second, true},
		{"call hanging past the timeout", contactHealth{true, t0}, 5 * time.Second, false},
		{"call failed at once", contactHealth{false, t0}, time.Second, false},
		{"never answered, no call finished", contactHealth{false, time.Time{}}, time.Hour, false},
		{"no contact known: the last call decides", apiFlagFixed(true), time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.deps.APIHealth = tc.health
			got, last := s.apiReach(t0.Add(tc.after))
			if got != tc.want {
				t.Errorf("reachable %v, want %v", got, tc.want)
			}
			if c, ok := tc.health.(APIContact); ok && !last.Equal(c.LastContact()) {
				t.Errorf("last contact %s, want %s", last, c.LastContact())
			}
		})
	}
	// Reports and status say the same as placement.
	s.deps.APIHealth = contactHealth{true, t0}
	clk.SetTime(t0.Add(6 * time.Second))
	if s.reachesAPI() {
		t.Error("reachesAPI is true six seconds after the last answer")
	}
}

type apiFlagFixed bool

func (f apiFlagFixed) Reachable() bool { return bool(f) }
