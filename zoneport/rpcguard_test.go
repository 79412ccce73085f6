package zoneport

//lint:file-ignore SA1019 raft's senders still fill the deprecated leader/candidate address fields, so the test requests do too.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/edgequorum/edgequorum/internal/poll"
)

const (
	guardTestCaller     = "leader-1"
	guardTestCallerAddr = "127.0.0.1:7001"
	guardTestLocalAddr  = "127.0.0.1:7002"
	guardTestLocalTerm  = 10
	guardTestWait       = 10 * time.Second
)

// guardTestEncHandle is the handle raft's NetworkTransport encodes with
// (TimeNotBuiltin unless MsgpackUseNewTimeFormat).
func guardTestEncHandle() *codec.MsgpackHandle { return raftWire() }

// guardTestEncode frames a request the way raft's sendRPC does (EncodeRPC).
func guardTestEncode(t testing.TB, typ byte, req any) []byte {
	t.Helper()
	b, err := EncodeRPC(typ, req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// guardTestResponse encodes a response the way raft's handleCommand does: the
// error string, then the response.
func guardTestResponse(t testing.TB, resp any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := codec.NewEncoder(&buf, guardTestEncHandle())
	if err := enc.Encode(""); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(resp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func guardTestHeader() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(guardTestCaller), Addr: []byte(guardTestCallerAddr)}
}

func guardTestConfig() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{
		{Suffrage: raft.Voter, ID: guardTestCaller, Address: guardTestCallerAddr},
		{Suffrage: raft.Voter, ID: "member-2", Address: guardTestLocalAddr},
		{Suffrage: raft.Nonvoter, ID: "member-3", Address: "127.0.0.1:7003"},
	}}
}

func guardTestAppend() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{
		RPCHeader:    guardTestHeader(),
		Term:         guardTestLocalTerm + 1,
		Leader:       []byte(guardTestCallerAddr),
		PrevLogEntry: 5,
		PrevLogTerm:  guardTestLocalTerm,
		Entries: []*raft.Log{
			{Index: 6, Term: guardTestLocalTerm, Type: raft.LogCommand, Data: []byte("report batch"), AppendedAt: time.Unix(1700000000, 5)},
			{Index: 7, Term: guardTestLocalTerm + 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(guardTestConfig())},
			{Index: 8, Term: guardTestLocalTerm + 1, Type: raft.LogNoop},
			{Index: 9, Term: guardTestLocalTerm + 1, Type: raft.LogBarrier},
		},
		LeaderCommitIndex: 5,
	}
}

func guardTestHeartbeat() *raft.AppendEntriesRequest {
	return &raft.AppendEntriesRequest{RPCHeader: guardTestHeader(), Term: guardTestLocalTerm, Leader: []byte(guardTestCallerAddr)}
}

func guardTestVote() *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{RPCHeader: guardTestHeader(), Term: guardTestLocalTerm + 1,
		Candidate: []byte(guardTestCallerAddr), LastLogIndex: 9, LastLogTerm: guardTestLocalTerm}
}

func guardTestPreVote() *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{RPCHeader: guardTestHeader(), Term: guardTestLocalTerm + 1, LastLogIndex: 9, LastLogTerm: guardTestLocalTerm}
}

func guardTestSnapshot(size int64) *raft.InstallSnapshotRequest {
	return &raft.InstallSnapshotRequest{RPCHeader: guardTestHeader(), SnapshotVersion: raft.SnapshotVersionMax,
		Term: guardTestLocalTerm + 1, Leader: []byte(guardTestCallerAddr), LastLogIndex: 100, LastLogTerm: guardTestLocalTerm,
		Configuration: raft.EncodeConfiguration(guardTestConfig()), ConfigurationIndex: 7, Size: size}
}

func guardTestTimeoutNow() *raft.TimeoutNowRequest {
	return &raft.TimeoutNowRequest{RPCHeader: guardTestHeader()}
}

// guardTestGuard is the guard of a configured member at term 10 whose
// configuration holds the caller.
func guardTestGuard(reject func(string)) RPCGuard {
	return RPCGuard{
		CallerID:   guardTestCaller,
		CallerAddr: guardTestCallerAddr,
		LocalTerm:  func() uint64 { return guardTestLocalTerm },
		Configured: func(id string) (bool, Place) {
			switch id {
			case guardTestCaller, "member-2":
				return true, PlaceVoter
			case "member-3":
				return true, PlaceNonvoter
			}
			return true, PlaceNone
		},
		Reject: reject,
	}
}

// guardHarness is one guarded connection: peer is the caller's end, rc what
// raft reads.
type guardHarness struct {
	t       *testing.T
	peer    net.Conn
	rc      net.Conn
	gc      *guardedConn
	rejects chan string
}

func newGuardHarness(t *testing.T, mod func(*RPCGuard)) *guardHarness {
	t.Helper()
	h := &guardHarness{t: t, rejects: make(chan string, 16)}
	g := guardTestGuard(func(reason string) { h.rejects <- reason })
	if mod != nil {
		mod(&g)
	}
	peer, real := net.Pipe()
	h.peer = peer
	h.rc = GuardRaftConn(real, g)
	h.gc = h.rc.(*guardedConn)
	t.Cleanup(func() {
		h.peer.Close()
		h.rc.Close()
		h.waitDone()
	})
	return h
}

// send writes b from the caller's side without blocking the test: net.Pipe
// writes wait for the reader, and the guard may close mid-write.
func (h *guardHarness) send(b []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := h.peer.Write(b)
		done <- err
	}()
	return done
}

// forwarded reads n bytes on raft's side.
func (h *guardHarness) forwarded(n int) []byte {
	h.t.Helper()
	got := make([]byte, n)
	if _, err := io.ReadFull(h.rc, got); err != nil {
		h.t.Fatalf("raft side read %d bytes: %v (guard: %v)", n, err, h.gc.refused())
	}
	return got
}

