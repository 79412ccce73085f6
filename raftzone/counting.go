package raftzone

import (
	"io"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

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
