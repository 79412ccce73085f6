package zoneport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// A member's Raft transport.
//
// It speaks hashicorp/raft's NetworkTransport protocol byte for byte — per
// RPC the type byte and the msgpack request, InstallSnapshot's data after
// it, then the error string and the msgpack response — so members of every
// release talk to each other. What differs is what a connection costs.
// NetworkTransport gives every connection a 256 KiB send buffer (the
// caller's side) or receive buffer (the server's), sized for large
// replication batches at full speed. A leader holds two connections to each
// follower (heartbeats and replication run side by side), so at 9 members
// that was 4 MiB of buffers, mostly never written, which the Go collector
// still counts as live and doubles into its goal: about a megabyte of a
// leader's memory per follower. A zone's RPCs are a heartbeat of some 100
// bytes and a report batch of a few KiB, and the zone port below cuts every
// write into frames of at most 64 KiB anyway; buffers of a few KiB move the
// rare large batch or snapshot in more writes, at the same speed.
const (
	// raftSendBuffer buffers a request on the caller's side: one heartbeat
	// or report batch is one write, so one frame.
	raftSendBuffer = 16 << 10
	// raftReadBuffer buffers what a connection reads: answers on the
	// caller's side, requests (already checked by the RPC guard) on the
	// server's.
	raftReadBuffer = 4 << 10
	// raftAnswerBuffer buffers the server's answers, tens of bytes each.
	raftAnswerBuffer = 1 << 10
	// raftMaxPool is how many idle connections to one member are kept.
	raftMaxPool = 3
	// raftSnapshotTimeoutScale: an InstallSnapshot may take the RPC timeout
	// once per this many bytes (NetworkTransport's default).
	raftSnapshotTimeoutScale = 256 << 10
	// raftMaxAnswerBytes and raftMaxAnswerItems bound each of an answer's
	// two values (the error string, the response): raft's responses are
	// fixed structs of tens of bytes and a dozen items.
	raftMaxAnswerBytes = 64 << 10
	raftMaxAnswerItems = 1 << 10
)

// Reasons the caller's side drops a connection over its answer, counted
// with the guard's reasons (RaftTransportConfig.Refused).
const (
	RejectAnswerSize   = "answer_size"   // an answer value larger than raftMaxAnswerBytes
	RejectAnswerItems  = "answer_items"  // an answer value with more than raftMaxAnswerItems items
	RejectAnswerDecode = "answer_decode" // not valid msgpack, or not decodable into the response
)

// errRaftTransportShutdown is returned by RPCs of a closed transport.
var errRaftTransportShutdown = errors.New("raft transport closed")

// RaftTransportConfig is what a member's Raft transport over the port needs
// besides the port.
type RaftTransportConfig struct {
	// Addresses resolves server IDs to zone-port addresses (the member's
	// list), so that a changed address needs no configuration change.
	Addresses raft.ServerAddressProvider
	// Logger receives the transport's log lines.
	Logger hclog.Logger
	// RPCs counts the RPCs sent, by type; nil counts nothing.
	RPCs *prometheus.CounterVec
	// Timeout bounds one RPC (a snapshot gets it once per 256 KiB); zero
	// means 10 s.
	Timeout time.Duration
	// Refused counts an answer that was refused, by reason (the
	// RejectAnswer* constants): a member that answers with a forged length
	// or garbage costs its caller a connection, never a decoder's
	// allocation. It must not block; nil counts nothing.
	Refused func(reason string)
}

// RaftTransport is the member's raft.Transport over the port's RaftStream:
// NetworkTransport's protocol with small buffers, counting the RPCs this
// member sends by type, so that a leader's fan-out (heartbeats to every
// follower) is visible in its metrics. Valid once Listen succeeded.
func (p *Port) RaftTransport(c RaftTransportConfig) *RaftTransport {
	return NewRaftTransport(p.RaftStream(), c)
}

// RaftTransport carries one member's Raft RPCs over a raft.StreamLayer. It
// replicates one RPC at a time per connection (no pipelining: a zone writes
// a few small commands per second, and raft's pipeline has an open hang bug).
type RaftTransport struct {
	stream  raft.StreamLayer
	addrs   raft.ServerAddressProvider
	logger  hclog.Logger
	rpcs    *prometheus.CounterVec
	refused func(reason string)
	timeout time.Duration

	// encode is raft's wire handle for what is sent (its TimeNotBuiltin
	// setting); decode is its handle for the requests it serves (answers
	// are decoded with the guard's, the same settings). Handles are safe
	// for concurrent use once configured, so every connection shares them.
	encode, decode *codec.MsgpackHandle

	consume chan raft.RPC

	heartbeatMu sync.Mutex
	heartbeat   func(raft.RPC)

	mu       sync.Mutex
	pool     map[raft.ServerAddress][]*raftConn
	served   map[net.Conn]struct{}
	closed   bool
	shutdown chan struct{}
}