// respond writes a response on raft's side and checks it reaches the caller
// unchanged.
func (h *guardHarness) respond(resp any) {
	h.t.Helper()
	b := guardTestResponse(h.t, resp)
	done := make(chan error, 1)
	go func() {
		_, err := h.rc.Write(b)
		done <- err
	}()
	got := make([]byte, len(b))
	if _, err := io.ReadFull(h.peer, got); err != nil {
		h.t.Fatalf("caller reads response: %v", err)
	}
	if err := <-done; err != nil {
		h.t.Fatalf("raft writes response: %v", err)
	}
	if !bytes.Equal(got, b) {
		h.t.Fatalf("response changed on the way back:\n got %x\nwant %x", got, b)
	}
}

// wantPass sends b (plus data) and checks raft receives exactly those bytes
// and that raft's answer goes back.
func (h *guardHarness) wantPass(b, data []byte, resp any) {
	h.t.Helper()
	sent := h.send(append(append([]byte(nil), b...), data...))
	if got := h.forwarded(len(b)); !bytes.Equal(got, b) {
		h.t.Fatalf("raft got a different request:\n got %x\nwant %x", got, b)
	}
	if len(data) > 0 {
		if got := h.forwarded(len(data)); !bytes.Equal(got, data) {
			h.t.Fatalf("raft got different snapshot data")
		}
	}
	if err := <-sent; err != nil {
		h.t.Fatalf("caller write: %v", err)
	}
	h.respond(resp)
	select {
	case r := <-h.rejects:
		h.t.Fatalf("guard refused a good rpc: %s (%v)", r, h.gc.refused())
	default:
	}
}

// wantRefused checks that the guard refuses what was sent with reason, passes
// raft nothing, and closes both sides.
func (h *guardHarness) wantRefused(reason string) {
	h.t.Helper()
	select {
	case got := <-h.rejects:
		if got != reason {
			h.t.Fatalf("refused with %q, want %q (%v)", got, reason, h.gc.refused())
		}
	case <-time.After(guardTestWait):
		h.t.Fatalf("no refusal within %s, want %q", guardTestWait, reason)
	}
	if err := h.gc.refused(); err == nil || !strings.Contains(err.Error(), reason) {
		h.t.Fatalf("refusal error %v does not name %q", err, reason)
	}
	got, err := io.ReadAll(h.rc)
	if err != nil || len(got) > 0 {
		h.t.Fatalf("raft side after refusal: %d bytes, %v; want a clean end with nothing", len(got), err)
	}
	if n, err := h.peer.Read(make([]byte, 1)); err == nil {
		h.t.Fatalf("caller's connection still open after refusal (read %d bytes)", n)
	}
	h.waitDone()
}

func (h *guardHarness) waitDone() {
	h.t.Helper()
	select {
	case <-h.gc.done:
	case <-time.After(guardTestWait):
		h.t.Fatalf("guard goroutines still running after %s", guardTestWait)
	}
}

// guardNoLeaks fails t if goroutines started during the test outlive it,
// checked after every cleanup (harnesses close in theirs).
func guardNoLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func TestGuardPassesGoodRPCs(t *testing.T) {
	guardNoLeaks(t)
	h := newGuardHarness(t, nil)
	h.wantPass(guardTestEncode(t, RPCAppendEntries, guardTestAppend()), nil,
		&raft.AppendEntriesResponse{RPCHeader: guardTestHeader(), Term: 11, LastLog: 9, Success: true})
	h.wantPass(guardTestEncode(t, RPCAppendEntries, guardTestHeartbeat()), nil,
		&raft.AppendEntriesResponse{Term: 10, Success: true})
	h.wantPass(guardTestEncode(t, RPCRequestVote, guardTestVote()), nil,
		&raft.RequestVoteResponse{Term: 11, Granted: true})
	h.wantPass(guardTestEncode(t, RPCRequestPreVote, guardTestPreVote()), nil,
		&raft.RequestPreVoteResponse{Term: 10, Granted: true})
	h.wantPass(guardTestEncode(t, RPCTimeoutNow, guardTestTimeoutNow()), nil, &raft.TimeoutNowResponse{})
	data := bytes.Repeat([]byte("snapshot-"), 20000) // 180 kB: several reads and chunks
	h.wantPass(guardTestEncode(t, RPCInstallSnapshot, guardTestSnapshot(int64(len(data)))), data,
		&raft.InstallSnapshotResponse{Term: 11, Success: true})
	// The snapshot's data was framed exactly: the next RPC on the connection
	// still parses.
	h.wantPass(guardTestEncode(t, RPCTimeoutNow, guardTestTimeoutNow()), nil, &raft.TimeoutNowResponse{})
	h.wantPass(guardTestEncode(t, RPCInstallSnapshot, guardTestSnapshot(0)), nil,
		&raft.InstallSnapshotResponse{Term: 11, Success: true})
}

