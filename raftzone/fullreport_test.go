package raftzone

import (
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// TestAFullReportRepeatsWhatTheZoneCommitted: a member's report carries only
// what differs from its own replica's row, except every fullReportPeriod,
// when it carries every result: a leader whose replica dropped a result (a
// peer its view had not confirmed yet) gets it again, and judges that peer.
func TestAFullReportRepeatsWhatTheZoneCommitted(t *testing.T) {
	row := map[string]store.Cell{"b": {OK: true, Score: 100}, "c": {OK: false}}
	results := []zone.Result{{Peer: "c", OK: false}, {Peer: "a", OK: true, Score: 100}, {Peer: "b", OK: true, Score: 100}, {Peer: "d", OK: true, Score: 50}}
	peers := func(rs []zone.Result) (out []string) {
		for _, r := range rs {
			out = append(out, r.Peer)
		}
		return out
	}
	if got := peers(toReport("a", row, results, false)); len(got) != 1 || got[0] != "d" {
		t.Errorf("a report of differences carries %v, want [d], what the row lacks", got)
	}
	if got := peers(toReport("a", row, results, true)); len(got) != 3 || got[0] != "b" || got[1] != "c" || got[2] != "d" {
		t.Errorf("a full report carries %v, want [b c d]: every peer, sorted, never itself", got)
	}

	m := &Member{}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, false}, {fullReportPeriod - time.Millisecond, false}, {fullReportPeriod, true}, {fullReportPeriod + 2*time.Second, false}} {
		if got := m.fullReportDue(start.Add(step.at)); got != step.want {
			t.Errorf("full report due at +%s: %v, want %v", step.at, got, step.want)
		}
	}
}
