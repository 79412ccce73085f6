package raftzone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/peerctx"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// The tests in this file act as a member whose box was taken apart: they hold
// the zone key and that member's node identity, and try to speak for others.

// forward relays every connection to listenAddr on to target, dialling from
// the listener's host so the zone port admits the address.
func forward(t *testing.T, z *testZone, listenIP, target string) {
	t.Helper()
	host := z.fabric.Host(listenIP)
	l, err := host.Listen("tcp", listenIP+":9470")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := host.DialContext(context.Background(), "tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
}

// TestAgentProbeRefusesAnImpostor: a dead node's address taken over and
// forwarded to a live member passes the zone-key proof, but the agent probe
// meant for the dead node sees another node answer and fails.
func TestAgentProbeRefusesAnImpostor(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(60*time.Second, 3)
	prober, dead, live := z.nodes["node-1"], z.nodes["node-3"], z.nodes["node-2"]
	z.stop(dead.name)
	forward(t, z, dead.ip, live.ip+":9470")

	get := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+dead.ip+":9470/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := prober.srv.client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	// The relay works: without naming the target, "someone with the key"
	// answers — all the agent probe used to check.
	if err := get(t.Context()); err != nil {
		t.Fatalf("request through the relay without a target: %v", err)
	}
	prober.srv.client.CloseIdleConnections()
	err := get(peerctx.With(t.Context(), dead.name))
	if !errors.Is(err, zoneport.ErrWrongPeer) {
		t.Fatalf("probe of %s answered by %s: err %v, want %v", dead.name, live.name, err, zoneport.ErrWrongPeer)
	}
}

// TestMemberCannotJoinAsAnother: holding node-2's identity, a join as node-3,
// or as node-2 from another address, is refused and counted.
func TestMemberCannotJoinAsAnother(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	var thief, victim *testNode
	for _, name := range z.names() {
		if n := z.nodes[name]; n != l && thief == nil {
			thief = n
		} else if n != l {
			victim = n
		}
	}
	me := peerOf(t, thief)
	client := peerNet(t, z.fabric.Host(thief.ip), z.keys, me, z.list)
	victimMember, err := l.srv.store.Member(victim.name)
	if err != nil {
		t.Fatal(err)
	}
	join := func(req joinRequest) *PeerError {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := callWith(ctx, client, l.ip+":9470", "/v1/join", req)
		var pe *PeerError
		if !errors.As(err, &pe) {
			t.Fatalf("join %+v: %v, want a refusal", req, err)
		}
		return pe
	}
	asVictim := joinRequest{Zone: testZoneName, Node: victim.name, ServerID: me.serverID,
		RaftAddress: thief.ip + ":9470", ProbeAddress: thief.ip, PublicKey: zone.EncodeNodeKey(me.pub())}
	before := testutil.ToFloat64(l.srv.metrics.callerRefused.WithLabelValues("join"))
	if pe := join(asVictim); pe.Status != http.StatusForbidden || pe.Reason != "not_caller" {
		t.Errorf("join as %s: %d %s, want 403 not_caller", victim.name, pe.Status, pe.Reason)
	}
	if got := testutil.ToFloat64(l.srv.metrics.callerRefused.WithLabelValues("join")); got != before+1 {
		t.Errorf("refusals counted %v, want %v", got, before+1)
	}
	moved := joinRequest{Zone: testZoneName, Node: thief.name, ServerID: me.serverID,
		RaftAddress: victim.ip + ":9470", ProbeAddress: victim.ip, PublicKey: zone.EncodeNodeKey(me.pub())}
	if pe := join(moved); pe.Status != http.StatusForbidden || pe.Reason != "address_taken" {
		t.Errorf("join from %s's address: %d %s, want 403 address_taken", victim.name, pe.Status, pe.Reason)
	}
	// While the cloud is away only pinned identities count: the thief may
	// rejoin as itself, but not from the victim's address.
	z.list.set(z.candidates(), false)
	if pe := join(moved); pe.Status != http.StatusForbidden || pe.Reason != "address_mismatch" {
		t.Errorf("join from %s's address with the cloud away: %d %s, want 403 address_mismatch", victim.name, pe.Status, pe.Reason)
	}
	if pe := join(asVictim); pe.Status != http.StatusForbidden || pe.Reason != "not_caller" {
		t.Errorf("join as %s with the cloud away: %d %s, want 403 not_caller", victim.name, pe.Status, pe.Reason)
	}
	z.list.set(z.candidates(), true)
	// The victim's pinned identity is as it was (its role may have moved on
	// meanwhile: the leader's reconcile records suffrage changes).
	got, err := l.srv.store.Member(victim.name)
	if err != nil || got.ServerID != victimMember.ServerID || got.RaftAddress != victimMember.RaftAddress ||
		got.ProbeAddress != victimMember.ProbeAddress || got.PublicKey != victimMember.PublicKey {
		t.Errorf("%s's member entry changed: %+v, %v; was %+v", victim.name, got, err, victimMember)
	}
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
}

// callWith posts in to a peer through sn's peer-API client.
func callWith(ctx context.Context, sn *zoneport.Port, addr, path string, in any) error {
	s := &Member{client: sn.HTTPClient(), metrics: newMetrics(nil)}
	return s.callPeer(ctx, addr, path, in, nil)
}

// TestNoReplicaAppliesAReportItsSenderDidNotSign: even the leader cannot commit
// words a member did not say — every replica checks the node signature on
// apply, skips the report the same way, and counts it.
func TestNoReplicaAppliesAReportItsSenderDidNotSign(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var victim *testNode
	for _, n := range z.running() {
		if n != l {
			victim = n
		}
	}
	last := l.srv.store.LastSeq(victim.name)
	forged := zone.Report{Zone: testZoneName, From: victim.name, Seq: last + 1<<20, SentAt: time.Now().UTC(),
		Results: []zone.Result{{Peer: l.name, OK: false}}}
	id, key := z.keys.SigningKey()
	if err := forged.Sign(id, key); err != nil {
		t.Fatal(err)
	}
	if err := forged.SignNode(peerOf(t, l).key); err != nil { // the leader signs for the victim
		t.Fatal(err)
	}
	cmd, err := store.EncodeReportBatch(store.ReportBatch{At: time.Now().UTC(), Reports: []zone.Report{forged}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.srv.apply(t.Context(), "reports", cmd); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "every replica refused the forged report", func() (bool, string) {
		for _, n := range z.running() {
			if got := n.srv.store.RefusedReports(store.RefuseSignature); got != 1 {
				return false, fmt.Sprintf("%s refused %d", n.name, got)
			}
		}
		return true, ""
	})
	for _, n := range z.running() {
		if got := n.srv.store.LastSeq(victim.name); got >= last+1<<20 {
			t.Errorf("%s applied the forged seq %d for %s", n.name, got, victim.name)
		}
		// The victim itself finds the leader healthy; only the forgery says otherwise.
		if row, err := n.srv.store.MatrixRow(victim.name); err != nil || !row[l.name].OK {
			t.Errorf("%s holds %s's view of %s as %+v (%v), want the victim's own (ok)", n.name, victim.name, l.name, row[l.name], err)
		}
	}
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
}

// TestZoneWorksThroughAConnectionFlood: 1,000 connections from an address that
// is no member's are closed before TLS, so a leader is still elected and
// reports still commit; the verdict latency of a dead member is logged.
func TestZoneWorksThroughAConnectionFlood(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	// The flood keeps 1,000 connections open: each closed one is dialled
	// again, so without the address gate they would hold every handshake
	// slot for good.
	outsider := z.fabric.Host(z.prefix + "250")
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	targets := z.running()
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := targets[i%len(targets)].ip + ":9470"
			for ctx.Err() == nil {
				c, err := outsider.DialContext(ctx, "tcp", addr)
				if err == nil {
					context.AfterFunc(ctx, func() { c.Close() })
					c.Read(make([]byte, 1)) // until the member closes it
					c.Close()
				}
				select { // pace the re-dial; the flood is not a CPU test
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}
	poll.Until(t, 30*time.Second, "the flood refused before TLS", func() (bool, string) {
		got := portCounter(t, l, "edgequorum_transport_handshake_failures_total", "reason", "not_member_address")
		return got >= 1000, fmt.Sprintf("%v refused", got)
	})
	// Kill the leader under the flood: the others elect a new one and judge it.
	start := time.Now()
	z.killAndJudge(l.name)
	t.Logf("under a flood of 1,000 connections: leader death to committed verdict in %s", time.Since(start).Round(time.Millisecond))
}

// TestRaftRPCsCannotRaiseTermsOrCrashAMember: with a member's identity and a
// Raft connection of its own, an AppendEntries at term 2^64−1, a configuration
// entry that would panic raft's decoder, or an RPC in another member's name
// never reach hashicorp/raft; the target keeps its term and keeps working.
func TestRaftRPCsCannotRaiseTermsOrCrashAMember(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var thief, target *testNode
	for _, n := range z.running() {
		switch {
		case n == l:
		case thief == nil:
			thief = n
		default:
			target = n
		}
	}
	me := peerOf(t, thief)
	client := peerNet(t, z.fabric.Host(thief.ip), z.keys, me, z.list)
	header := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(me.serverID), Addr: []byte(thief.ip + ":9470")}
	badConfig := []byte{0x81, 0xa7, 'S', 'e', 'r', 'v', 'e', 'r', 's', 0x91, 0xc0} // {"Servers": [nil]}
	cases := []struct {
		name   string
		req    *raft.AppendEntriesRequest
		reason string
	}{
		{"term 2^64-1", &raft.AppendEntriesRequest{RPCHeader: header, Term: math.MaxUint64}, zoneport.RejectTerm},
		{"crafted configuration entry", &raft.AppendEntriesRequest{RPCHeader: header, Term: target.srv.raft.CurrentTerm(),
			PrevLogEntry: 1<<40 - 1, PrevLogTerm: 1, Entries: []*raft.Log{{Index: 1 << 40, Term: 1, Type: raft.LogConfiguration, Data: badConfig}}}, zoneport.RejectBadConfigEntry},
		{"in the leader's name", &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte(l.srv.serverID),
			Addr: []byte(l.ip + ":9470")}, Term: target.srv.raft.CurrentTerm()}, zoneport.RejectHeaderID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			term := target.srv.raft.CurrentTerm()
			before := testutil.ToFloat64(target.srv.metrics.raftRefused.WithLabelValues(tc.reason))
			c, err := client.DialRaft(t.Context(), target.ip+":9470")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(encodeRPC(t, zoneport.RPCAppendEntries, tc.req))
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if n, err := c.Read(make([]byte, 64)); err == nil {
				t.Fatalf("the member answered the RPC (%d bytes)", n)
			}
			poll.Until(t, 10*time.Second, "refusal counted", func() (bool, string) {
				got := testutil.ToFloat64(target.srv.metrics.raftRefused.WithLabelValues(tc.reason))
				return got == before+1, fmt.Sprintf("%v refusals", got)
			})
			if got := target.srv.raft.CurrentTerm(); got > term+1 {
				t.Errorf("term moved from %d to %d", term, got)
			}
		})
	}
	// The target still follows and the zone still judges.
	z.killAndJudge(l.name)
}