func TestGuardPipelinedRPCs(t *testing.T) {
	h := newGuardHarness(t, nil)
	a := guardTestEncode(t, RPCAppendEntries, guardTestAppend())
	b := guardTestEncode(t, RPCAppendEntries, guardTestHeartbeat())
	sent := h.send(append(append([]byte(nil), a...), b...))
	if got := h.forwarded(len(a) + len(b)); !bytes.Equal(got, append(a, b...)) {
		t.Fatal("pipelined requests changed on the way")
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	h.respond(&raft.AppendEntriesResponse{Term: 11, Success: true})
	h.respond(&raft.AppendEntriesResponse{Term: 11, Success: true})
}

func TestGuardFreshMember(t *testing.T) {
	fresh := func(g *RPCGuard) {
		g.LocalTerm = func() uint64 { return 0 }
		g.Configured = func(string) (bool, Place) { return false, PlaceNone }
	}
	req := guardTestAppend()
	req.Term = guardDefaultMaxFreshTerm
	h := newGuardHarness(t, fresh)
	h.wantPass(guardTestEncode(t, RPCAppendEntries, req), nil, &raft.AppendEntriesResponse{Term: req.Term})

	req.Term++
	h = newGuardHarness(t, fresh)
	h.send(guardTestEncode(t, RPCAppendEntries, req))
	h.wantRefused(RejectTerm)
}

func TestGuardRefusesBadRPCs(t *testing.T) {
	enc := func(typ byte, req any) func(testing.TB) []byte {
		return func(t testing.TB) []byte { return guardTestEncode(t, typ, req) }
	}
	appendWith := func(mod func(*raft.AppendEntriesRequest)) func(testing.TB) []byte {
		req := guardTestAppend()
		mod(req)
		return enc(RPCAppendEntries, req)
	}
	voteWith := func(mod func(*raft.RequestVoteRequest)) func(testing.TB) []byte {
		req := guardTestVote()
		mod(req)
		return enc(RPCRequestVote, req)
	}
	snapWith := func(mod func(*raft.InstallSnapshotRequest)) func(testing.TB) []byte {
		req := guardTestSnapshot(10)
		mod(req)
		return enc(RPCInstallSnapshot, req)
	}
	configEntry := func(c raft.Configuration) func(*raft.AppendEntriesRequest) {
		return func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = raft.EncodeConfiguration(c) }
	}
	servers := func(s ...raft.Server) raft.Configuration { return raft.Configuration{Servers: s} }
	voter := func(id, addr string) raft.Server {
		return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
	}
	otherConfigured := func(g *RPCGuard) { g.Configured = func(string) (bool, Place) { return true, PlaceNone } }
	nonvoter := func(g *RPCGuard) { g.Configured = func(string) (bool, Place) { return true, PlaceNonvoter } }
	fresh := func(g *RPCGuard) { g.Configured = func(string) (bool, Place) { return false, PlaceNone } }
	outOfZone := func(g *RPCGuard) { g.InZone = func() bool { return false } }
	freshUnlimited := func(g *RPCGuard) {
		fresh(g)
		g.MaxFreshTerm = math.MaxUint64
	}
	nearTop := func(g *RPCGuard) { g.LocalTerm = func() uint64 { return math.MaxUint64 - 5 } }

	cases := []struct {
		name   string
		rpc    func(testing.TB) []byte
		guard  func(*RPCGuard)
		reason string
	}{
		{"append header id", appendWith(func(r *raft.AppendEntriesRequest) { r.ID = []byte("member-2") }), nil, RejectHeaderID},
		{"append empty header id", appendWith(func(r *raft.AppendEntriesRequest) { r.ID = nil }), nil, RejectHeaderID},
		{"append header addr", appendWith(func(r *raft.AppendEntriesRequest) { r.Addr = []byte(guardTestLocalAddr) }), nil, RejectHeaderAddr},
		{"append deprecated leader", appendWith(func(r *raft.AppendEntriesRequest) { r.Leader = []byte(guardTestLocalAddr) }), nil, RejectHeaderAddr},
		{"vote deprecated candidate", voteWith(func(r *raft.RequestVoteRequest) { r.Candidate = []byte(guardTestLocalAddr) }), nil, RejectHeaderAddr},
		{"vote header id", voteWith(func(r *raft.RequestVoteRequest) { r.ID = []byte("member-2") }), nil, RejectHeaderID},
		{"snapshot deprecated leader", snapWith(func(r *raft.InstallSnapshotRequest) { r.Leader = []byte(guardTestLocalAddr) }), nil, RejectHeaderAddr},
		{"timeout now header addr", enc(RPCTimeoutNow, &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ID: []byte(guardTestCaller), Addr: []byte("127.0.0.1:1")}}), nil, RejectHeaderAddr},
		{"prevote header id", enc(RPCRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: raft.RPCHeader{ID: []byte("x"), Addr: []byte(guardTestCallerAddr)}, Term: 11}), nil, RejectHeaderID},

		{"append not in configuration", enc(RPCAppendEntries, guardTestAppend()), otherConfigured, RejectNotInConfig},
		{"heartbeat not in configuration", enc(RPCAppendEntries, guardTestHeartbeat()), otherConfigured, RejectNotInConfig},
		{"snapshot not in configuration", enc(RPCInstallSnapshot, guardTestSnapshot(10)), otherConfigured, RejectNotInConfig},
		{"vote not in configuration", enc(RPCRequestVote, guardTestVote()), otherConfigured, RejectNotInConfig},
		{"timeout now not in configuration", enc(RPCTimeoutNow, guardTestTimeoutNow()), otherConfigured, RejectNotInConfig},
		{"vote from a nonvoter", enc(RPCRequestVote, guardTestVote()), nonvoter, RejectNotVoter},
		{"prevote from a nonvoter", enc(RPCRequestPreVote, guardTestPreVote()), nonvoter, RejectNotVoter},
		{"timeout now from a nonvoter", enc(RPCTimeoutNow, guardTestTimeoutNow()), nonvoter, RejectNotVoter},
		{"append out of the zone", enc(RPCAppendEntries, guardTestAppend()), outOfZone, RejectNotInZone},
		{"vote out of the zone", enc(RPCRequestVote, guardTestVote()), outOfZone, RejectNotInZone},

		{"append term jump", appendWith(func(r *raft.AppendEntriesRequest) { r.Term = guardTestLocalTerm + guardDefaultMaxTermJump + 1 }), nil, RejectTerm},
		{"append term max", appendWith(func(r *raft.AppendEntriesRequest) { r.Term = math.MaxUint64 }), nil, RejectTerm},
		{"append term max near top", appendWith(func(r *raft.AppendEntriesRequest) { r.Term = math.MaxUint64 }), nearTop, RejectTerm},
		{"append term max fresh", appendWith(func(r *raft.AppendEntriesRequest) { r.Term = math.MaxUint64 }), fresh, RejectTerm},
		{"append term max fresh unlimited", appendWith(func(r *raft.AppendEntriesRequest) { r.Term = math.MaxUint64 }), freshUnlimited, RejectTerm},
		{"vote term max", voteWith(func(r *raft.RequestVoteRequest) { r.Term = math.MaxUint64 }), nil, RejectTerm},
		{"vote term max fresh", voteWith(func(r *raft.RequestVoteRequest) { r.Term = math.MaxUint64 }), fresh, RejectTerm},
		{"prevote term max", enc(RPCRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: guardTestHeader(), Term: math.MaxUint64}), nil, RejectTerm},
		{"snapshot term max", snapWith(func(r *raft.InstallSnapshotRequest) { r.Term = math.MaxUint64 }), nil, RejectTerm},
		{"vote last log term", voteWith(func(r *raft.RequestVoteRequest) { r.LastLogTerm = r.Term + 1 }), nil, RejectTerm},
		{"prevote last log term", enc(RPCRequestPreVote, &raft.RequestPreVoteRequest{RPCHeader: guardTestHeader(), Term: 11, LastLogTerm: 12}), nil, RejectTerm},
		{"append prev log term", appendWith(func(r *raft.AppendEntriesRequest) { r.PrevLogTerm = r.Term + 1 }), nil, RejectTerm},
		{"append entry term", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[3].Term = r.Term + 1 }), nil, RejectTerm},
		{"append entry term decreasing", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2].Term = guardTestLocalTerm }), nil, RejectTerm},
		{"snapshot last log term", snapWith(func(r *raft.InstallSnapshotRequest) { r.LastLogTerm = r.Term + 1 }), nil, RejectTerm},

		{"config entry garbage", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = []byte{0xc1} }), nil, RejectBadConfigEntry},
		{"config entry truncated", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = r.Entries[1].Data[:10] }), nil, RejectBadConfigEntry},
		{"config entry a string", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = []byte{0xa1, 'x'} }), nil, RejectBadConfigEntry},
		{"config entry empty", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = nil }), nil, RejectBadConfigEntry},
		{"config entry trailing bytes", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[1].Data = append(r.Entries[1].Data, 0) }), nil, RejectBadConfigEntry},
		{"config no servers", appendWith(configEntry(servers())), nil, RejectBadConfigEntry},
		{"config empty id", appendWith(configEntry(servers(voter("", "127.0.0.1:1")))), nil, RejectBadConfigEntry},
		{"config empty address", appendWith(configEntry(servers(voter("a", "")))), nil, RejectBadConfigEntry},
		{"config duplicate id", appendWith(configEntry(servers(voter("a", "127.0.0.1:1"), voter("a", "127.0.0.1:2")))), nil, RejectBadConfigEntry},
		{"config duplicate address", appendWith(configEntry(servers(voter("a", "127.0.0.1:1"), voter("b", "127.0.0.1:1")))), nil, RejectBadConfigEntry},
		{"config bad suffrage", appendWith(configEntry(servers(voter("a", "127.0.0.1:1"), raft.Server{Suffrage: 7, ID: "b", Address: "127.0.0.1:2"}))), nil, RejectBadConfigEntry},
		{"config negative suffrage", appendWith(configEntry(servers(voter("a", "127.0.0.1:1"), raft.Server{Suffrage: -1, ID: "b", Address: "127.0.0.1:2"}))), nil, RejectBadConfigEntry},
		{"config no voter", appendWith(configEntry(servers(raft.Server{Suffrage: raft.Nonvoter, ID: "a", Address: "127.0.0.1:1"}))), nil, RejectBadConfigEntry},
		{"snapshot bad configuration", snapWith(func(r *raft.InstallSnapshotRequest) { r.Configuration = []byte{0x92, 0x01} }), nil, RejectBadConfigEntry},
		{"snapshot empty configuration", snapWith(func(r *raft.InstallSnapshotRequest) { r.Configuration = nil }), nil, RejectBadConfigEntry},

		{"add peer deprecated", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2].Type = raft.LogAddPeerDeprecated }), nil, RejectDeprecatedEntry},
		{"remove peer deprecated", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2].Type = raft.LogRemovePeerDeprecated }), nil, RejectDeprecatedEntry},
		{"unknown entry type", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2].Type = raft.LogConfiguration + 1 }), nil, RejectUnknownEntryType},
		{"unknown entry type 255", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[0].Type = 255 }), nil, RejectUnknownEntryType},
		{"nil entry", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2] = nil }), nil, RejectBadEntry},
		{"entry index gap", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[2].Index = 9 }), nil, RejectBadEntry},
		{"entry index overflow", appendWith(func(r *raft.AppendEntriesRequest) {
			r.PrevLogEntry = math.MaxUint64 - 1
			for i, e := range r.Entries {
				e.Index = r.PrevLogEntry + uint64(i) + 1
			}
		}), nil, RejectBadEntry},

		{"snapshot negative size", snapWith(func(r *raft.InstallSnapshotRequest) { r.Size = -1 }), nil, RejectSnapshotSize},
		{"snapshot too large", snapWith(func(r *raft.InstallSnapshotRequest) { r.Size = 1 << 20 }), func(g *RPCGuard) { g.MaxSnapshotBytes = 1<<20 - 1 }, RejectSnapshotSize},
		{"snapshot too large default", snapWith(func(r *raft.InstallSnapshotRequest) { r.Size = math.MaxInt64 }), nil, RejectSnapshotSize},
		{"snapshot version 0", snapWith(func(r *raft.InstallSnapshotRequest) { r.SnapshotVersion = 0 }), nil, RejectSnapshotVersion},
		{"snapshot version future", snapWith(func(r *raft.InstallSnapshotRequest) { r.SnapshotVersion = raft.SnapshotVersionMax + 1 }), nil, RejectSnapshotVersion},

		{"rpc too large", appendWith(func(r *raft.AppendEntriesRequest) { r.Entries[0].Data = make([]byte, 2000) }), func(g *RPCGuard) { g.MaxRPCBytes = 1500 }, RejectRPCSize},
		{"too many items", enc(RPCAppendEntries, map[string]any{"Entries": make([]any, guardMaxRPCItems)}), nil, RejectRPCItems},
		{"unknown rpc type", func(testing.TB) []byte { return []byte{5, 0x80} }, nil, RejectUnknownType},
		{"unknown rpc type 255", func(testing.TB) []byte { return []byte{255} }, nil, RejectUnknownType},
		{"invalid msgpack", func(testing.TB) []byte { return []byte{RPCAppendEntries, 0xc1} }, nil, RejectDecode},
		{"term as string", enc(RPCAppendEntries, map[string]any{"Term": "eleven"}), nil, RejectDecode},
		{"entries as int", enc(RPCAppendEntries, map[string]any{"Entries": 3}), nil, RejectDecode},
		{"request is a string", enc(RPCRequestVote, "vote for me"), nil, RejectDecode},
		{"request is nil", func(testing.TB) []byte { return []byte{RPCTimeoutNow, 0xc0} }, nil, RejectHeaderID},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newGuardHarness(t, c.guard)
			h.send(c.rpc(t))
			h.wantRefused(c.reason)
		})
	}
}

