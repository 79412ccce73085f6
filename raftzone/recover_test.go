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
	cfg := raft.Configuration{}
	byNode := map[string]zone.Member{}
	for i, n := range []string{"a", "b", "c", "d", "e", "f"} {
		suffrage := raft.Voter
		if i == 5 {
			suffrage = raft.Nonvoter
		}
		cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID("id-" + n), Suffrage: suffrage})
		byNode[n] = zone.Member{Node: n, ServerID: "id-" + n}
	}
	for _, tc := range []struct {
		name, self string
		dead       []string
		err        string
	}{
		{name: "three of five voters gone", self: "id-a", dead: []string{"c", "d", "e"}},
		{name: "four of five gone", self: "id-a", dead: []string{"b", "c", "d", "e"}},
		{name: "two of five leave a quorum", self: "id-a", dead: []string{"d", "e"}, err: "3 of 5 voters are not named dead"},
		{name: "not a member", self: "id-a", dead: []string{"c", "d", "x"}, err: "x is not a member"},
		{name: "a nonvoter costs no quorum", self: "id-a", dead: []string{"c", "d", "f"}, err: "f is not a voter"},
		{name: "not ourselves", self: "id-a", dead: []string{"a", "d", "e"}, err: "a is this member"},
		{name: "only a voter recovers", self: "id-f", dead: []string{"c", "d", "e"}, err: "not a voter of the last configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRecovery(cfg, byNode, tc.self, tc.dead)
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

	request(dead[:2]...)
	if _, err := os.Stat(filepath.Join(survivor.dir, RecoveryRequestFile+".refused")); err != nil {
		t.Fatalf("a request that leaves a quorum standing was not refused: %v", err)
	}
	if got := testutil.ToFloat64(survivor.srv.metrics.recoveries.WithLabelValues("refused")); got != 1 {
		t.Errorf("refused recoveries counted %v, want 1", got)
	}

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
