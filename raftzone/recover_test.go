package raftzone

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/zone"
)

func TestCheckRecovery(t *testing.T) {
	voters := []string{"a", "b", "c", "d", "e"}
	members := append(slices.Clone(voters), "f")
	for _, tc := range []struct {
		name, self string
		voters     []string
		dead       []string
		err        string
	}{
		{name: "three of five voters gone", self: "a", dead: []string{"c", "d", "e"}},
		{name: "four of five gone", self: "a", dead: []string{"b", "c", "d", "e"}},
		{name: "named twice", self: "a", dead: []string{"c", "d", "e", "e"}},
		{name: "two of five leave a quorum", self: "a", dead: []string{"d", "e"}, err: "3 of 5 voters are not named dead (a, b, c)"},
		{name: "a voter outside the member list counts", self: "a", voters: append(slices.Clone(voters), "server 1234", "server 5678"),
			dead: []string{"c", "d", "e"}, err: "4 of 7 voters are not named dead"},
		{name: "not a member", self: "a", dead: []string{"c", "d", "x"}, err: "x is not a member"},
		{name: "a nonvoter costs no quorum", self: "a", dead: []string{"c", "d", "f"}, err: "f is not a voter"},
		{name: "not ourselves", self: "a", dead: []string{"a", "d", "e"}, err: "--dead names this node, a"},
		{name: "only a voter recovers", self: "f", dead: []string{"c", "d", "e"}, err: "f is not a voter of the last configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.voters
			if v == nil {
				v = voters
			}
			err := CheckRecovery(tc.self, v, members, tc.dead)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestRecoverAfterLosingAQuorum loses three of the five voters of a zone of
// six for good. The survivors cannot elect a leader; a recovery request that
// names too few dead is refused, and one that names all three re-forms the
// zone around the member it was given to: it leads, the other survivors are
// taken back as voters, the dead are judged unhealthy and leave, and verdicts
// continue.
func TestRecoverAfterLosingAQuorum(t *testing.T) {
	z := newTestZone(t, 6)
	// The lost stay voters: no replacement while they are being stopped.
	z.tweak = func(c *Config) { c.DeadVoterTimeout = time.Hour }
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	cfg, _ := l.srv.configuration()
	var dead []string
	var survivor *testNode
	for _, n := range z.running() {
		switch {
		case cfg[n.srv.ServerID()].Suffrage != raft.Voter:
		case len(dead) < 3:
			dead = append(dead, n.name)
		case survivor == nil:
			survivor = n
		}
	}
	for _, n := range dead {
		z.stop(n)
	}
	request := func(names ...string) {
		z.stop(survivor.name)
		if err := WriteRecoveryRequest(survivor.dir, RecoveryRequest{Dead: names, RequestedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		z.start(survivor.name)
	}

	refused := func(what string) {
		t.Helper()
		path := filepath.Join(survivor.dir, RecoveryRequestFile)
		if _, err := os.Stat(path + ".refused"); err != nil {
			t.Fatalf("%s was not refused: %v", what, err)
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s is still pending", what)
		}
		if got := testutil.ToFloat64(survivor.srv.metrics.recoveries.WithLabelValues("refused")); got != 1 {
			t.Errorf("refused recoveries counted %v, want 1", got)
		}
	}
	// A mangled request is refused, and the member starts as usual.
	z.stop(survivor.name)
	if err := os.WriteFile(filepath.Join(survivor.dir, RecoveryRequestFile), []byte("{dead: node-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	z.start(survivor.name)
	refused("a mangled request")
	request(dead[:2]...)
	refused("a request that leaves a quorum standing")

	request(dead...)
	l = z.waitConverged(60*time.Second, 3)
	if l != survivor {
		t.Errorf("%s leads, want the recovered %s", l.name, survivor.name)
	}
	if members, _ := l.srv.store.Members(); len(members) != 3 {
		t.Errorf("members after recovery %v, want the three survivors", members)
	}
	var judged []string
	for _, v := range l.sink.delivered() {
		if v.State == zone.Unhealthy && slices.Contains(dead, v.Node) {
			judged = append(judged, v.Node)
		}
	}
	slices.Sort(judged)
	if !slices.Equal(slices.Compact(judged), dead) {
		t.Errorf("judged unhealthy %v, want %v", judged, dead)
	}
	// Verdicts continue: another survivor dies now and the zone judges it.
	var next *testNode
	for _, n := range z.running() {
		if n != l {
			next = n
		}
	}
	z.stop(next.name)
	z.waitVerdicts(60*time.Second, map[string]zone.State{next.name: zone.Unhealthy})
}
