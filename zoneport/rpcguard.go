package zoneport

//lint:file-ignore SA1019 raft's deprecated leader/candidate address fields are still sent and still read by raft, so the guard must check them.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// The Raft RPC guard.
//
// The zone port proves that a Raft connection comes from a holder of the zone
// key and which member it is, but hashicorp/raft trusts every RPC it decodes: a
// member that is compromised or merely buggy could claim another member's
// identity in the RPC header, push the zone's term to 2^64-1 (raft then wraps
// to 0 at the next election and the zone is wedged), append a configuration
// entry that panics raft.DecodeConfiguration on every follower, or make raft's
// decoder allocate gigabytes from a forged length prefix.
//
// GuardRaftConn therefore puts a checker between the authenticated connection
// and the member's Raft transport. It reads each RPC off the wire exactly as raft
// would, checks it against what the handshake proved and what this member
// knows, and only then hands the very same bytes to raft through an in-memory
// pipe. Raft's answers go back untouched. A refused RPC closes the connection:
// raft's sender treats that like any network failure and reconnects, and the
// receiving raft never sees the RPC.

// Raft's RPC type bytes. hashicorp/raft keeps them unexported
// (net_transport.go: rpcAppendEntries = iota, ...); these are their values in
// raft v1.7.3. RequestPreVote is not optional: raft 1.7 pre-votes by default
// and the member's RaftTransport supports it.
const (
	RPCAppendEntries   byte = 0
	RPCRequestVote     byte = 1
	RPCInstallSnapshot byte = 2
	RPCTimeoutNow      byte = 3
	RPCRequestPreVote  byte = 4
)

// Reasons a guard refuses an RPC: the values RPCGuard.Reject is called with.
const (
	RejectHeaderID         = "header_id"               // RPCHeader.ID is not the authenticated caller
	RejectHeaderAddr       = "header_addr"             // RPCHeader.Addr or a deprecated leader/candidate address is not the caller's
	RejectNotInConfig      = "not_in_configuration"    // caller is not in this member's Raft configuration
	RejectNotVoter         = "not_a_voter"             // an election from a server that has no vote in this member's configuration
	RejectNotInZone        = "not_in_zone"             // the caller's Node no longer carries the zone label
	RejectForcedBudget     = "forced_election_budget"  // a transfer vote from a candidate over its forced-election budget
	RejectTerm             = "term"                    // a term beyond the allowed jump, or inconsistent terms inside the RPC
	RejectBadConfigEntry   = "bad_configuration_entry" // a configuration that does not decode or is not valid
	RejectDeprecatedEntry  = "deprecated_entry"        // LogAddPeerDeprecated / LogRemovePeerDeprecated
	RejectUnknownEntryType = "unknown_entry_type"      // a log type raft v1.7.3 does not define
	RejectBadEntry         = "bad_entry"               // a nil entry, or entries whose indexes do not follow PrevLogEntry
	RejectSnapshotSize     = "snapshot_size"           // InstallSnapshot.Size negative or above MaxSnapshotBytes
	RejectSnapshotVersion  = "snapshot_version"        // a snapshot version raft cannot install, or the legacy peers format
	RejectRPCSize          = "rpc_size"                // the encoded request exceeds MaxRPCBytes
	RejectRPCItems         = "rpc_items"               // the encoded request has more than guardMaxRPCItems msgpack items
	RejectDecode           = "decode"                  // not valid msgpack, or not decodable into the request type
	RejectUnknownType      = "unknown_type"            // an RPC type byte raft does not define
)

