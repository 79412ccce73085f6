// Package agent assembles the edgequorum agent that runs on every edge node: it
// reads its zone and member list from the Kubernetes API, probes its peers
// (probe), replicates and judges through the zone's Raft group (raftzone), writes
// verdicts while it leads (apiwriter), and serves its status over HTTP.
//
// It owns the client-go adapters raftzone sees only as interfaces (the member
// list from a Node informer, the genesis Lease, apiserver reachability) and the
// agent's status server. It holds no protocol logic of its own: verdicts, voting
// and membership rules live in raftzone, probe semantics in probe.
package agent