var (
	_ raft.Transport   = (*RaftTransport)(nil)
	_ raft.WithClose   = (*RaftTransport)(nil)
	_ raft.WithPreVote = (*RaftTransport)(nil)
)

// NewRaftTransport starts serving the connections stream accepts; Close
// stops it.
func NewRaftTransport(stream raft.StreamLayer, c RaftTransportConfig) *RaftTransport {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	t := &RaftTransport{
		stream:   stream,
		addrs:    c.Addresses,
		logger:   c.Logger,
		rpcs:     c.RPCs,
		refused:  c.Refused,
		timeout:  c.Timeout,
		encode:   raftWire(),
		decode:   &codec.MsgpackHandle{},
		consume:  make(chan raft.RPC),
		pool:     map[raft.ServerAddress][]*raftConn{},
		served:   map[net.Conn]struct{}{},
		shutdown: make(chan struct{}),
	}
	go t.accept()
	return t
}

// Consumer is where raft receives the RPCs this member is sent.
func (t *RaftTransport) Consumer() <-chan raft.RPC { return t.consume }

// LocalAddr is the member's advertised zone-port address.
func (t *RaftTransport) LocalAddr() raft.ServerAddress {
	return raft.ServerAddress(t.stream.Addr().String())
}

// SetHeartbeatHandler lets raft answer heartbeats without its main loop, so
// that a busy leader's followers do not time out.
func (t *RaftTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.heartbeatMu.Lock()
	t.heartbeat = cb
	t.heartbeatMu.Unlock()
}

