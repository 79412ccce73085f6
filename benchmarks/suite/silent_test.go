package suite

import (
	"context"
	"strings"
	"testing"
)

func TestSilentRulesetDropsBothWaysOfTheVictimOnly(t *testing.T) {
	script, err := silentRuleset(addrs("127.4.5.2")[0], addrs("127.0.0.1", "127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// A stale table of the same name goes in the same transaction.
		"add table ip " + SilentTable + "\ndelete table ip " + SilentTable + "\ntable ip " + SilentTable + " {",
		"type filter hook output priority filter; policy accept;",
		"ip saddr 127.4.5.2 counter drop",
		"ip daddr 127.4.5.2 counter drop",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, LossTable) {
		t.Errorf("the silent ruleset touches the loss table %s:\n%s", LossTable, script)
	}
	if SilentTable == LossTable {
		t.Errorf("silent deaths and the lossy-link phase share table %s", SilentTable)
	}
	// On loopback every packet passes output once: hooking input too would
	// be redundant, and anything but the victim's address must pass.
	if strings.Contains(script, "hook input") {
		t.Errorf("ruleset hooks input:\n%s", script)
	}
	if n := strings.Count(script, " drop"); n != 2 {
		t.Errorf("ruleset has %d drop rules, want 2 (from and to the victim):\n%s", n, script)
	}
	for _, other := range []string{"127.0.0.1", "127.0.0.2", "127.4.5.1", "@"} {
		if strings.Contains(script, other) {
			t.Errorf("ruleset names %q, want only the victim's address:\n%s", other, script)
		}
	}
}

func TestSilentRulesetRefusesAddressesItMustNotTouch(t *testing.T) {
	exclude := addrs("127.0.0.1", "127.0.0.2")
	for name, tc := range map[string]struct {
		victim string
		want   string
	}{
		"not loopback":    {"10.0.0.2", "10.0.0.2 is not in 127.0.0.0/8"},
		"IPv6 loopback":   {"::1", "::1 is not in"},
		"etcd and KCM":    {"127.0.0.1", "127.0.0.1 is the control plane's"},
		"the apiserver's": {"127.0.0.2", "127.0.0.2 is the control plane's"},
	} {
		script, err := silentRuleset(addrs(tc.victim)[0], exclude)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: silentRuleset = %q, %v; want an error saying %q", name, script, err, tc.want)
		}
	}
}

func TestDropTableScriptDeletesOnlyItsTable(t *testing.T) {
	want := "add table ip edgequorum_bench_silent\ndelete table ip edgequorum_bench_silent\n"
	if got := dropTableScript(SilentTable); got != want {
		t.Errorf("dropTableScript = %q, want %q", got, want)
	}
}

func TestKillKindsAlternate(t *testing.T) {
	var got []string
	for i := 1; i <= 5; i++ {
		got = append(got, killKind(i).String())
	}
	if s := strings.Join(got, ","); s != "reset,silent,reset,silent,reset" {
		t.Errorf("kinds of kills 1-5 = %s", s)
	}
}

// TestResetDeathInstallsNothing: a reset death needs neither nft nor the
// control plane's addresses, and its nil drop lifts and removes as a no-op.
func TestResetDeathInstallsNothing(t *testing.T) {
	var s suite // no cluster: a silent death would need its addresses
	drop, err := s.silence(context.Background(), reset, addrs("127.4.5.2")[0])
	if err != nil || drop != nil {
		t.Fatalf("silence(reset) = %v, %v; want nothing", drop, err)
	}
	o := killOutcome{kind: reset}
	if err := drop.lift(&o); err != nil || o.dropped != 0 || o.droppedNote() != "" {
		t.Errorf("lift of no drop: %v, outcome %+v, note %q", err, o, o.droppedNote())
	}
	if err := drop.remove(); err != nil {
		t.Errorf("remove of no drop: %v", err)
	}
}

func TestSumCountersAddsBothDirections(t *testing.T) {
	listing := `table ip edgequorum_bench_silent {
	chain output {
		type filter hook output priority filter; policy accept;
		ip saddr 127.4.5.2 counter packets 12 bytes 900 drop comment "from the dead node"
		ip daddr 127.4.5.2 counter packets 30 bytes 1800 drop comment "to the dead node"
	}
}
`
	if n, err := sumCounters(listing); err != nil || n != 42 {
		t.Errorf("sumCounters = %d, %v; want 42", n, err)
	}
	o := killOutcome{kind: silent, dropped: 42}
	if got := o.droppedNote(); got != " (42 packets to or from it dropped)" {
		t.Errorf("droppedNote = %q", got)
	}
}

func TestDeathsKeepKindsApart(t *testing.T) {
	var s System
	for _, k := range []deathKind{reset, silent, silent} {
		c, a, r := s.deaths(k)
		*c, *a, *r = append(*c, 1), append(*a, 2), append(*r, 3)
	}
	if len(s.DetectCommit) != 1 || len(s.DetectAnnot) != 1 || len(s.Recovery) != 1 ||
		len(s.DetectCommitSilent) != 2 || len(s.DetectAnnotSilent) != 2 || len(s.RecoverySilent) != 2 {
		t.Errorf("deaths mixed the kinds: %+v", s)
	}
	s.normalize(2)
	if s.DetectAnnotSilent[0] != 1 || s.DetectCommitSilent[1] != 0.5 || s.RecoverySilent[0] != 1.5 {
		t.Errorf("normalize(2) left silent figures unconverted: %+v", s)
	}
}
