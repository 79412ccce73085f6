package raftzone

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// thief is a client holding what root on one stolen follower holds: its node
// key, server ID and zone-port address, and the zone key.
type thief struct {
	t    *testing.T
	z    *testZone
	me   testPeer
	ip   string
	net  *zoneport.Port
	addr string
}

func steal(t *testing.T, z *testZone, n *testNode, serverID string) *thief {
	t.Helper()
	me := peerOf(t, n)
	if serverID != "" {
		me.serverID = serverID
	}
	return &thief{t: t, z: z, me: me, ip: n.ip, addr: n.ip + ":9470", net: peerNet(t, z.fabric.Host(n.ip), z.keys, me, z.list)}
}

func (th *thief) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(th.me.serverID), Addr: []byte(th.addr)}
}

// rpc sends one Raft RPC to target and returns its answer, or an error when the
// member closed the connection instead (the guard refused it).
func (th *thief) rpc(target *testNode, typ byte, req, resp any) error {
	th.t.Helper()
	c, err := th.net.DialRaft(th.t.Context(), target.ip+":9470")
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(encodeRPC(th.t, typ, req)); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	return zoneport.ReadRPCResponse(bufio.NewReader(c), resp)
}

// encodeRPC frames req as raft's transport sends it.
func encodeRPC(t testing.TB, typ byte, req any) []byte {
	t.Helper()
	b, err := zoneport.EncodeRPC(typ, req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastLog is the index and term of n's last entry, a snapshot's when it has
// no log after its latest snapshot (a member that caught up from one).
func lastLog(n *testNode) (index, term uint64) {
	st := n.srv.raft.Stats()
	index, _ = strconv.ParseUint(st["last_log_index"], 10, 64)
	term, _ = strconv.ParseUint(st["last_log_term"], 10, 64)
	if si, _ := strconv.ParseUint(st["last_snapshot_index"], 10, 64); si > index {
		st, _ := strconv.ParseUint(st["last_snapshot_term"], 10, 64)
		return si, st
	}
	return index, term
}

// leadersOf returns whom each running member follows.
func leadersOf(z *testZone) map[string]string {
	out := map[string]string{}
	for _, n := range z.running() {
		_, id := n.srv.raft.LeaderWithID()
		out[n.name] = string(id)
	}
	return out
}

// TestStolenFollowerCannotTakeTheZone replays the hijack of a live zone: a
// client with one follower's identity sends AppendEntries at term+1 — under a
// fresh server ID in no configuration, then under the follower's own — and
// keeps sending heartbeats. No member follows it, the terms do not move, the
// zone keeps its leader, and every refusal is counted.
func TestStolenFollowerCannotTakeTheZone(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var stolen *testNode
	cfg, _ := l.srv.configuration()
	for _, n := range z.running() {
		if srv, ok := cfg[n.srv.ServerID()]; n != l && ok && srv.Suffrage == raft.Voter {
			stolen = n
		}
	}
	leaderID := l.srv.ServerID()
	term := l.srv.raft.CurrentTerm()
	others := []*testNode{}
	for _, n := range z.running() {
		if n != stolen {
			others = append(others, n)
		}
	}

	for _, tc := range []struct {
		name     string
		serverID string
	}{
		{"under a fresh server ID", uuid.NewString()},
		{"under its own server ID", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := steal(t, z, stolen, tc.serverID)
			for round := range 10 {
				for _, target := range others {
					idx, lt := lastLog(target)
					req := &raft.AppendEntriesRequest{RPCHeader: th.header(), Term: term + 1,
						PrevLogEntry: idx, PrevLogTerm: lt, LeaderCommitIndex: idx}
					if round > 0 {
						req.Term = term // heartbeats at the zone's own term
					}
					var resp raft.AppendEntriesResponse
					if err := th.rpc(target, zoneport.RPCAppendEntries, req, &resp); err == nil {
						t.Fatalf("round %d: %s answered the thief's AppendEntries: %+v", round, target.name, resp)
					}
				}
				for node, id := range leadersOf(z) {
					if node != stolen.name && id != leaderID {
						t.Fatalf("round %d: %s follows %q, want the leader %s", round, node, id, leaderID)
					}
				}
			}
		})
	}
	for _, n := range others {
		if got := n.srv.raft.CurrentTerm(); got != term {
			t.Errorf("%s moved from term %d to %d", n.name, term, got)
		}
	}
	refused := 0.0
	for _, n := range others {
		for _, reason := range []string{zoneport.RejectLeaderAlive, zoneport.RejectSecondLeader} {
			refused += testutil.ToFloat64(n.srv.metrics.raftRefused.WithLabelValues(reason))
		}
	}
	if refused == 0 {
		t.Error("no refusal counted as leader_alive or second_leader")
	}
	// The zone still judges: the real leader dies, the rest elect and judge.
	z.killAndJudge(l.name)
}

// TestElectedThiefCannotRewriteTheZone: the one thing a stolen voter can still
// do is force an election — ask for votes with the leadership-transfer flag,
// lying about its log — and win it. Every member counts it. As leader it then
// commits what it likes: a member list that pins its own key for every other
// member, and "healthy" for a node the zone judged dead. Every replica applies
// neither: the keys stay the ones the Nodes register, the dead node stays
// unhealthy, and the refusals are counted.
func TestElectedThiefCannotRewriteTheZone(t *testing.T) {
	z := newTestZone(t, 5)
	z.startAll()
	l := z.waitConverged(60*time.Second, 5)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var stolen, dead *testNode
	for _, n := range z.running() {
		switch {
		case n == l:
		case stolen == nil:
			stolen = n
		case dead == nil:
			dead = n
		}
	}
	z.stop(dead.name)
	want := allHealthy(z.names())
	want[dead.name] = zone.Unhealthy
	z.waitVerdicts(60*time.Second, want)
	// The thief takes the box down and speaks for it.
	th := steal(t, z, stolen, "")
	z.stop(stolen.name)
	honest := z.running()
	poll.Until(t, 30*time.Second, "the honest members follow one of their own in one term", func() (bool, string) {
		l, _ := honest[0].srv.raft.LeaderWithID()
		term := honest[0].srv.raft.CurrentTerm()
		for _, n := range honest {
			nl, _ := n.srv.raft.LeaderWithID()
			if nl == "" || nl != l || n.srv.raft.CurrentTerm() != term || string(nl) == th.addr {
				return false, fmt.Sprintf("%s follows %q in term %d", n.name, nl, n.srv.raft.CurrentTerm())
			}
		}
		return true, ""
	})
	members, err := honest[0].srv.store.Members()
	if err != nil {
		t.Fatal(err)
	}
	_, forgedKey, _ := ed25519.GenerateKey(nil)
	repin := make([]zone.Member, len(members))
	copy(repin, members)
	for i := range repin {
		if repin[i].Node != stolen.name {
			repin[i].PublicKey = zone.EncodeNodeKey(forgedKey.Public().(ed25519.PublicKey))
		}
	}
	memberSet, err := store.EncodeMemberSet(store.MemberSet{Members: repin})
	if err != nil {
		t.Fatal(err)
	}

	term := uint64(0)
	for _, n := range honest {
		term = max(term, n.srv.raft.CurrentTerm())
	}
	term++
	before := map[string]float64{}
	for _, n := range honest {
		before[n.name] = testutil.ToFloat64(n.srv.metrics.forcedElections.WithLabelValues(stolen.name, "allowed"))
	}
	granted := 0
	for _, n := range honest {
		idx, lt := lastLog(n)
		req := &raft.RequestVoteRequest{RPCHeader: th.header(), Term: term, LastLogIndex: idx + 1000, LastLogTerm: lt,
			LeadershipTransfer: true}
		var resp raft.RequestVoteResponse
		if err := th.rpc(n, zoneport.RPCRequestVote, req, &resp); err == nil && resp.Granted {
			granted++
		}
	}
	if granted < 3 {
		t.Fatalf("the thief won %d votes; the test needs it elected", granted)
	}
	verdict := zone.Verdict{Node: dead.name, State: zone.Healthy, Pros: 3, Members: len(members), Term: term,
		Leader: stolen.name, DecidedAt: time.Now().UTC()}
	verdicts, err := store.EncodeVerdictBatch(store.VerdictBatch{Verdicts: []zone.Verdict{verdict},
		Basis: 1 << 40, VoteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]uint64{}
	took := 0
	for _, n := range honest {
		idx, lt := lastLog(n)
		req := &raft.AppendEntriesRequest{RPCHeader: th.header(), Term: term,
			PrevLogEntry: idx, PrevLogTerm: lt, LeaderCommitIndex: idx + 2,
			Entries: []*raft.Log{
				{Index: idx + 1, Term: term, Type: raft.LogCommand, Data: memberSet},
				{Index: idx + 2, Term: term, Type: raft.LogCommand, Data: verdicts},
			}}
		var resp raft.AppendEntriesResponse
		if err := th.rpc(n, zoneport.RPCAppendEntries, req, &resp); err != nil || !resp.Success {
			t.Fatalf("%s did not take the elected thief's entries: %v %+v", n.name, err, resp)
		}
		applied[n.name] = idx + 2
	}
	for _, n := range honest {
		poll.Until(t, 10*time.Second, n.name+" applies the thief's entries", func() (bool, string) {
			idx, _ := n.srv.store.AppliedIndex()
			return idx >= applied[n.name], fmt.Sprintf("applied %d", idx)
		})
		// A member whose log holds another leader's entries of the same
		// term at those indexes (an honest election raced the thief's)
		// took the thief's as duplicates and applied its own.
		var got raft.Log
		tookThem := n.srv.boltStore.GetLog(applied[n.name]-1, &got) == nil && bytes.Equal(got.Data, memberSet)
		if got := testutil.ToFloat64(n.srv.metrics.forcedElections.WithLabelValues(stolen.name, "allowed")); got != before[n.name]+1 {
			t.Errorf("%s counted %v forced elections by %s, want %v", n.name, got, stolen.name, before[n.name]+1)
		}
		for _, m := range members {
			got, err := n.srv.store.Member(m.Node)
			if err != nil || got.PublicKey != m.PublicKey {
				t.Errorf("%s pins %s's key %q (%v), want its own %q", n.name, m.Node, got.PublicKey, err, m.PublicKey)
			}
		}
		if v, err := n.srv.store.Verdict(dead.name); err != nil || v.State != zone.Unhealthy {
			t.Errorf("%s holds %s as %+v (%v), want unhealthy", n.name, dead.name, v, err)
		}
		if !tookThem {
			t.Logf("%s applied another leader's entries where the thief's went", n.name)
			continue
		}
		took++
		if n.srv.store.Refused(store.HoldUnregistered) == 0 {
			t.Errorf("%s counted no held-back key", n.name)
		}
		if n.srv.store.Refused(store.RefuseVerdictStale)+n.srv.store.Refused(store.RefuseVerdictUnsupported) == 0 {
			t.Errorf("%s counted no refused verdict", n.name)
		}
	}
	if took < 2 {
		t.Errorf("%d members applied the elected thief's entries, want a majority of the honest", took)
	}
	// The thief goes quiet: the honest members elect one of their own and
	// judge again.
	z.start(dead.name)
	want = allHealthy(z.names())
	want[stolen.name] = zone.Unhealthy
	z.waitVerdicts(60*time.Second, want)
}

// TestLaggingFollowerCatchesUpWithALeaderItDoesNotKnow: a voter is away while
// the zone adds two servers and hands leadership to one of them. Back, its
// configuration does not list its new leader, so its guard refuses it — until
// a majority of the voters it knows name that server as leader of the term
// (attest.go); then it follows, and the entries it receives bring its
// configuration up to date.
func TestLaggingFollowerCatchesUpWithALeaderItDoesNotKnow(t *testing.T) {
	z := newTestZone(t, 5)
	z.tweak = func(c *Config) { c.DeadVoterTimeout = time.Hour }
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		z.start(n)
	}
	z.waitConverged(60*time.Second, 3)
	away := z.nodes["node-3"]
	if away.srv.raft.State() == raft.Leader {
		l := z.waitLeader(10 * time.Second)
		if err := l.srv.raft.LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, "node-3 a follower", func() (bool, string) {
			return away.srv.raft.State() == raft.Follower, away.srv.raft.State().String()
		})
	}
	z.stop(away.name)
	z.start("node-4")
	z.start("node-5")
	var newcomer *testNode
	poll.Until(t, 60*time.Second, "the newcomers are voters", func() (bool, string) {
		l := z.waitLeader(10 * time.Second)
		cfg, _ := l.srv.configuration()
		n4, in4 := cfg[z.nodes["node-4"].srv.ServerID()]
		n5, in5 := cfg[z.nodes["node-5"].srv.ServerID()]
		return in4 && in5 && n4.Suffrage == raft.Voter && n5.Suffrage == raft.Voter,
			fmt.Sprintf("node-4 %v %v, node-5 %v %v", in4, n4.Suffrage, in5, n5.Suffrage)
	})
	newcomer = z.nodes["node-4"]
	poll.Until(t, 30*time.Second, "node-4 leads", func() (bool, string) {
		if newcomer.srv.raft.State() == raft.Leader {
			return true, ""
		}
		// A transfer fails while the leader has not replicated to its
		// target yet; try again.
		l := z.waitLeader(10 * time.Second)
		err := l.srv.raft.LeadershipTransferToServer(raft.ServerID(newcomer.srv.ServerID()), raft.ServerAddress(newcomer.ip+":9470")).Error()
		return newcomer.srv.raft.State() == raft.Leader, fmt.Sprintf("transfer from %s: %v", l.name, err)
	})

	// The old servers restart, so that no replication of an earlier term
	// is still on its way to the returning voter: only node-4 can reach it.
	for _, n := range []string{"node-1", "node-2"} {
		z.stop(n)
		z.start(n)
	}
	poll.Until(t, 30*time.Second, "everyone follows node-4", func() (bool, string) {
		for _, n := range z.running() {
			if _, id := n.srv.raft.LeaderWithID(); n != newcomer && string(id) != newcomer.srv.ServerID() {
				return false, n.name + " follows " + string(id)
			}
		}
		return true, ""
	})
	z.start(away.name)
	poll.Until(t, 60*time.Second, "the returning voter follows node-4 and learns the configuration", func() (bool, string) {
		_, id := away.srv.raft.LeaderWithID()
		cfg, _ := away.srv.configuration()
		_, knows := cfg[newcomer.srv.ServerID()]
		return string(id) == newcomer.srv.ServerID() && knows, fmt.Sprintf("follows %q, configuration lists node-4: %v", id, knows)
	})
	if !away.srv.attest.attested(newcomer.srv.ServerID(), newcomer.srv.raft.CurrentTerm()) {
		t.Error("the returning voter followed node-4 without an attestation")
	}
	poll.Until(t, 30*time.Second, "caught up", func() (bool, string) {
		return away.srv.raft.AppliedIndex() >= newcomer.srv.raft.CommitIndex(), fmt.Sprintf("applied %d of %d", away.srv.raft.AppliedIndex(), newcomer.srv.raft.CommitIndex())
	})
}

