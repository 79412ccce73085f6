package suite

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestLossRulesetDropsOnlyBetweenZoneNodes(t *testing.T) {
	script, err := lossRuleset(addrs("127.4.5.1", "127.4.5.2", "127.4.5.3", "127.4.5.2"), addrs("127.0.0.1"), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// A stale table of the same name goes in the same transaction.
		"add table ip " + LossTable + "\ndelete table ip " + LossTable + "\ntable ip " + LossTable + " {",
		"elements = { 127.4.5.1, 127.4.5.2, 127.4.5.3 }",
		"type filter hook output priority filter; policy accept;",
		"ip saddr @zone_nodes ip daddr @zone_nodes numgen random mod 100 < 5 counter drop",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "hook input") {
		t.Errorf("ruleset hooks input too, so loopback packets would be dropped twice:\n%s", script)
	}
	if n := strings.Count(script, " drop"); n != 1 {
		t.Errorf("ruleset has %d drop rules, want 1:\n%s", n, script)
	}
}

func TestLossRulesetRefusesAddressesItMustNotTouch(t *testing.T) {
	for name, tc := range map[string]struct {
		nodes   []netip.Addr
		percent int
		want    string
	}{
		"not loopback":  {addrs("127.4.5.1", "10.0.0.2"), 5, "10.0.0.2 is not in 127.0.0.0/8"},
		"IPv6 loopback": {addrs("127.4.5.1", "::1"), 5, "::1 is not in"},
		"control plane": {addrs("127.4.5.1", "127.0.0.1"), 5, "127.0.0.1 is the control plane's"},
		"one node":      {addrs("127.4.5.1"), 5, "at least 2"},
		"zero percent":  {addrs("127.4.5.1", "127.4.5.2"), 0, "want 1 to 99"},
		"all":           {addrs("127.4.5.1", "127.4.5.2"), 100, "want 1 to 99"},
	} {
		script, err := lossRuleset(tc.nodes, addrs("127.0.0.1"), tc.percent)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: lossRuleset = %q, %v; want an error saying %q", name, script, err, tc.want)
		}
	}
}

func TestParseLossCounters(t *testing.T) {
	listing := `table ip edgequorum_bench_loss {
	set zone_nodes {
		type ipv4_addr
		elements = { 127.4.5.1, 127.4.5.2 }
	}

	chain output {
		type filter hook output priority filter; policy accept;
		ip saddr @zone_nodes ip daddr @zone_nodes counter packets 2000 bytes 150000 comment "zone"
		ip saddr @zone_nodes ip daddr @zone_nodes numgen random mod 100 < 5 counter packets 97 bytes 7000 drop comment "lost"
	}
}
`
	seen, dropped, err := parseLossCounters(listing)
	if err != nil {
		t.Fatal(err)
	}
	if seen != 2000 || dropped != 97 {
		t.Errorf("parseLossCounters = %d seen, %d dropped; want 2000, 97", seen, dropped)
	}
	if _, _, err := parseLossCounters("table ip edgequorum_bench_loss {\n}\n"); err == nil {
		t.Error("a listing without the counters parsed")
	}
}

func TestFalseVerdictsSkipOnlyTheDeadNodesDeath(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	dead := []deadSpan{{node: "n5-2", from: at(10), to: at(20)}}
	ts := []transition{
		{Node: "n5-1", To: zone.Unhealthy, At: at(5)},  // alive: false
		{Node: "n5-1", To: zone.Healthy, At: at(7)},    // recovery, not a verdict against it
		{Node: "n5-2", To: zone.Unhealthy, At: at(16)}, // dead: a true verdict
		{Node: "n5-2", To: zone.Healthy, At: at(20)},
		{Node: "n5-2", To: zone.Unknown, At: at(25)}, // back and alive: false
		{Node: "n5-3", To: zone.Unhealthy, At: at(15)},
	}
	n, nodes := falseVerdictsAmong(ts, dead)
	if n != 3 || strings.Join(nodes, ",") != "n5-1,n5-2,n5-3" {
		t.Errorf("falseVerdictsAmong = %d %v, want 3 [n5-1 n5-2 n5-3]", n, nodes)
	}
}

func TestZipLossPairsLevels(t *testing.T) {
	ours := []LossFigures{{Ran: true, FalseVerdicts: 0}, {Ran: true, FalseVerdicts: 2}}
	base := []LossFigures{{Ran: true, FalseVerdicts: 1}} // interrupted after the first level
	got := zipLoss([]int{5, 20}, ours, base)
	if len(got) != 2 || got[0].Percent != 5 || got[0].Base.FalseVerdicts != 1 || got[1].Percent != 20 ||
		got[1].Ours.FalseVerdicts != 2 || got[1].Base.Ran {
		t.Errorf("zipLoss = %+v", got)
	}
	if got := zipLoss([]int{5}, nil, nil); len(got) != 0 {
		t.Errorf("zipLoss of nothing = %+v, want no levels", got)
	}
}
