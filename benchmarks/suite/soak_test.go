package suite

import (
	"strings"
	"testing"
	"time"
)

func TestParseSoakSpecs(t *testing.T) {
	got, err := ParseSoakSpecs("8x3:loss=5, 1x9:loss=1,1x5:oneway=20,1x5:burst=1s,2x5:jitter=200ms")
	if err != nil {
		t.Fatal(err)
	}
	want := []SoakSpec{{8, 3, SoakLoss, 5, 0, 0}, {1, 9, SoakLoss, 1, 0, 0}, {1, 5, SoakOneWay, 20, 0, 0}, {1, 5, SoakBurst, 0, time.Second, 0},
		{2, 5, SoakJitter, 0, 0, 200 * time.Millisecond}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spec %d = %+v, want %+v", i, got[i], want[i])
		}
		if back, err := ParseSoakSpecs(got[i].String()); err != nil || back[0] != got[i] {
			t.Errorf("%s does not read back: %+v, %v", got[i], back, err)
		}
	}
	for in, wantErr := range map[string]string{
		"":                "no zones",
		"8x3":             "want COUNTxN:KIND=VALUE",
		"83:loss=5":       "want COUNTxN",
		"0x3:loss=5":      "zone count",
		"1x2:loss=5":      "zone size",
		"1x65:loss=5":     "zone size",
		"1x3:loss":        "want KIND=VALUE",
		"1x3:loss=0":      "percentage from 1 to 99",
		"1x3:oneway=100":  "percentage from 1 to 99",
		"1x3:burst=10ms":  "longest burst",
		"1x3:burst=10s":   "longest burst",
		"1x3:jitter=0s":   "longest delay",
		"1x3:jitter=2s":   "longest delay",
		"1x3:delay=200ms": `impairment "delay"`,
	} {
		_, err := ParseSoakSpecs(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseSoakSpecs(%q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}

func TestSoakRulesetImpairsEachZoneAlone(t *testing.T) {
	zones := []*soakZone{
		{name: "soak-3a", set: "z1", spec: SoakSpec{Kind: SoakLoss, Percent: 5}, ips: addrs("127.4.0.1", "127.4.0.2", "127.4.0.3")},
		{name: "soak-3b", set: "z2", spec: SoakSpec{Kind: SoakOneWay, Percent: 20}, ips: addrs("127.4.0.4", "127.4.0.5", "127.4.0.6")},
		{name: "soak-3c", set: "z3", spec: SoakSpec{Kind: SoakBurst, BurstMax: time.Second}, ips: addrs("127.4.0.7", "127.4.0.8", "127.4.0.9")},
	}
	script, err := soakRuleset(zones, addrs("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"add table ip " + SoakTable + "\ndelete table ip " + SoakTable + "\ntable ip " + SoakTable + " {",
		"set z1 {\n\t\ttype ipv4_addr\n\t\telements = { 127.4.0.1, 127.4.0.2, 127.4.0.3 }",
		`ip saddr @z1 ip daddr @z1 counter comment "z1 seen"`,
		`ip saddr @z1 ip daddr @z1 numgen random mod 100 < 5 counter drop comment "z1 lost"`,
		// One way: only what the first node sends.
		`ip saddr 127.4.0.4 ip daddr @z2 numgen random mod 100 < 20 counter drop comment "z2 lost"`,
		// Bursts: an empty set the run fills one node at a time, both ways.
		"set z3_dark {\n\t\ttype ipv4_addr\n\t}",
		`ip saddr @z3_dark ip daddr @z3 counter drop comment "z3 lost"`,
		`ip saddr @z3 ip daddr @z3_dark counter drop comment "z3 lost"`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, script)
		}
	}
	if n := strings.Count(script, " drop"); n != 4 {
		t.Errorf("ruleset has %d drop rules, want 4:\n%s", n, script)
	}
	if strings.Contains(script, "hook input") {
		t.Errorf("ruleset hooks input too, so loopback packets would be dropped twice:\n%s", script)
	}

	for _, bad := range []string{"10.0.0.1", "127.0.0.1"} {
		zones[1].ips = addrs("127.4.0.4", bad)
		if _, err := soakRuleset(zones, addrs("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "soak-3b") {
			t.Errorf("a zone with %s: %v, want an error naming the zone", bad, err)
		}
	}
}

func TestParseSoakCounters(t *testing.T) {
	listing := `table ip edgequorum_bench_soak {
	chain output {
		ip saddr @z1 ip daddr @z1 counter packets 1000 bytes 90000 comment "z1 seen"
		ip saddr @z1 ip daddr @z1 numgen random mod 100 < 5 counter packets 48 bytes 4000 drop comment "z1 lost"
		ip saddr @z3 ip daddr @z3 counter packets 700 bytes 1 comment "z3 seen"
		ip saddr @z3_dark ip daddr @z3 counter packets 5 bytes 1 drop comment "z3 lost"
		ip saddr @z3 ip daddr @z3_dark counter packets 7 bytes 1 drop comment "z3 lost"
	}
}
`
	got := parseSoakCounters(listing)
	if got["z1"] != (soakCount{1000, 48}) || got["z3"] != (soakCount{700, 12}) || len(got) != 2 {
		t.Fatalf("counters = %+v, want z1 1000/48 and z3 700/12 (both burst rules summed)", got)
	}
}

func TestSoakTotalsAndReport(t *testing.T) {
	zs := []SoakZone{
		{Name: "soak-3a", N: 3, Kind: SoakLoss, Impairment: "loss=5", Seconds: 3600, NodeSeconds: 3 * 3600, HealthyAtEnd: true},
		{Name: "soak-3b", N: 3, Kind: SoakLoss, Impairment: "loss=5", Seconds: 3600, NodeSeconds: 3 * 3600, FalseVerdicts: 1, FalseNodes: []string{"3b-2"}, HealthyAtEnd: true},
		{Name: "soak-5c", N: 5, Kind: SoakBurst, Impairment: "burst=1s", Seconds: 3600, NodeSeconds: 5 * 3600, Bursts: 600, BurstSeconds: 330, HealthyAtEnd: true},
		{Name: "soak-3e", N: 3, Kind: SoakBurst, Impairment: "burst=3s", BurstMax: 3 * time.Second, Seconds: 3600, NodeSeconds: 3 * 3600, FalseVerdicts: 4, HealthyAtEnd: true},
		{Name: "soak-5d", N: 5, Kind: SoakLoss, Impairment: "loss=5", Errors: []string{"formation: timeout"}},
		{Name: "soak-5f", N: 5, Kind: SoakJitter, Impairment: "jitter=200ms", Jitter: 200 * time.Millisecond, Seconds: 1800, NodeSeconds: 5 * 1800,
			Delayed: 91234, DelayMean: 101400 * time.Microsecond, DelayMax: 200300 * time.Microsecond, HealthyAtEnd: true},
	}
	tot := soakTotals(zs)
	if len(tot) != 4 || tot[0].Zones != 2 || tot[0].NodeHours != 6 || tot[0].FalseVerdicts != 1 || tot[1].NodeHours != 5 {
		t.Fatalf("totals = %+v, want loss=5 at N=3 over 2 zones, 6 node-hours, 1 false verdict; burst 5 node-hours; the zone that never formed left out", tot)
	}
	var b strings.Builder
	if err := WriteSoakMarkdown(&b, &SoakReport{Zones: zs, Specs: []string{"2x3:loss=5"}, Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| loss=5 | 3 | 2 | 6.0 | 1 | yes | ❌ 0 in ≥ 24 node-hours |",
		"| burst=1s | 5 | 1 | 5.0 | 0 | yes | ✅ |",
		"| soak-3b | 3 | loss=5 | 3600 | — | — | 1 (3b-2) | — |",
		"| soak-5c | 5 | burst=1s | 3600 | — | 600 (330) | 0 | — |",
		"| burst=3s | 3 | 1 | 3.0 | 4 | yes | none: bursts past the 1.2s of darkness the rule tolerates, the price it states |",
		"formation: timeout",
		"| jitter=200ms | 5 | 1 | 2.5 | 0 | yes | ✅ |",
		"| soak-5f | 5 | jitter=200ms | 1800 | — | 91234 (101 ms, 200 ms) | 0 | — |",
		"A jitter zone's queue sees each segment",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSoakConfigValidate(t *testing.T) {
	ok := SoakConfig{Zones: []SoakSpec{{Count: 8, N: 3, Kind: SoakLoss, Percent: 5}}, Window: time.Hour, BinDir: "b", WorkDir: "w", DataDir: "d"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for name, tt := range map[string]struct {
		mod  func(*SoakConfig)
		want string
	}{
		"no zones":     {func(c *SoakConfig) { c.Zones = nil }, "Zones is empty"},
		"short window": {func(c *SoakConfig) { c.Window = time.Second }, "Window is 1s"},
		"no dirs":      {func(c *SoakConfig) { c.DataDir = "" }, "DataDir"},
		"27 zones":     {func(c *SoakConfig) { c.Zones = []SoakSpec{{Count: 27, N: 3}} }, "27 zones"},
		"161 nodes":    {func(c *SoakConfig) { c.Zones = []SoakSpec{{Count: 7, N: 23}} }, "161 nodes"},
	} {
		c := ok
		tt.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tt.want)
		}
	}
}

func TestJitterRulesQueueEachZoneAlone(t *testing.T) {
	zones := []*soakZone{
		{name: "soak-5a", set: "z1", spec: SoakSpec{Kind: SoakJitter, Jitter: 200 * time.Millisecond}, ips: addrs("127.4.0.1", "127.4.0.2", "127.4.0.3")},
		{name: "soak-5b", spec: SoakSpec{Kind: SoakJitter, Jitter: 50 * time.Millisecond}, ips: addrs("127.4.0.4", "127.4.0.5", "127.4.0.6")},
	}
	rules, err := jitterRules(zones, addrs("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{
		"-N " + SoakJitterChain,
		"-A EQ_SOAK_JITTER -s 127.4.0.1,127.4.0.2,127.4.0.3 -d 127.4.0.1,127.4.0.2,127.4.0.3 -j NFQUEUE --queue-num 47200 --queue-bypass",
		"-A EQ_SOAK_JITTER -s 127.4.0.4,127.4.0.5,127.4.0.6 -d 127.4.0.4,127.4.0.5,127.4.0.6 -j NFQUEUE --queue-num 47201 --queue-bypass",
		// The jump comes last: no packet reaches the chain half built.
		"-A OUTPUT -j " + SoakJitterChain,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, bad := range []string{"10.0.0.1", "127.0.0.1"} {
		zones[1].ips = addrs("127.4.0.4", bad)
		if _, err := jitterRules(zones, addrs("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "soak-5b") {
			t.Errorf("a zone with %s: %v, want an error naming the zone", bad, err)
		}
	}
	// The nftables table only counts a jitter zone's packets.
	script, err := soakRuleset(zones[:1], addrs("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, `counter comment "z1 seen"`) || strings.Contains(script, " drop") {
		t.Errorf("a jitter zone's nft rules:\n%s\nwant a counter and no drop", script)
	}
}