// Defaults for the zero values of RPCGuard's limits.
const (
	// guardDefaultMaxTermJump bounds how far one RPC may move this member's term.
	// Terms grow by one per election, and with pre-vote (raft 1.7's default) a
	// member cut off from the zone does not inflate its own term, so the zone's
	// term only moves when a majority holds an election. A member returning from
	// an outage is behind by the elections it missed: tens, perhaps thousands
	// after a very bad day, never 65536 (at one election per second that is 18
	// hours of nothing but failed elections). A hostile member, in turn, can push
	// the term by at most 2^16 per accepted RPC, so 2^63 is 2^47 RPCs away.
	guardDefaultMaxTermJump uint64 = 1 << 16

	// guardDefaultMaxFreshTerm caps the term a member without a configuration
	// (new, waiting for a leader to add it) accepts, as it has no term of its
	// own to measure a jump from. 2^48 is a thousand elections a second for
	// 8900 years, yet leaves the term 2^16 times below the point where it wraps.
	guardDefaultMaxFreshTerm uint64 = 1 << 48

	// guardDefaultMaxSnapshotBytes bounds the snapshot an InstallSnapshot may
	// stream (to disk; the guard never buffers it). A zone's replicated state is
	// its member list and latest results, megabytes for the largest zones; 1 GiB
	// leaves two orders of magnitude of headroom and still stops a member from
	// filling a node's disk.
	guardDefaultMaxSnapshotBytes int64 = 1 << 30

	// guardDefaultMaxRPCBytes bounds one encoded request, which the guard (and
	// then raft) hold in memory. Raft caps an AppendEntries by entry count
	// (MaxAppendEntries, 64 here), not by bytes, so the bound must sit above
	// 64 of the largest commands this zone writes: report batches are KB to a
	// few MiB, and 64 MiB keeps a lagging follower able to catch up. Set it
	// lower only together with a cap on command size, or a legitimate batch
	// would be refused on every retry and the follower never catch up.
	guardDefaultMaxRPCBytes int64 = 64 << 20
)

const (
	// guardTermCeiling: terms at or above it are refused whatever the limits
	// say. Raft adds one to the term at every election without an overflow
	// check, so a term near 2^64 wraps to 0; 2^63 takes 292 million years of
	// an election every millisecond to reach.
	guardTermCeiling uint64 = 1 << 63

	// guardMaxRPCItems bounds the msgpack items (every value, key and
	// container counts one) in one request or configuration. Decoding
	// allocates per item, not per byte — an empty map (1 byte) becomes a
	// 100-byte raft.Log — so a byte bound alone would let a request of
	// MaxRPCBytes cost a hundred times that in raft's memory. A full
	// AppendEntries of 1024 entries (raft's upper limit on MaxAppendEntries)
	// is about 13,500 items, so 2^16 leaves ample room and bounds the decoded
	// request to a few MiB beyond its byte payload.
	guardMaxRPCItems = 1 << 16

	// guardReadBufferSize and guardResponseBufferSize are the buffers every
	// guarded connection holds for its life, for requests (an AppendEntries
	// can be MiB) and for raft's small answers.
	guardReadBufferSize     = 32 << 10
	guardResponseBufferSize = 4 << 10

	// guardKeepBufferSize: a request buffer that grew beyond this is dropped
	// after the request rather than kept by an idle connection.
	guardKeepBufferSize = 64 << 10

	// guardPayloadChunk is the most the scanner allocates ahead of bytes
	// actually received, so a declared length costs memory only as its bytes
	// arrive.
	guardPayloadChunk = 32 << 10
)

// Place is a server's suffrage in a member's Raft configuration.
type Place int

const (
	PlaceNone Place = iota // not in the configuration
	PlaceNonvoter
	PlaceVoter
)

// RPCGuard is what the guard knows about the caller and about this member.
// The functions are called for every RPC, on the connection's goroutine, and
// must be cheap and safe for concurrent use (raft.CurrentTerm and
// raft.GetConfiguration are: both read an atomic). Zero limits mean the
// defaults above.
type RPCGuard struct {
	CallerID   string        // caller's Raft server ID, proven by the handshake
	CallerAddr string        // caller's Raft address as the zone knows it
	CallerNode string        // caller's node, for counting what it does
	LocalTerm  func() uint64 // this member's current term (raft.CurrentTerm); nil means 0
	// Configured reports whether this member has a Raft configuration and
	// id's place in it. nil means no configuration.
	Configured func(id string) (hasConfig bool, place Place)
	// Attested reports whether a majority of this member's configuration
	// names id as the leader of term although this member's configuration
	// does not list it yet (a lagging follower); nil means never.
	Attested func(id string, term uint64) bool
	// Outsider is told of refused replication from a server outside this
	// member's configuration, so that it can ask the configuration whether
	// that server leads (see attest.go); nil means nobody is told.
	Outsider func(id string, term uint64)
	// InZone reports whether the caller's node still belongs to the zone
	// as the cloud's member list says (true while the list is unavailable);
	// nil means yes. An administrator takes a node out of the zone by its
	// label, and from then on no member follows it or votes for it.
	InZone func() bool
	// Follow decides whom this member follows; nil means the guard checks
	// the wire format and terms only.
	Follow Follower
	// Forced counts a vote request that asks for a leadership transfer by
	// the caller's node and reports whether it is within that node's
	// budget; nil means not counted.
	Forced           func(node string) bool
	MaxTermJump      uint64 // how far above LocalTerm a configured member accepts
	MaxFreshTerm     uint64 // absolute cap when this member has no configuration yet
	MaxSnapshotBytes int64  // bound on InstallSnapshot.Size
	MaxRPCBytes      int64  // bound on one encoded request (AppendEntries with its entries)
	// Reject counts a refused RPC by reason (one of the guardReject*
	// constants). It must not block; nil means do not count.
	Reject func(reason string)
}

