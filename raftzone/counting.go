package raftzone

import (
	"io"
	"net"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// countingConn counts the bytes that cross the zone port, TLS overhead
// included: what the network actually carries, which is what an operator
// paying for a site's uplink — and the benchmark suite — wants to know.
type countingConn struct {
	net.Conn
	sent, received prometheus.Counter
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(float64(n))
	return n, err
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(float64(n))
	return n, err
}

func (m *portMetrics) count(c net.Conn) net.Conn {
	return &countingConn{Conn: c, sent: m.bytes.WithLabelValues("sent"), received: m.bytes.WithLabelValues("received")}
}

// countingListener counts accepted connections' bytes.
type countingListener struct {
	net.Listener
	m *portMetrics
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.m.count(c), nil
}

// countingTransport counts the Raft RPCs this member sends, by type, so a
// leader's fan-out (heartbeats to every follower) is visible in its metrics.
type countingTransport struct {
	*raft.NetworkTransport
	rpcs *prometheus.CounterVec
}

func (t *countingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	kind := "append_entries"
	if len(args.Entries) == 0 {
		kind = "heartbeat"
	}
	t.rpcs.WithLabelValues(kind).Inc()
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

func (t *countingTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	t.rpcs.WithLabelValues("request_vote").Inc()
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

func (t *countingTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	t.rpcs.WithLabelValues("request_pre_vote").Inc()
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

func (t *countingTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	t.rpcs.WithLabelValues("install_snapshot").Inc()
	return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *countingTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	t.rpcs.WithLabelValues("timeout_now").Inc()
	return t.NetworkTransport.TimeoutNow(id, target, args, resp)
}