// TestElectedThiefThatCommitsNothingIsGivenUp: a stolen voter forces an
// election, wins it and then only sends heartbeats: it commits no member's
// report. Each honest member stops following it once its reports have gone
// uncommitted for the stall timeout, and the zone elects one of its own; the
// stall is counted and shown in the members' status.
func TestElectedThiefThatCommitsNothingIsGivenUp(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var stolen *testNode
	for _, n := range z.running() {
		if n != l {
			stolen = n
		}
	}
	th := steal(t, z, stolen, "")
	z.stop(stolen.name)
	honest := z.running()
	term := uint64(0)
	for _, n := range honest {
		term = max(term, n.srv.raft.CurrentTerm())
	}
	term++
	granted := 0
	for _, n := range honest {
		idx, lt := lastLog(n)
		var resp raft.RequestVoteResponse
		req := &raft.RequestVoteRequest{RPCHeader: th.header(), Term: term, LastLogIndex: idx + 1000, LastLogTerm: lt, LeadershipTransfer: true}
		if err := th.rpc(n, zoneport.RPCRequestVote, req, &resp); err == nil && resp.Granted {
			granted++
		}
	}
	if granted == 0 {
		t.Fatal("the thief won no vote; the test needs it elected")
	}
	// Heartbeats that commit nothing, until the test ends.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, n := range honest {
				idx, lt := lastLog(n)
				var resp raft.AppendEntriesResponse
				th.rpc(n, zoneport.RPCAppendEntries, &raft.AppendEntriesRequest{RPCHeader: th.header(), Term: term,
					PrevLogEntry: idx, PrevLogTerm: lt, LeaderCommitIndex: idx}, &resp)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); <-done }()
	poll.Until(t, 10*time.Second, "the honest members follow the thief", func() (bool, string) {
		follows := 0
		for _, n := range honest {
			if _, id := n.srv.raft.LeaderWithID(); string(id) == th.me.serverID {
				follows++
			}
		}
		return follows > 0, fmt.Sprintf("%d follow it", follows)
	})
	poll.Until(t, 60*time.Second, "an honest member leads again", func() (bool, string) {
		for _, n := range honest {
			if n.srv.raft.State() == raft.Leader {
				return true, ""
			}
		}
		return false, fmt.Sprintf("leaders %v", leadersOf(z))
	})
	stalls := 0.0
	for _, n := range honest {
		stalls += testutil.ToFloat64(n.srv.metrics.leaderStalls)
		if st := n.srv.Status(); len(st.ForcedElections) == 0 || st.ForcedElections[0].Node != stolen.name {
			t.Errorf("%s's status shows forced elections %+v, want %s's", n.name, st.ForcedElections, stolen.name)
		}
	}
	if stalls == 0 {
		t.Error("no member counted a stalled leader")
	}
	// Verdicts go on: the stolen box, silent, is judged.
	z.waitVerdicts(60*time.Second, map[string]zone.State{stolen.name: zone.Unhealthy})
}
