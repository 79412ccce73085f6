package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// TestPrintStatusNamesRoles checks the member table an operator reads on a
// large zone: each member's role, voter, standby or spare, and the Raft
// suffrage for an agent from before spares existed, which names no role.
func TestPrintStatusNamesRoles(t *testing.T) {
	st := raftzone.Status{Node: "n9", Zone: "zone-a", State: "Spare", Term: 4, Leader: "n1", At: time.Now(),
		Voters: 5, WantVoters: 5, Joined: true, Ready: true, Role: "spare",
		Members: []raftzone.MemberStatus{
			{Node: "n1", Suffrage: "voter", Role: "voter"},
			{Node: "n6", Suffrage: "nonvoter", Role: "standby"},
			{Node: "n7", Suffrage: "nonvoter"},
			{Node: "n9", Role: "spare"},
		}}
	var b bytes.Buffer
	printStatus(&b, st)
	want := map[string]string{"n1": "voter", "n6": "standby", "n7": "nonvoter", "n9": "spare"}
	for line := range strings.Lines(b.String()) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if role, ok := want[f[0]]; ok {
			if f[1] != role {
				t.Errorf("member %s shown as %q, want %q", f[0], f[1], role)
			}
			delete(want, f[0])
		}
	}
	if len(want) != 0 {
		t.Errorf("members missing from the table: %v\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "Spare") {
		t.Errorf("header does not say the member is a spare:\n%s", b.String())
	}
}

// TestPrintStatusShowsWhatAStolenBoxDoes: forced elections, a stalled leader
// and refusals of the replica are printed under TRUST; a quiet member prints
// no such section.
func TestPrintStatusShowsWhatAStolenBoxDoes(t *testing.T) {
	now := time.Now()
	st := raftzone.Status{Node: "n1", Zone: "zone-a", State: "Follower", At: now}
	var quiet bytes.Buffer
	printStatus(&quiet, st)
	if strings.Contains(quiet.String(), "TRUST") {
		t.Errorf("a quiet member prints a TRUST section:\n%s", quiet.String())
	}
	st.ForcedElections = []zoneport.ForcedElections{{Node: "n3", Count: 7, Last: now.Add(-time.Minute), Refused: 2}}
	st.ReportsUncommittedSeconds = 12
	st.StalledLeader, st.StalledTerm = "n3", 9
	st.Held = map[string]uint64{"unregistered": 4, "verdict_unsupported": 1}
	var b bytes.Buffer
	printStatus(&b, st)
	for _, want := range []string{
		"n3 forced 7 election(s), the last 1m0s ago, 2 refused over its budget",
		"committed none of this member's reports for 12s",
		"stopped following n3 in term 9",
		"replica refused 4 committed item(s): unregistered",
		"replica refused 1 committed item(s): verdict_unsupported",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, b.String())
		}
	}
}

// TestPrintStatusShowsReleases: each member's release, the zone's level, and
// a member that met entries of a newer release is told to upgrade.
func TestPrintStatusShowsReleases(t *testing.T) {
	st := raftzone.Status{Node: "n1", Zone: "zone-a", State: "Follower", At: time.Now(),
		Release: "v0.3.0", Level: 1, ZoneLevel: 1, UnreadableNewer: 3, UnreadableLast: "log 14: written by a newer release",
		Members: []raftzone.MemberStatus{{Node: "n1", Role: "voter", Release: "v0.3.0"}, {Node: "n2", Role: "voter", Release: "v0.4.0"}}}
	var b bytes.Buffer
	printStatus(&b, st)
	for _, want := range []string{"release v0.3.0   speaks level 1   zone at level 1", "SKEW: 3 committed entries", "n2      voter  v0.4.0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, b.String())
		}
	}
}