// TestGuardConfigurationThatPanicsRaft shows that a configuration entry which
// makes raft.DecodeConfiguration panic (as raft does on every follower that
// appends it) is refused, and the guard survives.
func TestGuardConfigurationThatPanicsRaft(t *testing.T) {
	for _, data := range [][]byte{{0xc1}, {0xa1, 'x'}, {0x81, 0xa7, 'S', 'e', 'r', 'v', 'e', 'r', 's', 0x05}, {0xdd, 0xff, 0xff, 0xff, 0xff}} {
		panicked := func() (p bool) {
			defer func() { p = recover() != nil }()
			raft.DecodeConfiguration(data)
			return false
		}()
		if !panicked {
			t.Fatalf("raft.DecodeConfiguration(%x) did not panic; the case proves nothing", data)
		}
		req := guardTestAppend()
		req.Entries[1].Data = data
		h := newGuardHarness(t, nil)
		h.send(guardTestEncode(t, RPCAppendEntries, req))
		h.wantRefused(RejectBadConfigEntry)
	}
}

// TestGuardDecodeRequiresWholeValue: a decoder that stopped short of the
// scanned value would leave raft reading its rest as the next RPC.
func TestGuardDecodeRequiresWholeValue(t *testing.T) {
	body := guardTestEncode(t, RPCTimeoutNow, guardTestTimeoutNow())[1:]
	var req raft.TimeoutNowRequest
	if err := guardDecode(body, &req); err != nil {
		t.Fatalf("decode a whole request: %v", err)
	}
	if err := guardDecode(append(body, 0x00), &req); err == nil {
		t.Fatal("decoding a request with a byte after it succeeded")
	}
	if err := guardDecode(body[:len(body)-1], &req); err == nil {
		t.Fatal("decoding a truncated request succeeded")
	}
}