// AppendEntriesPipeline is not supported: raft then replicates one
// AppendEntries at a time.
func (t *RaftTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// EncodePeer stores a server's address as the member list resolves it.
func (t *RaftTransport) EncodePeer(id raft.ServerID, addr raft.ServerAddress) []byte {
	return []byte(t.address(id, addr))
}

// DecodePeer reads what EncodePeer stored.
func (t *RaftTransport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

func (t *RaftTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	kind := "append_entries"
	if len(args.Entries) == 0 {
		kind = "heartbeat"
	}
	t.count(kind)
	return t.call(id, target, RPCAppendEntries, args, resp)
}

func (t *RaftTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	t.count("request_vote")
	return t.call(id, target, RPCRequestVote, args, resp)
}

func (t *RaftTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	t.count("request_pre_vote")
	return t.call(id, target, RPCRequestPreVote, args, resp)
}

func (t *RaftTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	t.count("timeout_now")
	return t.call(id, target, RPCTimeoutNow, args, resp)
}

// InstallSnapshot streams data after the request on a connection of its
// own, which is closed afterwards rather than pooled.
func (t *RaftTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	t.count("install_snapshot")
	c, err := t.conn(id, target)
	if err != nil {
		return err
	}
	defer c.close()
	timeout := t.timeout * time.Duration(args.Size/raftSnapshotTimeoutScale)
	c.conn.SetDeadline(time.Now().Add(max(timeout, t.timeout)))
	if err := c.send(RPCInstallSnapshot, args, data); err != nil {
		return fmt.Errorf("install snapshot on %s: %w", c.target, err)
	}
	if err := c.receive(resp); err != nil {
		var remote remoteError
		if errors.As(err, &remote) {
			return remote
		}
		t.countRefusal(err)
		return fmt.Errorf("install snapshot on %s: %w", c.target, err)
	}
	return nil
}

// Close stops accepting, ends the connections it serves and closes the idle
// ones; RPCs after it fail.
func (t *RaftTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.shutdown)
	pool, served := t.pool, t.served
	t.pool, t.served = nil, nil
	t.mu.Unlock()
	for _, conns := range pool {
		for _, c := range conns {
			c.conn.Close()
		}
	}
	for c := range served {
		c.Close()
	}
	return t.stream.Close()
}

func (t *RaftTransport) count(kind string) {
	if t.rpcs != nil {
		t.rpcs.WithLabelValues(kind).Inc()
	}
}

// address is where id is reached: the member list's address, or target
// when the list does not know id.
func (t *RaftTransport) address(id raft.ServerID, target raft.ServerAddress) raft.ServerAddress {
	if t.addrs == nil {
		return target
	}
	addr, err := t.addrs.ServerAddr(id)
	if err != nil {
		t.logger.Warn("no address for server, using raft's", "id", id, "fallback", target, "error", err)
		return target
	}
	return addr
}

// call makes one RPC on a pooled connection. A connection that failed is
// closed; one that carried an answer, even an error, goes back to the pool.
func (t *RaftTransport) call(id raft.ServerID, target raft.ServerAddress, typ byte, args, resp any) error {
	c, err := t.conn(id, target)
	if err != nil {
		return err
	}
	c.conn.SetDeadline(time.Now().Add(t.timeout))
	if err := c.send(typ, args, nil); err != nil {
		c.close()
		return fmt.Errorf("raft %s to %s: %w", rpcName(typ), c.target, err)
	}
	err = c.receive(resp)
	var remote remoteError
	switch {
	case err == nil:
		t.release(c)
		return nil
	case errors.As(err, &remote):
		t.release(c)
		return remote
	}
	c.close()
	t.countRefusal(err)
	return fmt.Errorf("raft %s to %s: %w", rpcName(typ), c.target, err)
}

// countRefusal counts err if it refused an answer.
func (t *RaftTransport) countRefusal(err error) {
	var r *Refusal
	if t.refused != nil && errors.As(err, &r) {
		t.refused(r.reason)
	}
}

// conn takes an idle connection to id's address or dials one.
func (t *RaftTransport) conn(id raft.ServerID, target raft.ServerAddress) (*raftConn, error) {
	addr := t.address(id, target)
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errRaftTransportShutdown
	}
	if idle := t.pool[addr]; len(idle) > 0 {
		c := idle[len(idle)-1]
		idle[len(idle)-1] = nil
		t.pool[addr] = idle[:len(idle)-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	conn, err := t.stream.Dial(addr, t.timeout)
	if err != nil {
		return nil, fmt.Errorf("dial raft at %s: %w", addr, err)
	}
	w := bufio.NewWriterSize(conn, raftSendBuffer)
	return &raftConn{
		target: addr,
		conn:   conn,
		w:      w,
		enc:    codec.NewEncoder(w, t.encode),
		r:      bufio.NewReaderSize(conn, raftReadBuffer),
	}, nil
}

// release pools an idle connection, or closes it when the pool is full or
// the transport closed.
func (t *RaftTransport) release(c *raftConn) {
	c.conn.SetDeadline(time.Time{})
	t.mu.Lock()
	if !t.closed && len(t.pool[c.target]) < raftMaxPool {
		t.pool[c.target] = append(t.pool[c.target], c)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	c.close()
}

// raftConn is the caller's side of one connection.
type raftConn struct {
	target raft.ServerAddress
	conn   net.Conn
	w      *bufio.Writer
	enc    *codec.Encoder
	r      *bufio.Reader
	answer []byte // the answer value being read, reused
}

func (c *raftConn) close() { c.conn.Close() }

// send writes one request, and data after it for a snapshot.
func (c *raftConn) send(typ byte, args any, data io.Reader) error {
	if err := c.w.WriteByte(typ); err != nil {
		return err
	}
	if err := c.enc.Encode(args); err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	if data != nil {
		if _, err := io.Copy(c.w, data); err != nil {
			return fmt.Errorf("snapshot data: %w", err)
		}
	}
	return c.w.Flush()
}

// remoteError is the error the other member's raft answered with: the
// connection is still good.
type remoteError struct{ msg string }

func (e remoteError) Error() string { return e.msg }

// receive reads one answer into resp. The server always sends a response
// after the error string, also when the string is not empty. The answering
// member is not trusted more than a caller: each value is delimited and
// bounded by the guard's scanner before the codec sees it, so a forged
// length is a *Refusal, not an allocation.
func (c *raftConn) receive(resp any) error {
	var msg string
	if err := c.value(&msg); err != nil {
		return fmt.Errorf("read answer's error: %w", err)
	}
	if err := c.value(resp); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if msg != "" {
		return remoteError{msg}
	}
	return nil
}

// value reads one bounded msgpack value of an answer into v.
func (c *raftConn) value(v any) error {
	sc := msgpackScanner{r: c.r, out: c.answer[:0], keep: true, budget: raftMaxAnswerBytes, items: raftMaxAnswerItems}
	err := sc.scan()
	c.answer = sc.out
	switch {
	case errors.Is(err, errMsgpackTooLarge):
		return &Refusal{reason: RejectAnswerSize, err: err}
	case errors.Is(err, errMsgpackTooManyItems):
		return &Refusal{reason: RejectAnswerItems, err: err}
	case errors.Is(err, errMsgpackInvalid):
		return &Refusal{reason: RejectAnswerDecode, err: err}
	case err != nil:
		return err
	}
	if err := guardDecode(c.answer, v); err != nil {
		return &Refusal{reason: RejectAnswerDecode, err: err}
	}
	return nil
}

// accept serves the connections the stream layer admits until Close.
func (t *RaftTransport) accept() {
	const first, most = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := t.stream.Accept()
		if err != nil {
			select {
			case <-t.shutdown:
				return
			default:
			}
			delay = min(max(2*delay, first), most)
			t.logger.Error("failed to accept a raft connection", "error", err)
			select {
			case <-t.shutdown:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			conn.Close()
			return
		}
		t.served[conn] = struct{}{}
		t.mu.Unlock()
		go t.serve(conn)
	}
}

// serve answers one connection's RPCs until it fails or the transport
// closes.
func (t *RaftTransport) serve(conn net.Conn) {
	defer func() {
		conn.Close()
		t.mu.Lock()
		delete(t.served, conn)
		t.mu.Unlock()
	}()
	r := bufio.NewReaderSize(conn, raftReadBuffer)
	w := bufio.NewWriterSize(conn, raftAnswerBuffer)
	dec := codec.NewDecoder(r, t.decode)
	enc := codec.NewEncoder(w, t.encode)
	for {
		err := t.serveRPC(r, dec, enc)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			if !quietEnd(err) {
				t.logger.Error("raft connection failed", "remote", conn.RemoteAddr().String(), "error", err)
			}
			return
		}
	}
}

// quietEnd reports whether err is a connection's ordinary end: the peer or
// the guard closed it, or the transport shut down.
func quietEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, errRaftTransportShutdown)
}

