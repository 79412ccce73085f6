// Package raftzone is a zone member: its Raft group (as a voter, a stand-by or
// a spare), genesis and join, membership and voter placement, signed report
// intake and the leader's verdicts. It speaks to its peers through the zone
// port (package zoneport).
//
// # Data flow
//
// Every member probes its peers (package probe, wired by package agent) and, every report
// period or at once when an observation flips, signs a report carrying only the
// results that differ from what the zone has committed for it. The report goes to
// the leader's POST /v1/reports over the peer API. The leader verifies it (key id,
// MAC, membership, seq, clock skew, and the store's own well-formedness rules,
// so no report the FSM would refuse reaches a batch), gathers the reports of a short window into one
// raft.Apply, and the store FSM on every member applies the batch to bbolt,
// checking every signature again. When a batch that changes a result commits,
// and every vote period, the leader tallies verdicts
// from that committed evidence (store.Tally), commits the changes with the
// applied index it tallied at, every replica tallies them again and applies
// only what the evidence supports, and only then does the leader hand them,
// stamped with its term, to the VerdictSink (apiwriter) that writes them to the
// Kubernetes API.
//
// # Genesis, membership and voters
//
// DESIGN.md ("The zone's Raft group") gives the rules and their reasons; in
// short:
//
//   - Exactly one cluster per zone. A member with Raft state never
//     bootstraps. A member without state first asks every member it can reach
//     to admit it; only when none has a cluster does it try the atomic Create
//     of the zone's genesis Lease, and only the member whose Create succeeds
//     bootstraps, alone. With the apiserver unreachable and no cluster found
//     it waits (bootstrap.go, membership.go).
//   - The leader reconciles the replicated member list with the cluster's
//     (Nodes with the zone label), and removes nothing while that list is
//     unavailable. A member whose data dir was wiped comes back with a new
//     server ID; the leader replaces its entry.
//   - At most --voters members vote and --standbys more are stand-bys (Raft
//     nonvoters); every other member is a spare, which copies the committed
//     view it needs from a server (spare.go). The leader promotes a stand-by
//     only after a live check, grows the voter set from an odd count in
//     pairs, replaces a voter dead for --dead-voter-timeout and promotes
//     before it demotes: package seats decides, voters.go gathers its inputs,
//     checks candidates and applies the plan.
//
// # Leaving the cloud, and losing a quorum
//
// A leader that has had no answer from the apiserver for --apiserver-fail-timeout,
// counted from its last answer, hands leadership to a voter that reaches it
// (HandoverBound bounds how long that takes; the agent sizes the zone Lease from
// it). A zone whose voters are gone for good is re-formed by a recovery request
// in one survivor's data dir (recover.go; package recovery holds the
// request and its rule).
//
// # Security
//
// The zone port (package zoneport) admits only members and candidates, each
// proving its node key and the zone key, and carries Raft and the peer API on
// one authenticated port; nothing is reachable before the proof. Reports
// carry their own MAC, the sender's node signature and a per-sender seq that
// is persisted on both ends.
//
// # Trust: what Raft does not give
//
// Raft tolerates crashes, not liars, and a stolen member holds everything it
// needs to send well-formed RPCs. So Raft here only orders and stores:
//
//   - The RPC guard (zoneport, fed by raftguard.go) lets only servers
//     of a member's configuration replicate to it, only the leader it follows in
//     that term (the candidate it voted for; no new term while its leader is
//     alive), elections only from voters and only for the next term while the
//     leader lives. A member whose configuration lags follows a server it does
//     not list only when a majority of the voters it knows name that server as
//     their leader (attest.go).
//   - Every replica checks what it applies (store): report signatures, member
//     lists against its own view of the cluster (witness.go feeds the store's
//     Witness), verdicts by tallying the evidence again; snapshots by the same
//     rules.
//   - What a stolen voter can still do is bounded and shown: an election it
//     forces with the leadership-transfer flag is counted, five per ten minutes
//     at most (zoneport), and a leader that then commits no member's
//     reports is given up by each member it starves (stall.go).
//   - Toward the cloud, no member's word stands for another's: the leader
//     gathers each member's own signed attestation of whom it reaches
//     (evidence.go) and each member's own signed vote that it leads in its
//     term (leadervote.go), and writes them with its zone Lease; the webhook
//     counts them, each against its signer's registered key.
//
// # Files
//
// One concept per file: server.go (life cycle: New, Run, the data dir),
// raft.go (the Raft instance and configuration reads), leader.go and
// leadership.go (the leadership loop and the fence the API writer checks),
// apply.go (every command through Raft), reporter.go (building and sending
// reports), peerapi.go (the peer API), intake.go (verifying and batching
// reports), verdict.go (tally and verdict commits), membership.go and
// bootstrap.go (members, genesis, join), voters.go (voter placement, with
// package seats), spare.go (spares and the view they copy), placement.go
// (handovers), recover.go (lost quorum), view.go, status.go and matrix.go
// (read-only views for callers outside; matrix.go the opinion matrix, who
// sees whom), port.go and raftguard.go (the member's side of
// its zone port: the server ID it hands the port, the members it pins and how
// it admits a Raft connection), attest.go and
// stall.go (whom it follows when its configuration lags, and a leader that
// starves it), evidence.go and leadervote.go (the members' signed word for the
// zone Lease), witness.go (the replica's view of the cluster), persist.go (the
// server ID and the report sequence numbers, both kept across restarts),
// config.go, deps.go and metrics.go. The zone port (and Raft's transport over
// it) is package zoneport's, the zone keys package zonekeys', the voter
// planner package seats' and the recovery request package recovery's; Raft's
// log lines reach slog through internal/hclogslog.
//
// raftzone must not import client-go or the Kubernetes API types (its only
// Kubernetes import is k8s.io/utils/clock): it sees the cluster only through
// MemberSource, Genesis and APIHealth, which the agent implements. It must not
// decide how probes run (package probe does), hold the zone keys' file
// (package zonekeys does) nor speak on the wire itself (package zoneport
// does).
package raftzone