// TestGuardHugeDeclaredLength sends only the head of a value that declares
// gigabytes and never the bytes: the guard must refuse it at once, from the
// head alone, without allocating anything near the declared size.
func TestGuardHugeDeclaredLength(t *testing.T) {
	field := func(name string, head ...byte) []byte {
		b := []byte{RPCAppendEntries, 0x81, 0xa0 | byte(len(name))}
		return append(append(b, name...), head...)
	}
	// An entry whose AppendedAt is a 4 GiB string: raft's own decoder
	// allocates that in one piece before reading it.
	hugeTime := append(field("Entries", 0x91, 0x81, 0xaa), "AppendedAt"...)
	hugeTime = append(hugeTime, 0xdb, 0xff, 0xff, 0xff, 0xff)
	cases := map[string][]byte{
		"bin32 leader":    field("Leader", 0xc6, 0xff, 0xff, 0xff, 0xff),
		"str32 id":        field("ID", 0xdb, 0xff, 0xff, 0xff, 0xff),
		"array32 entries": field("Entries", 0xdd, 0xff, 0xff, 0xff, 0xff),
		"map32 request":   {RPCAppendEntries, 0xdf, 0xff, 0xff, 0xff, 0xff},
		"ext32":           field("Leader", 0xc9, 0xff, 0xff, 0xff, 0xff, 0x01),
		"str32 time":      hugeTime,
	}
	for name, head := range cases {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			h := newGuardHarness(t, nil)
			h.send(head) // and nothing more: the connection stays open
			h.wantRefused(RejectRPCSize)
			runtime.ReadMemStats(&after)
			if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
				t.Fatalf("refusing a declared 4 GiB value allocated %d bytes", d)
			}
		})
	}
	// A length within the bound is read as it arrives, not allocated ahead:
	// 32 MiB declared, 10 bytes sent, then the caller hangs up.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h := newGuardHarness(t, nil)
	sent := h.send(append(field("Leader", 0xc6, 0x02, 0x00, 0x00, 0x00), make([]byte, 10)...))
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	h.peer.Close()
	h.waitDone()
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 4<<20 {
		t.Fatalf("a declared 32 MiB value with 10 bytes sent allocated %d bytes", d)
	}
	if err := h.gc.refused(); err != nil {
		t.Fatalf("a connection that ended mid-request counts as a refusal: %v", err)
	}
	select {
	case r := <-h.rejects:
		t.Fatalf("Reject(%q) for a connection that ended", r)
	default:
	}
}

