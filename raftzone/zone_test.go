package raftzone

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/raftzone/seats"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Multi-member tests on in-process zones. Every wait polls a condition with a
// deadline; where a test must show that something does NOT happen, it waits for
// evidence that enough time passed for it to happen (report rounds counted by a
// metric) instead of sleeping.

func TestElectionAndVerdicts(t *testing.T) {
	for _, n := range []int{3, 5, 7} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			z := newTestZone(t, n)
			z.startAll()
			z.waitConverged(60*time.Second, seats.DesiredVoters(n, 5))
			z.waitVerdicts(60*time.Second, allHealthy(z.names()))
			if got := z.genesis.created.Load(); got != 1 {
				t.Fatalf("genesis object created %d times, want 1", got)
			}
		})
	}
}

// assertNeverJudged fails if any sink on any member ever received a verdict
// other than healthy for one of nodes.
func assertNeverJudged(t *testing.T, z *testZone, nodes []string) {
	t.Helper()
	watch := map[string]bool{}
	for _, n := range nodes {
		watch[n] = true
	}
	for _, n := range z.nodes {
		for _, v := range n.sink.delivered() {
			if watch[v.Node] && v.State != zone.Healthy {
				t.Errorf("%s delivered verdict %s", n.name, v)
			}
		}
	}
}

func TestLeaderKilledVerdictsContinue(t *testing.T) {
	for _, n := range []int{3, 5, 7} {
		t.Run(fmt.Sprintf("members=%d", n), func(t *testing.T) {
			z := newTestZone(t, n)
			z.startAll()
			old := z.waitConverged(60*time.Second, seats.DesiredVoters(n, 5))
			z.waitVerdicts(60*time.Second, allHealthy(z.names()))
			oldTerm := old.srv.Term()

			z.stop(old.name)
			var survivors []string
			for _, name := range z.names() {
				if name != old.name {
					survivors = append(survivors, name)
				}
			}
			want := allHealthy(survivors)
			want[old.name] = zone.Unhealthy
			z.waitVerdicts(60*time.Second, want)
			l, _ := z.leader()
			if l.srv.Term() <= oldTerm {
				t.Fatalf("new leader term %d, old %d", l.srv.Term(), oldTerm)
			}
			v, err := l.srv.store.Verdict(old.name)
			if err != nil || v.Leader != l.name || v.Term != l.srv.Term() {
				t.Fatalf("verdict on dead leader = %+v, %v; want decided by %s in term %d", v, err, l.name, l.srv.Term())
			}
			assertNeverJudged(t, z, survivors)
		})
	}
}

// reportRounds counts the reports every running member attempted, whatever the
// outcome: evidence that wall-clock time passed on every member.
func reportRounds(n *testNode) float64 {
	total := 0.0
	for _, r := range []string{"ok", "rejected", "unreachable", "no_leader", "error", "not_joined"} {
		total += testutil.ToFloat64(n.srv.metrics.reportsSent.WithLabelValues(r))
	}
	return total
}

func waitRounds(t *testing.T, nodes []*testNode, rounds float64) {
	t.Helper()
	start := map[*testNode]float64{}
	for _, n := range nodes {
		start[n] = reportRounds(n)
	}
	poll.Until(t, 60*time.Second, fmt.Sprintf("%v report rounds", rounds), func() (bool, string) {
		for _, n := range nodes {
			if reportRounds(n)-start[n] < rounds {
				return false, n.name + " behind"
			}
		}
		return true, ""
	})
}

func commitIndexes(nodes []*testNode) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range nodes {
		out[n.name] = n.srv.raft.CommitIndex()
	}
	return out
}

