package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone"
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
