package zoneport

import (
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// RaftTransportConfig is what a member's Raft transport over the port needs
// besides the port.
type RaftTransportConfig struct {
	// Addresses resolves server IDs to zone-port addresses (the member's
	// list), so that a changed address needs no configuration change.
	Addresses raft.ServerAddressProvider
	// Logger receives hashicorp/raft's transport log lines.
	Logger hclog.Logger
	// RPCs counts the RPCs sent, by type; nil counts nothing.
	RPCs *prometheus.CounterVec
}

// RaftTransport is hashicorp/raft's NetworkTransport over the port's
// RaftStream, counting the RPCs this member sends by type, so that a
// leader's fan-out (heartbeats to every follower) is visible in its metrics.
// Valid once Listen succeeded.
func (p *Port) RaftTransport(c RaftTransportConfig) *CountingTransport {
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: c.Addresses,
		Logger:                c.Logger,
		Stream:                p.RaftStream(),
		MaxPool:               3,
		// The pipeline has an open hang bug; one RPC at a time is plenty for
		// a zone's few small commands per second.
		MaxRPCsInFlight: 1,
		Timeout:         10 * time.Second,
	})
	return &CountingTransport{NetworkTransport: nt, rpcs: c.RPCs}
}

// CountingTransport is a NetworkTransport that counts the RPCs it sends.
type CountingTransport struct {
	*raft.NetworkTransport
	rpcs *prometheus.CounterVec
}

func (t *CountingTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	kind := "append_entries"
	if len(args.Entries) == 0 {
		kind = "heartbeat"
	}
	t.count(kind)
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

func (t *CountingTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	t.count("request_vote")
	return t.NetworkTransport.RequestVote(id, target, args, resp)
}

func (t *CountingTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	t.count("request_pre_vote")
	return t.NetworkTransport.RequestPreVote(id, target, args, resp)
}

func (t *CountingTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	t.count("install_snapshot")
	return t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
}

func (t *CountingTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	t.count("timeout_now")
	return t.NetworkTransport.TimeoutNow(id, target, args, resp)
}

func (t *CountingTransport) count(kind string) {
	if t.rpcs != nil {
		t.rpcs.WithLabelValues(kind).Inc()
	}
}