func TestMinorityPartitionCommitsNothing(t *testing.T) {
	z := newTestZone(t, 5)
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))

	// The old leader and one follower form the minority.
	var minority, majority []*testNode
	for _, n := range z.running() {
		if n == l || (len(minority) < 2 && n != l && len(majority) >= 3) {
			minority = append(minority, n)
		} else if len(majority) < 3 {
			majority = append(majority, n)
		} else {
			minority = append(minority, n)
		}
	}
	ips := func(ns []*testNode) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.ip)
		}
		return out
	}
	z.fabric.Partition(ips(minority), ips(majority))
	z.pokeAll()

	// The majority elects a leader and judges the unreachable minority.
	want := map[string]zone.State{}
	for _, n := range minority {
		want[n.name] = zone.Unhealthy
	}
	for _, n := range majority {
		want[n.name] = zone.Healthy
	}
	var newLeader *testNode
	poll.Until(t, 60*time.Second, "majority leader", func() (bool, string) {
		for _, n := range majority {
			if n.srv.Term() != 0 {
				newLeader = n
				return true, ""
			}
		}
		return false, "no leader in majority"
	})
	poll.Until(t, 60*time.Second, "old leader steps down", func() (bool, string) {
		return l.srv.Term() == 0, "still leading"
	})
	frozen := commitIndexes(minority)
	before := newLeader.srv.raft.CommitIndex()
	waitRounds(t, minority, 5)
	poll.Until(t, 60*time.Second, "majority commits", func() (bool, string) {
		return newLeader.srv.raft.CommitIndex() >= before+5, "majority stalled"
	})
	if got := commitIndexes(minority); fmt.Sprint(got) != fmt.Sprint(frozen) {
		t.Fatalf("minority committed during the partition: %v -> %v", frozen, got)
	}
	for _, n := range minority {
		if n.srv.Term() != 0 {
			t.Fatalf("%s leads inside the minority", n.name)
		}
	}
	got, _ := newLeader.srv.store.Verdicts()
	for node, st := range want {
		if node != l.name && got[node].State != st {
			// Judgements of the minority need the vote timeout to pass;
			// wait for them below instead of failing here.
			break
		}
	}
	poll.Until(t, 60*time.Second, "majority judges the minority", func() (bool, string) {
		got, _ := newLeader.srv.store.Verdicts()
		for node, st := range want {
			if got[node].State != st {
				return false, fmt.Sprintf("%s=%s", node, got[node].State)
			}
		}
		return true, ""
	})

	z.fabric.Heal()
	z.pokeAll()
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
}

func TestEvenSplitKeepsVerdicts(t *testing.T) {
	z := newTestZone(t, 4)
	z.startAll()
	z.waitConverged(60*time.Second, 4)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	run := z.running()
	z.fabric.Partition([]string{run[0].ip, run[1].ip}, []string{run[2].ip, run[3].ip})
	z.pokeAll()

	poll.Until(t, 60*time.Second, "no leader on either side", func() (bool, string) {
		l, _ := z.leader()
		return l == nil, "a leader remains"
	})
	frozen := commitIndexes(run)
	// Several vote timeouts' worth of report rounds on every member.
	waitRounds(t, run, 15)
	if got := commitIndexes(run); fmt.Sprint(got) != fmt.Sprint(frozen) {
		t.Fatalf("a half committed during a 2/2 split: %v -> %v", frozen, got)
	}
	for _, n := range run {
		vs, _ := n.srv.store.Verdicts()
		for node, v := range vs {
			if v.State != zone.Healthy {
				t.Fatalf("%s holds verdict %s=%s during the split", n.name, node, v.State)
			}
		}
	}
	z.fabric.Heal()
	z.pokeAll()
	z.waitConverged(60*time.Second, 4)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	assertNeverJudged(t, z, z.names())
}

// assertOneCluster checks that every running member sees the same leader and
// the same configuration holding all of them.
func assertOneCluster(t *testing.T, z *testZone) {
	t.Helper()
	l, why := z.leader()
	if l == nil {
		t.Fatal(why)
	}
	want, _ := l.srv.configuration()
	// A member that joined last may know the leader's address before its
	// replica has applied the member list that names it.
	poll.Until(t, 30*time.Second, "every member following "+l.name, func() (bool, string) {
		for _, n := range z.running() {
			if node, _, ok := n.srv.Leader(); !ok || node != l.name {
				return false, fmt.Sprintf("%s follows %q", n.name, node)
			}
		}
		return true, ""
	})
	// One cluster: no member's configuration names a server the leader's
	// does not, and each catches up with the leader's (the last change may
	// still be on its way to a member).
	poll.Until(t, 30*time.Second, "every member holding "+l.name+"'s configuration", func() (bool, string) {
		for _, n := range z.running() {
			got, _ := n.srv.configuration()
			for id := range got {
				if _, ok := want[id]; !ok {
					t.Fatalf("%s's configuration has server %s, which %s's has not: a second cluster", n.name, id, l.name)
				}
			}
			if len(got) != len(want) {
				return false, fmt.Sprintf("%s has %d servers in its configuration, leader %d", n.name, len(got), len(want))
			}
		}
		return true, ""
	})
	if c := z.genesis.created.Load(); c != 1 {
		t.Errorf("genesis created %d times", c)
	}
}