// TestGuardClosingEitherSideEndsBoth checks that no goroutine outlives the
// connection, whichever side ends it, and in the middle of any phase.
func TestGuardClosingEitherSideEndsBoth(t *testing.T) {
	guardNoLeaks(t)
	start := runtime.NumGoroutine()

	// Raft closes its end while idle.
	h := newGuardHarness(t, nil)
	h.rc.Close()
	h.waitDone()
	if _, err := h.peer.Read(make([]byte, 1)); err == nil {
		t.Fatal("caller's connection open after raft closed its end")
	}

	// The caller hangs up while idle.
	h = newGuardHarness(t, nil)
	h.peer.Close()
	h.waitDone()
	if _, err := h.rc.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("raft's read after the caller hung up: %v, want EOF", err)
	}

	// The caller hangs up in the middle of a snapshot's data.
	h = newGuardHarness(t, nil)
	req := guardTestEncode(t, RPCInstallSnapshot, guardTestSnapshot(1000))
	sent := h.send(append(req, make([]byte, 10)...))
	h.forwarded(len(req) + 10)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	h.peer.Close()
	h.waitDone()

	// Raft stops reading while the guard forwards a request, and closes.
	h = newGuardHarness(t, nil)
	h.send(guardTestEncode(t, RPCAppendEntries, guardTestAppend()))
	h.forwarded(1)
	h.rc.Close()
	h.waitDone()

	// Raft is writing a response nobody reads when the caller hangs up.
	h = newGuardHarness(t, nil)
	wrote := make(chan error, 1)
	go func() {
		_, err := h.rc.Write(guardTestResponse(t, &raft.AppendEntriesResponse{Term: 1}))
		wrote <- err
	}()
	h.peer.Close()
	h.waitDone()
	<-wrote // returns, one way or the other

	poll.UntilTrue(t, guardTestWait, "goroutines back to the start count", func() bool {
		return runtime.NumGoroutine() <= start
	})
}

// guardTestStream is a raft.StreamLayer over net.Pipe: a Dial hands the other
// end to the target layer's Accept, which may wrap it (with GuardRaftConn).
type guardTestStream struct {
	addr  string
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wrap  func(net.Conn) net.Conn
	peers map[string]*guardTestStream
}

type guardTestAddr string

func (a guardTestAddr) Network() string { return "pipe" }
func (a guardTestAddr) String() string  { return string(a) }

func newGuardTestStream(addr string, wrap func(net.Conn) net.Conn) *guardTestStream {
	return &guardTestStream{addr: addr, conns: make(chan net.Conn), done: make(chan struct{}), wrap: wrap, peers: map[string]*guardTestStream{}}
}