// serveRPC reads one request, has raft answer it and writes the answer.
// The decoder reads r, a ByteScanner, byte by byte as it needs them, so a
// snapshot's data is still in r after its request.
func (t *RaftTransport) serveRPC(r *bufio.Reader, dec *codec.Decoder, enc *codec.Encoder) error {
	typ, err := r.ReadByte()
	if err != nil {
		return err
	}
	answer := make(chan raft.RPCResponse, 1)
	rpc := raft.RPC{RespChan: answer}
	heartbeat := false
	switch typ {
	case RPCAppendEntries:
		req := &raft.AppendEntriesRequest{}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode append entries: %w", err)
		}
		rpc.Command = req
		heartbeat = isHeartbeat(req)
	case RPCRequestVote:
		req := &raft.RequestVoteRequest{}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode request vote: %w", err)
		}
		rpc.Command = req
	case RPCRequestPreVote:
		req := &raft.RequestPreVoteRequest{}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode request pre-vote: %w", err)
		}
		rpc.Command = req
	case RPCInstallSnapshot:
		req := &raft.InstallSnapshotRequest{}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode install snapshot: %w", err)
		}
		rpc.Command = req
		rpc.Reader = io.LimitReader(r, req.Size)
	case RPCTimeoutNow:
		req := &raft.TimeoutNowRequest{}
		if err := dec.Decode(req); err != nil {
			return fmt.Errorf("decode timeout now: %w", err)
		}
		rpc.Command = req
	default:
		return fmt.Errorf("unknown raft rpc type %d", typ)
	}

	handled := false
	if heartbeat {
		t.heartbeatMu.Lock()
		fn := t.heartbeat
		t.heartbeatMu.Unlock()
		if fn != nil {
			fn(rpc)
			handled = true
		}
	}
	if !handled {
		select {
		case t.consume <- rpc:
		case <-t.shutdown:
			return errRaftTransportShutdown
		}
	}
	select {
	case resp := <-answer:
		msg := ""
		if resp.Error != nil {
			msg = resp.Error.Error()
		}
		if err := enc.Encode(msg); err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		if err := enc.Encode(resp.Response); err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		return nil
	case <-t.shutdown:
		return errRaftTransportShutdown
	}
}

// isHeartbeat is raft's own test (net_transport.go) for an AppendEntries its
// heartbeat handler may answer: a term and a leader, and nothing else.
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	leader := req.RPCHeader.Addr
	if len(leader) == 0 {
		leader = req.Leader //lint:ignore SA1019 raft still reads the deprecated field from older senders
	}
	return req.Term != 0 && leader != nil && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 &&
		len(req.Entries) == 0 && req.LeaderCommitIndex == 0
}

// rpcName names a Raft RPC type for an operator's log.
func rpcName(typ byte) string {
	switch typ {
	case RPCAppendEntries:
		return "append entries"
	case RPCRequestVote:
		return "request vote"
	case RPCInstallSnapshot:
		return "install snapshot"
	case RPCTimeoutNow:
		return "timeout now"
	case RPCRequestPreVote:
		return "request pre-vote"
	}
	return fmt.Sprintf("rpc type %d", typ)
}