func TestGenesisExactlyOneCluster(t *testing.T) {
	t.Run("all at once", func(t *testing.T) {
		z := newTestZone(t, 5)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, name := range z.names() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				z.start(name)
			}()
		}
		wg.Wait()
		z.waitConverged(60*time.Second, 5)
		assertOneCluster(t, z)
	})
	t.Run("staggered", func(t *testing.T) {
		z := newTestZone(t, 5)
		for _, name := range z.names() {
			n := z.start(name)
			poll.Until(t, 60*time.Second, name+" joined", func() (bool, string) {
				return n.srv.inConfiguration(), "not in configuration"
			})
		}
		z.waitConverged(60*time.Second, 5)
		assertOneCluster(t, z)
	})
	t.Run("genesis winner starts last", func(t *testing.T) {
		z := newTestZone(t, 3)
		founder := z.nodes["node-3"]
		if err := os.MkdirAll(founder.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		id, err := loadOrCreateServerID(founder.dir)
		if err != nil {
			t.Fatal(err)
		}
		z.genesis.Claim(t.Context(), testZoneName, GenesisRecord{ClusterID: "c1", Founder: "node-3", FounderID: id})
		a, b := z.start("node-1"), z.start("node-2")
		// Both must try (and fail) to found the zone several times.
		waitRounds(t, []*testNode{a, b}, 3)
		if a.srv.inConfiguration() || b.srv.inConfiguration() {
			t.Fatal("a member that lost genesis bootstrapped")
		}
		z.start("node-3")
		z.waitConverged(60*time.Second, 3)
		assertOneCluster(t, z)
	})
	t.Run("apiserver unreachable", func(t *testing.T) {
		z := newTestZone(t, 3)
		z.genesis.unavailable.Store(true)
		z.startAll()
		waitRounds(t, z.running(), 3)
		for _, n := range z.running() {
			if n.srv.inConfiguration() {
				t.Fatalf("%s bootstrapped without the genesis object", n.name)
			}
		}
		z.genesis.unavailable.Store(false)
		z.waitConverged(60*time.Second, 3)
		assertOneCluster(t, z)
	})
}

func TestWipedMemberRejoinsWithNewID(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(60*time.Second, 3)
	victim := z.nodes["node-2"]
	l, _ := z.leader()
	if l == victim {
		victim = z.nodes["node-3"]
	}
	oldID := victim.srv.ServerID()
	z.stop(victim.name)
	removeAll(t, victim.dir)
	z.start(victim.name)
	newID := victim.srv.ServerID()
	if newID == oldID {
		t.Fatal("wiped member kept its server ID")
	}
	l = z.waitConverged(60*time.Second, 3)
	cfg, _ := l.srv.configuration()
	if _, ok := cfg[oldID]; ok {
		t.Fatal("stale server still in the configuration")
	}
	// The leader's replica applies the new entry once its own view of the
	// cluster shows the node's new registration (store.Settle), which may be
	// a moment after the configuration already holds the new server.
	poll.Until(t, 60*time.Second, "member entry with the new server ID", func() (bool, string) {
		m, err := l.srv.store.Member(victim.name)
		if err != nil {
			return false, err.Error()
		}
		return m.ServerID == newID, fmt.Sprintf("member entry has server ID %s, want %s", m.ServerID, newID)
	})
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	assertOneCluster(t, z)
}

