// Package zoneport owns a zone member's one network port: who may connect,
// how each side proves who it is, and which Raft RPCs reach the member.
//
// One TCP port carries two channels, Raft and the peer API, and nothing on
// it is reachable before both sides have proved themselves: TLS 1.3 with
// certificates made from each member's node key (nodekey.go), then, bound to
// that TLS session, an HMAC over the exported keying material, the role and
// the node and server ID each side claims, with the zone key (transport.go).
// The certificate's key must be the claimed node's pinned key or, for a node
// not pinned yet, the key its own Node registers (peerbook.go). Only
// addresses of members and candidates may start a handshake, a few at a time
// each. After the proof every byte travels in frames (frames.go). Raft's
// transport runs over it (raftransport.go: NetworkTransport's protocol with
// buffers sized for a zone's RPCs, counting the RPCs sent),
// and the peer API's HTTP server and client are made here (peerserver.go,
// port.go), so that their idle timeouts agree.
//
// Raft connections then pass the RPC guard (rpcguard.go, msgpackscan.go,
// rpcwire.go): every RPC must speak for its authenticated caller, terms may
// not leap, configuration entries and snapshots are checked before
// hashicorp/raft decodes them, and replication is heard only from the leader
// this member follows (followguard.go: one leader per term, the candidate it
// voted for, no new term while its leader lives; transfer votes counted and
// held to a budget).
//
// The port is built before the member it serves, so that the agent's peer
// probes hold its authenticated client from the start; the member hands
// itself over (Port.Serve) once its Raft is up, through the small Member
// interface: the members it pins, and its decision on a Raft connection.
// The candidates come from the cluster's member list (members.go, a
// MemberSource); metrics.go holds the port's counters.
// The port keeps no Raft state of its own and must not import raftzone,
// store or probe; the zone keys it proves with are package zonekeys'.
package zoneport