func (s *guardTestStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		if s.wrap != nil {
			c = s.wrap(c)
		}
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

func (s *guardTestStream) Close() error {
	s.once.Do(func() { close(s.done) })
	return nil
}

func (s *guardTestStream) Addr() net.Addr { return guardTestAddr(s.addr) }

func (s *guardTestStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	target, ok := s.peers[string(address)]
	if !ok {
		return nil, fmt.Errorf("dial %s: no such peer", address)
	}
	client, server := net.Pipe()
	select {
	case target.conns <- server:
		return client, nil
	case <-target.done:
		return nil, fmt.Errorf("dial %s: %w", address, net.ErrClosed)
	case <-time.After(timeout):
		return nil, fmt.Errorf("dial %s: timed out", address)
	}
}

// TestGuardEndToEnd runs the members' real Raft transports: a sender's good RPCs reach
// the receiver's consumer, bad ones are refused (the sender sees an error) and
// never reach it, and the sender recovers with a new connection.
func TestGuardEndToEnd(t *testing.T) {
	guardNoLeaks(t)
	var mu sync.Mutex
	var rejected []string
	g := guardTestGuard(func(reason string) {
		mu.Lock()
		rejected = append(rejected, reason)
		mu.Unlock()
	})
	recvStream := newGuardTestStream(guardTestLocalAddr, func(c net.Conn) net.Conn { return GuardRaftConn(c, g) })
	sendStream := newGuardTestStream(guardTestCallerAddr, nil)
	sendStream.peers[guardTestLocalAddr] = recvStream
	recv := NewRaftTransport(recvStream, RaftTransportConfig{Timeout: guardTestWait})
	send := NewRaftTransport(sendStream, RaftTransportConfig{Timeout: guardTestWait})

	// The consumer records what raft would process and answers it.
	type seen struct {
		cmd  any
		data []byte
	}
	got := make(chan seen, 64)
	stop := make(chan struct{})
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for {
			select {
			case rpc := <-recv.Consumer():
				resp, data := raftTestResponse(rpc)
				got <- seen{rpc.Command, data}
				rpc.Respond(resp, nil)
			case <-stop:
				return
			}
		}
	}()
	defer func() {
		send.Close()
		recv.Close()
		close(stop)
		<-consumerDone
	}()

	const target = raft.ServerAddress(guardTestLocalAddr)
	const id = raft.ServerID("member-2")
	wantGood := func(what string, err error, check func(seen)) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		select {
		case s := <-got:
			check(s)
		default:
			t.Fatalf("%s: answered but the consumer saw nothing", what)
		}
	}
	wantRefused := func(what string, err error, reason string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: succeeded, want refused", what)
		}
		select {
		case s := <-got:
			t.Fatalf("%s: the consumer saw a refused rpc: %#v", what, s.cmd)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if len(rejected) == 0 || rejected[len(rejected)-1] != reason {
			t.Fatalf("%s: rejections %v, want the last to be %q", what, rejected, reason)
		}
	}

	var aeResp raft.AppendEntriesResponse
	err := send.AppendEntries(id, target, guardTestAppend(), &aeResp)
	wantGood("append entries", err, func(s seen) {
		req := s.cmd.(*raft.AppendEntriesRequest)
		if len(req.Entries) != 4 || string(req.Entries[0].Data) != "report batch" || !aeResp.Success || aeResp.LastLog != 9 {
			t.Fatalf("append entries arrived as %+v, answer %+v", req, aeResp)
		}
		if c := raft.DecodeConfiguration(req.Entries[1].Data); len(c.Servers) != 3 {
			t.Fatalf("configuration entry arrived as %+v", c)
		}
	})

	bad := guardTestAppend()
	bad.ID = []byte("member-2")
	wantRefused("append entries as another member", send.AppendEntries(id, target, bad, &aeResp), RejectHeaderID)

	bad = guardTestAppend()
	bad.Entries[1].Data = []byte{0xa1, 'x'}
	wantRefused("append entries with a bad configuration", send.AppendEntries(id, target, bad, &aeResp), RejectBadConfigEntry)

	bad = guardTestAppend()
	bad.Term = math.MaxUint64
	wantRefused("append entries with term 2^64-1", send.AppendEntries(id, target, bad, &aeResp), RejectTerm)

	var voteResp raft.RequestVoteResponse
	vote := guardTestVote()
	vote.Term = math.MaxUint64
	wantRefused("vote with term 2^64-1", send.RequestVote(id, target, vote, &voteResp), RejectTerm)

	err = send.AppendEntries(id, target, guardTestHeartbeat(), &aeResp)
	wantGood("heartbeat after refusals", err, func(s seen) {
		if req := s.cmd.(*raft.AppendEntriesRequest); req.Term != guardTestLocalTerm || len(req.Entries) != 0 {
			t.Fatalf("heartbeat arrived as %+v", req)
		}
	})
	err = send.RequestVote(id, target, guardTestVote(), &voteResp)
	wantGood("request vote", err, func(s seen) {
		if _, ok := s.cmd.(*raft.RequestVoteRequest); !ok || !voteResp.Granted {
			t.Fatalf("vote arrived as %#v, answer %+v", s.cmd, voteResp)
		}
	})
	var preResp raft.RequestPreVoteResponse
	err = send.RequestPreVote(id, target, guardTestPreVote(), &preResp)
	wantGood("request pre-vote", err, func(s seen) {
		if _, ok := s.cmd.(*raft.RequestPreVoteRequest); !ok || !preResp.Granted {
			t.Fatalf("pre-vote arrived as %#v, answer %+v", s.cmd, preResp)
		}
	})
	var tnResp raft.TimeoutNowResponse
	err = send.TimeoutNow(id, target, guardTestTimeoutNow(), &tnResp)
	wantGood("timeout now", err, func(s seen) {
		if _, ok := s.cmd.(*raft.TimeoutNowRequest); !ok {
			t.Fatalf("timeout now arrived as %#v", s.cmd)
		}
	})
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 100000)
	var snapResp raft.InstallSnapshotResponse
	err = send.InstallSnapshot(id, target, guardTestSnapshot(int64(len(data))), &snapResp, bytes.NewReader(data))
	wantGood("install snapshot", err, func(s seen) {
		if !bytes.Equal(s.data, data) || !snapResp.Success {
			t.Fatalf("snapshot data arrived as %d bytes (want %d), answer %+v", len(s.data), len(data), snapResp)
		}
	})
	snap := guardTestSnapshot(int64(len(data)))
	snap.Size = -1
	wantRefused("install snapshot with negative size", send.InstallSnapshot(id, target, snap, &snapResp, bytes.NewReader(nil)), RejectSnapshotSize)

	err = send.AppendEntries(id, target, guardTestAppend(), &aeResp)
	wantGood("append entries at the end", err, func(seen) {})
	mu.Lock()
	if len(rejected) != 5 {
		t.Errorf("rejections %v, want exactly the 5 bad rpcs", rejected)
	}
	mu.Unlock()
}

// FuzzRaftGuard feeds arbitrary bytes as the caller's stream. The guard must
// not panic, must forward only a prefix of what it received, and that prefix
// must be a sequence of complete RPCs (the last snapshot's data possibly cut
// short) that raft decodes as it would and that meet the guard's rules,
// checked here with raft's own functions where it has them.
func FuzzRaftGuard(f *testing.F) {
	good := [][]byte{
		guardTestEncode(f, RPCAppendEntries, guardTestAppend()),
		guardTestEncode(f, RPCAppendEntries, guardTestHeartbeat()),
		guardTestEncode(f, RPCRequestVote, guardTestVote()),
		guardTestEncode(f, RPCRequestPreVote, guardTestPreVote()),
		guardTestEncode(f, RPCTimeoutNow, guardTestTimeoutNow()),
		append(guardTestEncode(f, RPCInstallSnapshot, guardTestSnapshot(5)), "hello"...),
	}
	for _, g := range good {
		f.Add(g)
	}
	f.Add(bytes.Join(good, nil))
	bad := guardTestAppend()
	bad.Entries[1].Data = []byte{0xa1, 'x'}
	f.Add(append(guardTestEncode(f, RPCTimeoutNow, guardTestTimeoutNow()), guardTestEncode(f, RPCAppendEntries, bad)...))
	bad = guardTestAppend()
	bad.Term = math.MaxUint64
	f.Add(guardTestEncode(f, RPCAppendEntries, bad))
	f.Add([]byte{RPCAppendEntries, 0x81, 0xa6, 'L', 'e', 'a', 'd', 'e', 'r', 0xc6, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{RPCAppendEntries, 0xdd, 0x00, 0x01, 0x00, 0x00})

	f.Fuzz(func(t *testing.T, stream []byte) {
		g := guardTestGuard(nil)
		peer, real := net.Pipe()
		rc := GuardRaftConn(real, g)
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			_, _ = peer.Write(stream)
			peer.Close()
		}()
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("raft side: %v", err)
		}
		<-wrote
		rc.Close()
		<-rc.(*guardedConn).done
		if !bytes.HasPrefix(stream, got) {
			t.Fatalf("forwarded bytes are not a prefix of the stream")
		}
		guardFuzzCheckForwarded(t, g.withDefaults(), got)
	})
}