func TestRestartKeepsReportsVerdictsAndSeqs(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	z.setDead("node-3", true) // make one verdict unhealthy so restart must keep it
	z.waitVerdicts(60*time.Second, map[string]zone.State{"node-3": zone.Unhealthy})
	z.setDead("node-3", false)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))

	// What each member had on disk when it stopped is what it must have
	// after it starts again.
	z.stopAll()
	before := map[string]struct {
		seqs     map[string]uint64
		verdicts map[string]zone.Verdict
	}{}
	for _, name := range z.names() {
		st, err := store.Open(filepath.Join(z.nodes[name].dir, "state.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		last, _ := st.LastReports()
		seqs := map[string]uint64{}
		for node, lr := range last {
			seqs[node] = lr.Seq
		}
		vs, _ := st.Verdicts()
		st.Close()
		if len(vs) != 3 || len(seqs) != 3 {
			t.Fatalf("%s stopped with %d verdicts and %d senders", name, len(vs), len(seqs))
		}
		before[name] = struct {
			seqs     map[string]uint64
			verdicts map[string]zone.Verdict
		}{seqs, vs}
	}
	for _, name := range z.names() {
		n := z.start(name)
		b := before[name]
		vs, _ := n.srv.store.Verdicts()
		for node, v := range b.verdicts {
			if vs[node] != v {
				t.Errorf("%s lost verdict %s after restart: %+v -> %+v", name, node, v, vs[node])
			}
		}
		for node, seq := range b.seqs {
			if got := n.srv.store.LastSeq(node); got < seq {
				t.Errorf("%s: seq of %s went back from %d to %d", name, node, seq, got)
			}
		}
		if next, _ := n.srv.seq.Next(); next <= b.seqs[name] {
			t.Errorf("%s would reuse seq %d (last committed %d)", name, next, b.seqs[name])
		}
	}
	z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	if c := z.genesis.created.Load(); c != 1 {
		t.Fatalf("restart re-founded the zone (%d genesis objects)", c)
	}
}

func TestLeadershipFollowsAPIReachability(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))

	l.api.down.Store(true)
	poll.Until(t, 60*time.Second, "leadership moves to a member that reaches the apiserver", func() (bool, string) {
		nl, why := z.leader()
		if nl == nil {
			return false, why
		}
		return nl != l, "still " + nl.name
	})

	// With no member reaching the apiserver, leadership stays where it is.
	for _, n := range z.running() {
		n.api.down.Store(true)
	}
	stay := z.waitLeader(60 * time.Second)
	poll.Until(t, 60*time.Second, "leader gives up looking for a target", func() (bool, string) {
		return testutil.ToFloat64(stay.srv.metrics.transfers.WithLabelValues("no_target")) >= 1, "no attempt yet"
	})
	if nl, _ := z.leader(); nl != stay {
		t.Fatal("leadership moved although no member reaches the apiserver")
	}
}

func TestMembershipFollowsMemberList(t *testing.T) {
	z := newTestZone(t, 4)
	z.startAll()
	z.waitConverged(60*time.Second, 4)

	// node-4 leaves the zone (its Node object lost the label).
	leaving := z.nodes["node-4"]
	if l, _ := z.leader(); l == leaving {
		leaving = z.nodes["node-3"]
	}
	var keep []zoneport.Candidate
	for _, c := range z.candidates() {
		if c.Node != leaving.name {
			keep = append(keep, c)
		}
	}
	z.list.set(keep, true)
	leavingID := leaving.srv.ServerID()
	poll.Until(t, 60*time.Second, "leaving member removed", func() (bool, string) {
		l, why := z.leader()
		if l == nil {
			return false, why
		}
		cfg, _ := l.srv.configuration()
		_, inCfg := cfg[leavingID]
		_, err := l.srv.store.Member(leaving.name)
		return !inCfg && err != nil, fmt.Sprintf("in config %v, member err %v", inCfg, err)
	})
	z.stop(leaving.name)

	// A member whose address changed is followed: restart it on a new IP.
	mover := z.nodes["node-2"]
	if l, _ := z.leader(); l == mover {
		mover = z.nodes["node-1"]
		if leaving == mover {
			mover = z.nodes["node-3"]
		}
	}
	z.stop(mover.name)
	mover.ip = z.prefix + "77"
	for i, c := range keep {
		if c.Node == mover.name {
			keep[i].ProbeAddress, keep[i].RaftAddress = mover.ip, mover.ip+":9470"
		}
	}
	z.list.set(keep, true)
	z.start(mover.name)
	l := z.waitConverged(60*time.Second, 3)
	poll.Until(t, 60*time.Second, "moved member followed at its new address", func() (bool, string) {
		if got, _ := (addressBook{l.srv}).ServerAddr(raft.ServerID(mover.srv.ServerID())); got != raft.ServerAddress(mover.ip+":9470") {
			return false, fmt.Sprintf("transport resolves it to %s", got)
		}
		m, _ := l.srv.store.Member(mover.name)
		if m.RaftAddress != mover.ip+":9470" {
			return false, "member list address " + m.RaftAddress
		}
		// Replication reaches it at the new address.
		return mover.srv.raft.AppliedIndex() >= l.srv.raft.CommitIndex(), "mover behind"
	})
}

