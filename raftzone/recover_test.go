package raftzone

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/raftzone/recovery"
	"github.com/edgequorum/edgequorum/zone"
)

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
		if err := recovery.Write(survivor.dir, recovery.Request{Dead: names, RequestedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		z.start(survivor.name)
	}

	refused := func(what string) {
		t.Helper()
		path := filepath.Join(survivor.dir, recovery.RequestFile)
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
	if err := os.WriteFile(filepath.Join(survivor.dir, recovery.RequestFile), []byte("{dead: node-1"), 0o600); err != nil {
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