// guardFuzzCheckForwarded parses what raft received the way raft's
// handleCommand does and checks every RPC.
func guardFuzzCheckForwarded(t *testing.T, g RPCGuard, got []byte) {
	br := bufio.NewReader(bytes.NewReader(got))
	dec := codec.NewDecoder(br, &codec.MsgpackHandle{})
	for {
		typ, err := br.ReadByte()
		if err == io.EOF {
			return
		}
		var h raft.RPCHeader
		var terms []uint64
		switch typ {
		case RPCAppendEntries:
			var req raft.AppendEntriesRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("forwarded append entries does not decode: %v", err)
			}
			h = req.RPCHeader
			terms = append(terms, req.Term, req.PrevLogTerm)
			for _, e := range req.Entries {
				if e == nil {
					t.Fatal("forwarded a nil entry")
				}
				terms = append(terms, e.Term)
				switch e.Type {
				case raft.LogCommand, raft.LogNoop, raft.LogBarrier:
				case raft.LogConfiguration:
					guardFuzzDecodeConfiguration(t, e.Data)
				default:
					t.Fatalf("forwarded an entry of type %d", e.Type)
				}
			}
		case RPCRequestVote:
			var req raft.RequestVoteRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("forwarded vote does not decode: %v", err)
			}
			h, terms = req.RPCHeader, []uint64{req.Term, req.LastLogTerm}
		case RPCRequestPreVote:
			var req raft.RequestPreVoteRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("forwarded pre-vote does not decode: %v", err)
			}
			h, terms = req.RPCHeader, []uint64{req.Term, req.LastLogTerm}
		case RPCTimeoutNow:
			var req raft.TimeoutNowRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("forwarded timeout now does not decode: %v", err)
			}
			h = req.RPCHeader
		case RPCInstallSnapshot:
			var req raft.InstallSnapshotRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("forwarded snapshot does not decode: %v", err)
			}
			h, terms = req.RPCHeader, []uint64{req.Term, req.LastLogTerm}
			if req.Size < 0 || req.Size > g.MaxSnapshotBytes {
				t.Fatalf("forwarded a snapshot of size %d", req.Size)
			}
			guardFuzzDecodeConfiguration(t, req.Configuration)
			n, _ := io.CopyN(io.Discard, br, req.Size)
			if n < req.Size {
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatal("snapshot data cut short but more bytes follow")
				}
				return
			}
		default:
			t.Fatalf("forwarded rpc type %d", typ)
		}
		if string(h.ID) != g.CallerID || string(h.Addr) != g.CallerAddr {
			t.Fatalf("forwarded an rpc from %q at %q", h.ID, h.Addr)
		}
		for _, term := range terms {
			if term > guardTestLocalTerm+g.MaxTermJump {
				t.Fatalf("forwarded term %d", term)
			}
		}
	}
}

func guardFuzzDecodeConfiguration(t *testing.T, data []byte) {
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("forwarded a configuration raft.DecodeConfiguration panics on: %v", p)
		}
	}()
	if c := raft.DecodeConfiguration(data); len(c.Servers) == 0 {
		t.Fatal("forwarded an empty configuration")
	}
}

// TestGuardReplicationFromOutsideTheConfiguration: a server outside this
// member's configuration may not replicate to it, however well-formed its
// RPCs, unless the configuration's majority named it leader of that term
// (attest.go); the refusal tells the attestor, which asks.
func TestGuardReplicationFromOutsideTheConfiguration(t *testing.T) {
	g := guardTestGuard(nil).withDefaults()
	g.Configured = func(string) (bool, Place) { return true, PlaceNone }
	var told []uint64
	g.Outsider = func(id string, term uint64) {
		if id != guardTestCaller {
			t.Errorf("outsider %q, want %q", id, guardTestCaller)
		}
		told = append(told, term)
	}
	attested := uint64(0)
	g.Attested = func(id string, term uint64) bool { return id == guardTestCaller && term == attested }
	body := func(typ byte, req any) []byte { return guardTestEncode(t, typ, req)[1:] }
	req := guardTestAppend()
	if _, err := g.check(RPCAppendEntries, body(RPCAppendEntries, req)); err == nil {
		t.Fatal("append entries from a server outside the configuration passed")
	}
	if len(told) != 1 || told[0] != req.Term {
		t.Fatalf("attestor told %v, want [%d]", told, req.Term)
	}
	attested = req.Term
	if _, err := g.check(RPCAppendEntries, body(RPCAppendEntries, req)); err != nil {
		t.Fatalf("append entries from an attested leader: %v", err)
	}
	req.Term++ // attested for one term only
	if _, err := g.check(RPCAppendEntries, body(RPCAppendEntries, req)); err == nil {
		t.Fatal("an attestation for one term let its server replicate in the next")
	}
	if _, err := g.check(RPCRequestVote, body(RPCRequestVote, guardTestVote())); err == nil {
		t.Fatal("vote request from a server outside the configuration passed")
	}
}