func TestDeadVoterReplaced(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) { c.Voters = 3 }
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	cfg, _ := l.srv.configuration()
	var victim *testNode
	for _, n := range z.running() {
		if n != l && cfg[n.srv.ServerID()].Suffrage == raft.Voter {
			victim = n
			break
		}
	}
	victimID := victim.srv.ServerID()
	z.stop(victim.name)
	poll.Until(t, 60*time.Second, "dead voter replaced", func() (bool, string) {
		l, why := z.leader()
		if l == nil {
			return false, why
		}
		cfg, _ := l.srv.configuration()
		voters := 0
		for id, s := range cfg {
			if s.Suffrage == raft.Voter {
				if id == victimID {
					return false, "victim still votes"
				}
				voters++
			}
		}
		return voters == 3, fmt.Sprintf("%d voters", voters)
	})
}

func TestDataDirInUse(t *testing.T) {
	z := newTestZone(t, 1)
	n := z.start("node-1")
	cfg := testConfig(n)
	cfg.AdvertiseAddress = z.prefix + "99"
	cfg.Network = z.fabric.Host(cfg.AdvertiseAddress)
	srv, err := New(cfg, Deps{Members: z.list, Genesis: z.genesis})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clock = nil
	err = srv.Run(t.Context())
	if err == nil {
		t.Fatal("second agent ran on a data dir in use")
	}
	if _, statErr := os.Stat(filepath.Join(n.dir, serverIDFile)); statErr != nil {
		t.Fatal(statErr)
	}
	t.Logf("second agent refused: %v", err)
}

func TestLostRaftLogDiscardsStaleState(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	victim := z.nodes["node-3"]
	if l, _ := z.leader(); l == victim {
		victim = z.nodes["node-2"]
	}
	z.stop(victim.name)
	// The Raft log and ID go, the replicated state file stays behind.
	removeAll(t, filepath.Join(victim.dir, "raft"))
	removeAll(t, filepath.Join(victim.dir, serverIDFile))
	n := z.start(victim.name)
	l := z.waitConverged(60*time.Second, 3)
	poll.Until(t, 60*time.Second, "rejoined member catches up", func() (bool, string) {
		mine, _ := n.srv.store.Members()
		theirs, _ := l.srv.store.Members()
		return fmt.Sprint(mine) == fmt.Sprint(theirs), fmt.Sprintf("%d vs %d members", len(mine), len(theirs))
	})
}

func TestTrafficIsCounted(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	if got := testutil.ToFloat64(l.srv.metrics.rpcs.WithLabelValues("heartbeat")); got == 0 {
		t.Error("leader counted no heartbeats")
	}
	for _, n := range z.running() {
		sent := portCounter(t, n, "edgequorum_transport_bytes_total", "direction", "sent")
		recv := portCounter(t, n, "edgequorum_transport_bytes_total", "direction", "received")
		host := z.fabric.Host(n.ip).Counters()
		// The member's own count and the fabric's agree to within what is in
		// flight: both count every byte on the zone port.
		if sent == 0 || recv == 0 || sent > float64(host.BytesSent)*1.1+4096 || float64(host.BytesSent) > sent*1.1+4096 {
			t.Errorf("%s counted %v sent / %v received; fabric saw %d sent", n.name, sent, recv, host.BytesSent)
		}
	}
}

// TestHeartbeatsShareEntries shows the leader commits reports that change
// nothing in shared entries (each entry goes to every follower), while a
// report with a change still gets through.
func TestHeartbeatsShareEntries(t *testing.T) {
	z := newTestZone(t, 7)
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	entries := func() uint64 {
		var m dto.Metric
		l.srv.metrics.applyDuration.WithLabelValues("reports").(prometheus.Histogram).Write(&m)
		return m.GetHistogram().GetSampleCount()
	}
	accepted := func() float64 { return testutil.ToFloat64(l.srv.metrics.reportsAccepted) }
	e0, a0 := entries(), accepted()
	waitRounds(t, z.running(), 10)
	e1, a1 := entries(), accepted()
	reports, batches := a1-a0, float64(e1-e0)
	t.Logf("%v reports in %v entries", reports, batches)
	if batches == 0 || reports/batches < 2 {
		t.Fatalf("%v reports took %v entries; heartbeats should share entries", reports, batches)
	}
	// A change is still committed and judged.
	victim := "node-7"
	if l.name == victim {
		victim = "node-6"
	}
	z.setDead(victim, true)
	z.waitVerdicts(60*time.Second, map[string]zone.State{victim: zone.Unhealthy})
}