// withDefaults fills in zero limits.
func (g RPCGuard) withDefaults() RPCGuard {
	if g.MaxTermJump == 0 {
		g.MaxTermJump = guardDefaultMaxTermJump
	}
	if g.MaxFreshTerm == 0 {
		g.MaxFreshTerm = guardDefaultMaxFreshTerm
	}
	if g.MaxSnapshotBytes <= 0 {
		g.MaxSnapshotBytes = guardDefaultMaxSnapshotBytes
	}
	if g.MaxRPCBytes <= 0 {
		g.MaxRPCBytes = guardDefaultMaxRPCBytes
	}
	return g
}

// Follower decides, for every replication RPC and TimeoutNow, whether the
// caller can be the leader this member follows (raftzone's FollowGuard).
// Its methods must be cheap and safe for concurrent use.
type Follower interface {
	// Replication refuses replication from callerID (at callerAddr) in
	// term, or returns nil.
	Replication(callerID, callerAddr string, term uint64) *Refusal
	// TimeoutNow refuses a TimeoutNow from callerID, or returns nil.
	TimeoutNow(callerID string) *Refusal
	// LeaderAlive reports whether this member follows a live leader other
	// than id: terms may then move only by one.
	LeaderAlive(id string) bool
}

// Refusal is why the guard refused an RPC.
type Refusal struct {
	reason string
	err    error
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("raft rpc refused (%s): %v", r.reason, r.err)
}

func (r *Refusal) Unwrap() error { return r.err }

func Refuse(reason string, format string, args ...any) *Refusal {
	return &Refusal{reason: reason, err: fmt.Errorf(format, args...)}
}

// guardedConn is the connection raft reads: its end of the pipe, with the real
// connection's addresses (raft logs RemoteAddr).
type guardedConn struct {
	net.Conn // raft's end of the pipe
	real     net.Conn
	done     chan struct{} // closed when both pump goroutines have returned

	mu      sync.Mutex
	refusal error // the first refusal, for tests and debug logging
}

func (c *guardedConn) LocalAddr() net.Addr  { return c.real.LocalAddr() }
func (c *guardedConn) RemoteAddr() net.Addr { return c.real.RemoteAddr() }

// refused returns why the guard closed the connection, or nil if it did not
// refuse anything.
func (c *guardedConn) refused() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusal
}

// GuardRaftConn returns the connection the member's Raft transport should read
// instead of conn: only RPCs that pass g's checks reach it, byte for byte as
// the caller sent them, and raft's responses go back to conn unchanged. Two
// goroutines pump the two directions; closing either connection (or a refused
// RPC) closes both and ends both goroutines.
func GuardRaftConn(conn net.Conn, g RPCGuard) net.Conn {
	raftEnd, guardEnd := net.Pipe()
	gc := &guardedConn{Conn: raftEnd, real: conn, done: make(chan struct{})}
	p := &guardPump{g: g.withDefaults(), real: conn, pipe: guardEnd, conn: gc}
	p.live.Store(2)
	go p.requests()
	go p.responses()
	return gc
}

// guardPump moves one connection's bytes.
type guardPump struct {
	g    RPCGuard
	real net.Conn // the authenticated connection
	pipe net.Conn // the guard's end of the pipe to raft
	conn *guardedConn

	closeOnce sync.Once
	live      atomic.Int32 // pump goroutines still running
	buf       []byte       // the request being read, type byte first
}

// shutdown closes the real connection and the pipe, which unblocks both
// pumps: raft's end then reads EOF, and the peer sees its connection close.
func (p *guardPump) shutdown() {
	p.closeOnce.Do(func() {
		p.real.Close()
		p.pipe.Close()
	})
}

