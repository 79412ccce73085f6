//go:build skewnext

package raftzone

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/store"
)

// TestMixedReleaseZone runs a zone of this release and the next (the test
// build, tag skewnext, whose members announce one level more and write
// report batches under a type this release does not know once their zone
// reads it). It forms, judges and fails over while mixed, and the leader,
// whichever release it runs, commits nothing the older members cannot read;
// once the last older member is upgraded in place, the new type is switched
// on and every member applies it.
func TestMixedReleaseZone(t *testing.T) {
	z := newTestZone(t, 3)
	var mu sync.Mutex
	older := map[string]bool{"node-2": true, "node-3": true}
	z.tweak = func(c *Config) {
		mu.Lock()
		defer mu.Unlock()
		if older[c.Node] {
			c.Level, c.Release = skew.Level2, "v0.4.0"
		} else {
			c.Release = "v0.5.0-next"
		}
	}
	z.startAll()
	z.waitConverged(30*time.Second, 3)
	z.waitVerdicts(30*time.Second, allHealthy(z.names()))

	// Every member has announced itself; the zone stays at the older level.
	l := z.waitLeader(10 * time.Second)
	poll.Until(t, 20*time.Second, "every member's announcement committed", func() (bool, string) {
		said, err := l.srv.store.Announcements()
		if err != nil {
			return false, err.Error()
		}
		return len(said) == 3, fmt.Sprintf("%v", said)
	})
	if got := l.srv.zoneLevel(); got != skew.Level2 {
		t.Fatalf("a mixed zone is at %v, want %v", got, skew.Level2)
	}
	if st := l.srv.Status(); st.ZoneLevel != skew.Level2 {
		t.Errorf("status says the zone is at %v", st.ZoneLevel)
	}
	assertReadableByAll(t, z)

	// A failover while mixed: the leader dies, the rest judge it and lead on
	// in the older format; it comes back.
	dead := l.name
	z.killAndJudge(dead)
	z.start(dead)
	z.waitVerdicts(30*time.Second, allHealthy(z.names()))
	assertReadableByAll(t, z)

	// Upgrade the older members in place, one at a time.
	for _, name := range []string{"node-2", "node-3"} {
		z.stop(name)
		mu.Lock()
		delete(older, name)
		mu.Unlock()
		z.start(name)
		z.waitVerdicts(30*time.Second, allHealthy(z.names()))
		if name == "node-2" {
			assertReadableByAll(t, z)
		}
	}

	// Now every member reads the next level: the leader switches it on.
	poll.Until(t, 30*time.Second, "the next release's report type committed", func() (bool, string) {
		l, why := z.leader()
		if l == nil {
			return false, why
		}
		if lv := l.srv.zoneLevel(); lv != skew.Level2+1 {
			return false, "zone at " + lv.String()
		}
		return hasType(t, l, store.TypeNextReportBatch), "none yet"
	})
	z.waitVerdicts(30*time.Second, allHealthy(z.names()))
	for _, n := range z.running() {
		if total, _, last := n.srv.store.Unreadable(); total != 0 {
			t.Errorf("%s could not read %d entries: %v", n.name, total, last)
		}
	}
}

// assertReadableByAll checks that no member has met an entry it could not
// read and that no leader committed the next release's type.
func assertReadableByAll(t *testing.T, z *testZone) {
	t.Helper()
	for _, n := range z.running() {
		if total, _, last := n.srv.store.Unreadable(); total != 0 {
			t.Errorf("%s could not read %d entries: %v", n.name, total, last)
		}
		if hasType(t, n, store.TypeNextReportBatch) {
			t.Errorf("%s's log holds the next release's type while the zone is mixed", n.name)
		}
	}
}

// hasType reports whether n's Raft log holds a command of type ct.
func hasType(t *testing.T, n *testNode, ct store.CommandType) bool {
	t.Helper()
	first, err := n.srv.boltStore.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := n.srv.boltStore.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := n.srv.boltStore.GetLog(i, &l); err != nil {
			continue // compacted meanwhile
		}
		if l.Type == raft.LogCommand && len(l.Data) > 1 && store.CommandType(l.Data[1]) == ct {
			return true
		}
	}
	return false
}