// A leader told to stop (a rolling upgrade, a drain) hands leadership over
// before it goes, so the zone does not sit out an election timeout.
func TestStoppingLeaderHandsOver(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	old := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	oldSrv, oldTerm := old.srv, old.srv.Term()

	z.stop(old.name)
	if got := testutil.ToFloat64(oldSrv.metrics.transfers.WithLabelValues("stop_ok")); got != 1 {
		t.Fatalf("transfers{result=stop_ok} = %v on the stopped leader, want 1; stop_failed = %v; its log:\n%s",
			got, testutil.ToFloat64(oldSrv.metrics.transfers.WithLabelValues("stop_failed")), old.logs.String())
	}
	l := z.waitLeader(30 * time.Second)
	// A transfer makes its target leader in the very next term; an election
	// after a timeout may take more.
	if l.srv.Term() != oldTerm+1 {
		t.Fatalf("new leader %s in term %d, want %d (the transfer's)", l.name, l.srv.Term(), oldTerm+1)
	}
}

// TestKubeletPortReplicated: the kubelet port a member's Node publishes
// reaches every member's replicated list, so peers' kubelet probes connect
// there, during a cloud outage too.
func TestKubeletPortReplicated(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(60*time.Second, 3)
	cands := z.candidates()
	for i := range cands {
		if cands[i].Node == "node-2" {
			cands[i].KubeletPort = 10350
		}
	}
	z.list.set(cands, true)
	poll.Until(t, 60*time.Second, "node-2's kubelet port on every member", func() (bool, string) {
		for _, n := range z.running() {
			for _, p := range n.srv.Peers() {
				if p.Node == "node-2" && p.KubeletPort != 10350 {
					return false, fmt.Sprintf("%s probes node-2's kubelet at port %d", n.name, p.KubeletPort)
				}
			}
			if m, err := n.srv.store.Member("node-2"); err != nil || m.KubeletPort != 10350 {
				return false, fmt.Sprintf("%s's list has node-2 with port %d (%v)", n.name, m.KubeletPort, err)
			}
		}
		return true, ""
	})
	// A Node that publishes no port keeps the port the zone knows. The
	// same reconcile takes node-3's new port, so once that is in, node-2's
	// was looked at.
	for i := range cands {
		cands[i].KubeletPort = 0
		if cands[i].Node == "node-3" {
			cands[i].KubeletPort = 10400
		}
	}
	z.list.set(cands, true)
	poll.Until(t, 60*time.Second, "node-3's kubelet port on every member", func() (bool, string) {
		for _, n := range z.running() {
			if m, err := n.srv.store.Member("node-3"); err != nil || m.KubeletPort != 10400 {
				return false, fmt.Sprintf("%s's list has node-3 with port %d (%v)", n.name, m.KubeletPort, err)
			}
		}
		return true, ""
	})
	for _, n := range z.running() {
		if m, err := n.srv.store.Member("node-2"); err != nil || m.KubeletPort != 10350 {
			t.Fatalf("%s's list has node-2 with port %d (%v) after its Node stopped publishing one", n.name, m.KubeletPort, err)
		}
	}
}

// TestLeaderPacesHeartbeatsOnlyWhileLeading: the leader heartbeats idle
// followers at --raft-heartbeat-interval (its raft HeartbeatTimeout five
// times that) and gives the pace up with the leadership. The member it hands
// over to takes it; the old leader runs on the configured timeout again,
// which is how soon it notices that its successor died.
func TestLeaderPacesHeartbeatsOnlyWhileLeading(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	old := z.waitConverged(60*time.Second, 3)
	cfg := testConfig(old)
	leading, following := 5*cfg.leaderHeartbeatInterval(), cfg.RaftHeartbeatTimeout
	paced := func(leader *testNode) func() (bool, string) {
		return func() (bool, string) {
			for _, n := range z.running() {
				want := following
				if n == leader {
					want = leading
				}
				if got := n.srv.raft.ReloadableConfig().HeartbeatTimeout; got != want {
					return false, fmt.Sprintf("%s runs a heartbeat timeout of %s, want %s", n.name, got, want)
				}
			}
			return true, ""
		}
	}
	poll.Until(t, 30*time.Second, "the leader alone paced", paced(old))

	if err := old.srv.raft.LeadershipTransfer().Error(); err != nil {
		t.Fatalf("hand over leadership: %v", err)
	}
	var next *testNode
	poll.Until(t, 30*time.Second, "a new leader", func() (bool, string) {
		next, _ = z.leader()
		return next != nil && next != old, "still " + old.name
	})
	poll.Until(t, 30*time.Second, "the new leader alone paced", paced(next))
	z.waitVerdicts(30*time.Second, allHealthy(z.names()))
}