func (p *guardPump) exit() {
	p.shutdown()
	if p.live.Add(-1) == 0 {
		close(p.conn.done)
	}
}

// responses copies raft's answers to the caller untouched. They are tens of
// bytes each, so a small buffer does.
func (p *guardPump) responses() {
	defer p.exit()
	_, _ = io.CopyBuffer(p.real, p.pipe, make([]byte, guardResponseBufferSize))
}

// requests forwards checked RPCs to raft until the connection ends or an RPC
// is refused.
func (p *guardPump) requests() {
	defer p.exit()
	br := bufio.NewReaderSize(p.real, guardReadBufferSize)
	for {
		err := p.forwardRPC(br)
		if err == nil {
			continue
		}
		var r *Refusal
		if errors.As(err, &r) {
			p.conn.mu.Lock()
			if p.conn.refusal == nil {
				p.conn.refusal = r
			}
			p.conn.mu.Unlock()
			if p.g.Reject != nil {
				p.g.Reject(r.reason)
			}
		}
		return
	}
}

// forwardRPC reads, checks and forwards one RPC. A *Refusal means the RPC
// was refused; any other error is the connection's end.
func (p *guardPump) forwardRPC(br *bufio.Reader) error {
	typ, err := br.ReadByte()
	if err != nil {
		return fmt.Errorf("read rpc type: %w", err)
	}
	if typ > RPCRequestPreVote {
		return Refuse(RejectUnknownType, "rpc type %d", typ)
	}
	// Read exactly one msgpack object, as raft's decoder will: it reads from a
	// bufio.Reader (an io.ByteScanner) and so consumes nothing past it.
	sc := msgpackScanner{r: br, out: append(p.buf[:0], typ), keep: true,
		budget: p.g.MaxRPCBytes, items: guardMaxRPCItems}
	err = sc.scan()
	p.buf = sc.out
	if err != nil {
		return guardScanError(fmt.Sprintf("rpc type %d", typ), err)
	}
	snapshot, err := p.g.check(typ, p.buf[1:])
	if err != nil {
		return err
	}
	if _, err := p.pipe.Write(p.buf); err != nil {
		return fmt.Errorf("forward rpc to raft: %w", err)
	}
	if snapshot > 0 {
		if _, err := io.CopyN(p.pipe, br, snapshot); err != nil {
			return fmt.Errorf("forward snapshot data to raft: %w", err)
		}
	}
	if cap(p.buf) > guardKeepBufferSize {
		p.buf = nil
	}
	return nil
}

