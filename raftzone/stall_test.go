package raftzone

import (
	"testing"
	"time"
)

// TestStallWatch: a leader is given up once the member's reports have gone
// uncommitted for the timeout under that same leader and term; a commit, a new
// leader or a new term starts the wait again, and a member that follows nobody
// waits for no one.
func TestStallWatch(t *testing.T) {
	const timeout = 30 * time.Second
	now := time.Unix(1_800_000_000, 0)
	var w stallWatch
	step := func(d time.Duration, term uint64, leader string, committed, wantStall bool) {
		t.Helper()
		now = now.Add(d)
		if _, stall := w.reported(now, term, leader, committed, timeout); stall != wantStall {
			t.Fatalf("at +%s term %d leader %q committed %v: stall %v, want %v", d, term, leader, committed, stall, wantStall)
		}
	}
	step(0, 3, "L", true, false)
	step(20*time.Second, 3, "L", false, false)
	step(5*time.Second, 3, "L", true, false) // a commit starts the wait again
	step(25*time.Second, 3, "L", false, false)
	step(10*time.Second, 3, "L", false, true)
	if waiting, stalled, term := w.status(); stalled != "L" || term != 3 || waiting < timeout {
		t.Fatalf("status %s, %q, %d", waiting, stalled, term)
	}
	step(time.Second, 3, "L", false, false) // once per timeout
	step(31*time.Second, 4, "L", false, false)
	step(31*time.Second, 4, "M", false, false) // another leader: a fresh wait
	step(31*time.Second, 0, "", false, false)
	if waiting, _, _ := w.status(); waiting != 0 {
		t.Fatalf("a member that follows nobody waits %s", waiting)
	}
}