// TestMembersPinnedBeforeNodeKeysGetTheirRegisteredKey: a member list written
// before node keys existed (an upgrade) holds no keys. The members still talk,
// vouched for by their Node registrations, and the leader pins the registered
// keys, after which reports verify again and the zone judges as before.
func TestMembersPinnedBeforeNodeKeysGetTheirRegisteredKey(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	members, err := l.srv.store.Members()
	if err != nil {
		t.Fatal(err)
	}
	var legacy []zone.Member
	for _, m := range members {
		if m.Node != l.name {
			m.PublicKey = ""
		}
		legacy = append(legacy, m)
	}
	cmd, err := store.EncodeMemberSet(store.MemberSet{Members: legacy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.srv.apply(t.Context(), "members", cmd); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "registered keys pinned on every replica", func() (bool, string) {
		for _, n := range z.running() {
			for _, name := range z.names() {
				m, err := n.srv.store.Member(name)
				if err != nil || m.PublicKey != zone.EncodeNodeKey(peerOf(t, z.nodes[name]).pub()) {
					return false, fmt.Sprintf("%s sees %s with key %q (%v)", n.name, name, m.PublicKey, err)
				}
			}
		}
		return true, ""
	})
	// Reports verify again: a member that dies now is judged.
	var victim *testNode
	for _, n := range z.running() {
		if n != l {
			victim = n
		}
	}
	z.killAndJudge(victim.name)
}

// TestNodeCannotClaimAnotherMembersAddress: a kubelet writes its own Node's
// addresses, so a stolen node may claim a peer's IP there. The zone keeps the
// claimant at its old address instead of sending it the peer's Raft traffic and
// probes, and the peer stays a healthy voter.
func TestNodeCannotClaimAnotherMembersAddress(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var thief, victim *testNode
	for _, n := range z.running() {
		switch {
		case n == l:
		case thief == nil:
			thief = n
		default:
			victim = n
		}
	}
	cands := z.candidates()
	for i := range cands {
		if cands[i].Node == thief.name {
			cands[i].ProbeAddress, cands[i].RaftAddress = victim.ip, victim.ip+":9470"
		}
	}
	z.list.set(cands, true)
	poll.UntilTrue(t, 30*time.Second, "the leader to refuse the claim", func() bool {
		l := z.waitLeader(60 * time.Second)
		return strings.Contains(l.logs.String(), "claims an address another member holds")
	})
	for _, n := range z.running() {
		m, err := n.srv.store.Member(thief.name)
		if err != nil || m.RaftAddress != thief.ip+":9470" {
			t.Errorf("%s holds %s at %q (%v), want its own address", n.name, thief.name, m.RaftAddress, err)
		}
	}
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
}