// guardScanError turns a scanner error into a refusal, or passes on the
// connection's own failure.
func guardScanError(what string, err error) error {
	switch {
	case errors.Is(err, errMsgpackTooLarge):
		return &Refusal{reason: RejectRPCSize, err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, errMsgpackTooManyItems):
		return &Refusal{reason: RejectRPCItems, err: fmt.Errorf("%s: %w", what, err)}
	case errors.Is(err, errMsgpackInvalid):
		return &Refusal{reason: RejectDecode, err: fmt.Errorf("%s: %w", what, err)}
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// check decodes and checks one request body. It returns how many bytes of
// snapshot data follow it (InstallSnapshot only).
func (g *RPCGuard) check(typ byte, body []byte) (snapshot int64, err error) {
	switch typ {
	case RPCAppendEntries:
		var req raft.AppendEntriesRequest
		if err := guardDecode(body, &req); err != nil {
			return 0, &Refusal{reason: RejectDecode, err: fmt.Errorf("append entries: %w", err)}
		}
		return 0, g.checkAppendEntries(&req)
	case RPCRequestVote:
		var req raft.RequestVoteRequest
		if err := guardDecode(body, &req); err != nil {
			return 0, &Refusal{reason: RejectDecode, err: fmt.Errorf("request vote: %w", err)}
		}
		if err := g.checkVote("request vote", req.RPCHeader, req.Candidate, req.Term, req.LastLogTerm); err != nil {
			return 0, err
		}
		return 0, g.checkTransfer(req.LeadershipTransfer)
	case RPCRequestPreVote:
		var req raft.RequestPreVoteRequest
		if err := guardDecode(body, &req); err != nil {
			return 0, &Refusal{reason: RejectDecode, err: fmt.Errorf("request pre-vote: %w", err)}
		}
		return 0, g.checkVote("request pre-vote", req.RPCHeader, nil, req.Term, req.LastLogTerm)
	case RPCInstallSnapshot:
		var req raft.InstallSnapshotRequest
		if err := guardDecode(body, &req); err != nil {
			return 0, &Refusal{reason: RejectDecode, err: fmt.Errorf("install snapshot: %w", err)}
		}
		if err := g.checkInstallSnapshot(&req); err != nil {
			return 0, err
		}
		return req.Size, nil
	case RPCTimeoutNow:
		var req raft.TimeoutNowRequest
		if err := guardDecode(body, &req); err != nil {
			return 0, &Refusal{reason: RejectDecode, err: fmt.Errorf("timeout now: %w", err)}
		}
		if _, err := g.checkCaller("timeout now", req.RPCHeader, nil, true); err != nil {
			return 0, err
		}
		if g.Follow == nil {
			return 0, nil
		}
		if r := g.Follow.TimeoutNow(g.CallerID); r != nil {
			return 0, r
		}
		return 0, nil
	}
	return 0, Refuse(RejectUnknownType, "rpc type %d", typ)
}

// checkCaller checks that the RPC speaks for the authenticated caller, that
// the caller's node still belongs to the zone, and when voters is set (votes,
// pre-votes, TimeoutNow) that the caller is a voter of this member's Raft
// configuration: only voters may start or force elections. Replication is
// checked against the configuration by checkReplication. deprecated is the
// pre-header leader or candidate address field (empty from current raft's
// senders, or equal to the header's Addr), which raft still reads when the
// header's Addr is empty.
func (g *RPCGuard) checkCaller(what string, h raft.RPCHeader, deprecated []byte, voters bool) (hasConfig bool, err error) {
	if string(h.ID) != g.CallerID {
		return false, Refuse(RejectHeaderID, "%s: header id %q, caller is %q", what, h.ID, g.CallerID)
	}
	if string(h.Addr) != g.CallerAddr {
		return false, Refuse(RejectHeaderAddr, "%s: header address %q, caller's is %q", what, h.Addr, g.CallerAddr)
	}
	if len(deprecated) > 0 && string(deprecated) != g.CallerAddr {
		return false, Refuse(RejectHeaderAddr, "%s: leader/candidate address %q, caller's is %q", what, deprecated, g.CallerAddr)
	}
	if g.InZone != nil && !g.InZone() {
		return false, Refuse(RejectNotInZone, "%s: %s is no longer in the zone", what, g.CallerNode)
	}
	if g.Configured == nil {
		return false, nil
	}
	hasConfig, place := g.Configured(g.CallerID)
	if voters && hasConfig {
		switch place {
		case PlaceNone:
			return true, Refuse(RejectNotInConfig, "%s: %q is not in this member's raft configuration", what, g.CallerID)
		case PlaceNonvoter:
			return true, Refuse(RejectNotVoter, "%s: %q has no vote in this member's raft configuration", what, g.CallerID)
		}
	}
	return hasConfig, nil
}

// checkReplication decides whether the caller may replicate (AppendEntries,
// InstallSnapshot) to this member at term: it must be a server of this
// member's configuration — or, while this member's configuration lags, one
// the configuration's majority names as its leader (Attested) — and the
// leader this member follows in that term (FollowGuard). A member without a
// configuration yet (being added) hears the first leader that reaches it.
func (g *RPCGuard) checkReplication(what string, hasConfig bool, term uint64) error {
	if hasConfig && g.Configured != nil {
		if _, place := g.Configured(g.CallerID); place == PlaceNone {
			if g.Attested == nil || !g.Attested(g.CallerID, term) {
				if g.Outsider != nil {
					g.Outsider(g.CallerID, term)
				}
				return Refuse(RejectNotInConfig, "%s: %q is not in this member's raft configuration", what, g.CallerID)
			}
		}
	}
	if g.Follow == nil {
		return nil
	}
	if r := g.Follow.Replication(g.CallerID, g.CallerAddr, term); r != nil {
		return &Refusal{reason: r.reason, err: fmt.Errorf("%s: %w", what, r.err)}
	}
	return nil
}

// checkTransfer counts a vote request that asks for a leadership transfer and
// refuses it beyond the candidate's budget.
func (g *RPCGuard) checkTransfer(transfer bool) error {
	if !transfer || g.Forced == nil {
		return nil
	}
	if !g.Forced(g.CallerNode) {
		return Refuse(RejectForcedBudget, "request vote: %s forced more elections than its budget allows", g.CallerNode)
	}
	return nil
}

// checkTerm bounds the term an RPC may move this member to. While this member
// follows a live leader, an honest election can only be the next term (with
// pre-vote, a voter that lost the leader starts one only once a majority
// agrees); a member whose leader is gone may be behind by the elections it
// missed, up to MaxTermJump.
func (g *RPCGuard) checkTerm(what string, term uint64, hasConfig bool) error {
	limit := g.MaxFreshTerm
	if hasConfig {
		var local uint64
		if g.LocalTerm != nil {
			local = g.LocalTerm()
		}
		jump := g.MaxTermJump
		if g.Follow != nil && g.Follow.LeaderAlive(g.CallerID) {
			jump = 1
		}
		limit = local + jump
		if limit < local { // overflow
			limit = math.MaxUint64
		}
	}
	limit = min(limit, guardTermCeiling-1)
	if term > limit {
		return Refuse(RejectTerm, "%s: term %d above the limit %d", what, term, limit)
	}
	return nil
}

func (g *RPCGuard) checkVote(what string, h raft.RPCHeader, candidate []byte, term, lastLogTerm uint64) error {
	hasConfig, err := g.checkCaller(what, h, candidate, true)
	if err != nil {
		return err
	}
	if err := g.checkTerm(what, term, hasConfig); err != nil {
		return err
	}
	if lastLogTerm > term {
		return Refuse(RejectTerm, "%s: last log term %d above the election's term %d", what, lastLogTerm, term)
	}
	return nil
}

// checkAppendEntries checks the header, the terms, and every entry: raft
// appends them to its log without a look, and panics on a configuration entry
// that does not decode.
func (g *RPCGuard) checkAppendEntries(req *raft.AppendEntriesRequest) error {
	const what = "append entries"
	hasConfig, err := g.checkCaller(what, req.RPCHeader, req.Leader, false)
	if err != nil {
		return err
	}
	if err := g.checkTerm(what, req.Term, hasConfig); err != nil {
		return err
	}
	if req.PrevLogTerm > req.Term {
		return Refuse(RejectTerm, "%s: previous log term %d above the leader's term %d", what, req.PrevLogTerm, req.Term)
	}
	if uint64(len(req.Entries)) > math.MaxUint64-req.PrevLogEntry {
		return Refuse(RejectBadEntry, "%s: %d entries after index %d overflow the index", what, len(req.Entries), req.PrevLogEntry)
	}
	// A leader sends the consecutive entries after PrevLogEntry (raft's
	// setPreviousLog and setNewLogs), and log terms never decrease.
	prevTerm := req.PrevLogTerm
	for i, e := range req.Entries {
		if e == nil { // raft would dereference it
			return Refuse(RejectBadEntry, "%s: entry %d is nil", what, i)
		}
		if want := req.PrevLogEntry + uint64(i) + 1; e.Index != want {
			return Refuse(RejectBadEntry, "%s: entry %d has index %d, want %d", what, i, e.Index, want)
		}
		if e.Term > req.Term {
			return Refuse(RejectTerm, "%s: entry %d has term %d above the leader's term %d", what, e.Index, e.Term, req.Term)
		}
		if e.Term < prevTerm {
			return Refuse(RejectTerm, "%s: entry %d has term %d below the term %d before it", what, e.Index, e.Term, prevTerm)
		}
		prevTerm = e.Term
		switch e.Type {
		case raft.LogCommand, raft.LogNoop, raft.LogBarrier:
		case raft.LogConfiguration:
			if err := guardCheckConfiguration(e.Data); err != nil {
				return &Refusal{reason: RejectBadConfigEntry, err: fmt.Errorf("%s: entry %d: %w", what, e.Index, err)}
			}
		case raft.LogAddPeerDeprecated, raft.LogRemovePeerDeprecated:
			return Refuse(RejectDeprecatedEntry, "%s: entry %d has deprecated type %s", what, e.Index, e.Type)
		default:
			return Refuse(RejectUnknownEntryType, "%s: entry %d has unknown type %d", what, e.Index, e.Type)
		}
	}
	// Last: the RPC is well-formed, and FollowGuard records its sender as
	// the leader of its term when it passes.
	return g.checkReplication(what, hasConfig, req.Term)
}

// checkInstallSnapshot checks the header, term, size and the configuration
// raft decodes (with raft.DecodeConfiguration, which panics) from the request.
func (g *RPCGuard) checkInstallSnapshot(req *raft.InstallSnapshotRequest) error {
	const what = "install snapshot"
	hasConfig, err := g.checkCaller(what, req.RPCHeader, req.Leader, false)
	if err != nil {
		return err
	}
	if err := g.checkTerm(what, req.Term, hasConfig); err != nil {
		return err
	}
	if req.LastLogTerm > req.Term {
		return Refuse(RejectTerm, "%s: last log term %d above the leader's term %d", what, req.LastLogTerm, req.Term)
	}
	if req.Size < 0 || req.Size > g.MaxSnapshotBytes {
		return Refuse(RejectSnapshotSize, "%s: size %d outside [0, %d]", what, req.Size, g.MaxSnapshotBytes)
	}
	// Version 0 carries the legacy peer list, which only pre-1.0 raft writes;
	// from 1 on the configuration is an encoded raft.Configuration.
	if req.SnapshotVersion < 1 || req.SnapshotVersion > raft.SnapshotVersionMax {
		return Refuse(RejectSnapshotVersion, "%s: snapshot version %d, want 1..%d", what, req.SnapshotVersion, raft.SnapshotVersionMax)
	}
	if err := guardCheckConfiguration(req.Configuration); err != nil {
		return &Refusal{reason: RejectBadConfigEntry, err: fmt.Errorf("%s: %w", what, err)}
	}
	return g.checkReplication(what, hasConfig, req.Term)
}

// guardCheckConfiguration checks an encoded raft.Configuration: it must be
// exactly one well-formed msgpack value within the item bound, decode, and
// meet what raft's own checkConfiguration requires of every configuration a
// leader creates (non-empty unique IDs and addresses, a voter), with valid
// suffrage values.
func guardCheckConfiguration(data []byte) error {
	r := bytes.NewReader(data)
	sc := msgpackScanner{r: r, budget: int64(len(data)), items: guardMaxRPCItems}
	if err := sc.scan(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if r.Len() != 0 {
		return fmt.Errorf("configuration: %d bytes after the encoded value", r.Len())
	}
	var c raft.Configuration
	if err := guardDecode(data, &c); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	if len(c.Servers) == 0 {
		return errors.New("configuration has no servers")
	}
	ids := make(map[raft.ServerID]struct{}, len(c.Servers))
	addrs := make(map[raft.ServerAddress]struct{}, len(c.Servers))
	voters := 0
	for i, s := range c.Servers {
		if s.ID == "" || s.Address == "" {
			return fmt.Errorf("configuration server %d has an empty id or address", i)
		}
		if _, dup := ids[s.ID]; dup {
			return fmt.Errorf("configuration lists server id %q twice", s.ID)
		}
		ids[s.ID] = struct{}{}
		if _, dup := addrs[s.Address]; dup {
			return fmt.Errorf("configuration lists address %q twice", s.Address)
		}
		addrs[s.Address] = struct{}{}
		switch s.Suffrage {
		case raft.Voter:
			voters++
		case raft.Nonvoter, raft.Staging:
		default:
			return fmt.Errorf("configuration server %q has invalid suffrage %d", s.ID, s.Suffrage)
		}
	}
	if voters == 0 {
		return errors.New("configuration has no voter")
	}
	return nil
}

// guardMsgpack is the codec handle the guard decodes with: raft's own
// settings (a zero MsgpackHandle), shared because handles cache type
// information and are safe for concurrent use.
var guardMsgpack = &codec.MsgpackHandle{}

// guardDecode decodes data into v as raft would and requires the decoder to
// consume all of it: data is one msgpack value as delimited by the scanner, and
// a decoder that stopped short would mean raft reads the rest as the next
// RPC's type byte. The codec turns its internal panics into errors; recover
// anyway, so no input can take the guard down.
func guardDecode(data []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("msgpack decoder panicked: %v", p)
		}
	}()
	dec := codec.NewDecoderBytes(data, guardMsgpack)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("msgpack: %w", err)
	}
	if n := dec.NumBytesRead(); n != len(data) {
		return fmt.Errorf("msgpack decoder read %d of %d bytes", n, len(data))
	}
	return nil
}
