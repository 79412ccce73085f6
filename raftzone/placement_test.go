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

// TestHandoverPacer: handovers that do not stick (leadership back within
// moments, in a new term) are spaced by a pause that doubles up to
// handoverBackoffMax fail timeouts; one after a quiet spell goes at once, so a
// single cut is handed over within HandoverBound.
func TestHandoverPacer(t *testing.T) {
	const fail = 5 * time.Second
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var p handoverPacer
	steps := []struct {
		at       time.Duration
		want     bool
		wantWait time.Duration // when refused: time until the next may
	}{
		{0, true, 0},                          // first cut: at once
		{time.Second, false, 4 * time.Second}, // leadership back a second later
		{5 * time.Second, true, 0},            // pause now 10 s
		{14 * time.Second, false, time.Second},
		{15 * time.Second, true, 0}, // pause now 20 s
		{35 * time.Second, true, 0}, // 40 s
		{75 * time.Second, true, 0}, // 80 s, the cap
		{155 * time.Second, true, 0},
		{234 * time.Second, false, time.Second}, // still 80 s, not 160
		{235 * time.Second, true, 0},
		{315 * time.Second, true, 0}, // still 80 s
		{475 * time.Second, true, 0}, // after a quiet 160 s: back to 5 s
		{479 * time.Second, false, time.Second},
		{480 * time.Second, true, 0},
	}
	for _, st := range steps {
		wait, ok := p.try(t0.Add(st.at), fail)
		if ok != st.want || wait != st.wantWait {
			t.Fatalf("at +%s: try = (%s, %v), want (%s, %v)", st.at, wait, ok, st.wantWait, st.want)
		}
	}
}
