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
// checking every signature again. Every vote period the leader tallies verdicts
// from that committed evidence (store.Tally), commits the changes with the
// applied index it tallied at, every replica tallies them again and applies
// only what the evidence supports, and only then does the leader hand them,
// stamped with its term, to the VerdictSink (apiwriter) that writes them to the
// Kubernetes API.
//
// # Genesis: exactly one cluster per zone
//
// A member decides how to enter the zone's cluster by this rule:
//
//  1. A member with Raft state never bootstraps. It rejoins with its state; if it
//     is missing from the configuration it asks to be admitted like a new member.
//  2. A member without state first asks every member it can reach (from the
//     cluster's member list and from the cached replicated member list) to admit
//     it. Any member that belongs to a cluster forwards it to the leader, which
//     records it in the member list (a spare until the planner gives it a seat).
//  3. Only if no reachable member has a cluster does it try the atomic Create of
//     the zone's genesis object (the Lease edgequorum-genesis-<zone>), holding a
//     cluster UUID and the founder's node name and server ID. The one member whose
//     Create succeeds bootstraps a cluster of itself alone; every other member
//     finds the object exists and keeps asking to join until the founder's cluster
//     admits it. A founder that crashed between Create and bootstrap finds its own
//     record on restart and finishes. (A genesis object whose founder is no node
//     of the zone, made by a token of another zone, is taken over by the agent's
//     Genesis, not obeyed.)
//  4. With the apiserver unreachable and no cluster found, a stateless member
//     waits: it can neither found nor join, and guessing could split the zone.
//
// Because Create succeeds once per zone and only its winner bootstraps, two
// clusters can never form, whatever order members start in or how the network
// splits. A member whose data dir was wiped comes back with a new server ID (never
// the node name); the leader replaces its member entry and removes the stale
// server from the configuration.
//
// # Membership and voters
//
// The leader reconciles the replicated member list with the cluster's (Nodes with
// the zone label): members that left are removed, changed addresses followed.
// While the cluster's list is unavailable nothing is removed. At most --voters
// members vote (all of them in a zone no larger than that, so an evenly split
// small zone stalls instead of one half condemning the other); the leader promotes
// healthy stand-bys that reach the apiserver, replaces a voter that looked dead for
// --dead-voter-timeout, and promotes before it demotes.
//
// Only voters and up to --standbys stand-bys (Raft nonvoters that replicate, so a
// lost voter's replacement already holds the log) are Raft servers. Every other
// member is a spare (spare.go): it probes and reports like any member, and copies
// the committed view it needs from a server over GET /v1/view into a store of its
// own, so the leader's replication cost stays that of a small zone however large
// the zone grows. planStandbys (voterplan.go) picks the stand-bys; balanceStandbys
// (voters.go) adds and removes them.
//
// A promotion is checked live: right before it, the leader asks the candidate for
// its replica state over the peer API and promotes it only if it answers with its
// server ID and trails the log by at most a few entries. A committed report only
// says the member was alive up to a vote timeout ago, and a voter that is dead
// when it is added can cost the zone its quorum for good: a configuration of two
// voters, one dead, can neither commit nor elect a leader. For the same reason the
// voter set grows from an odd count in pairs (1 → 3 → 5), never resting at two
// below the target. The rules are pure functions (voterplan.go): classify turns
// members, their reports and verdicts and the configuration into seats, and
// planVoters turns seats into promotions and demotions; balanceVoters
// (voters.go) only gathers their inputs, checks candidates live and applies the
// plan. A join
// starts a round at once, and a round short of a voter it could have looks again
// within moments, so a forming zone has its voters within a second, not at the
// next --reconcile-period tick.
//
// # Leaving the cloud, and losing a quorum
//
// A leader that has had no answer from the apiserver for --apiserver-fail-timeout,
// counted from its last answer, hands leadership to a voter that reaches it
// (HandoverBound bounds how long that takes; the agent sizes the zone Lease from
// it). A zone whose voters are gone for good is re-formed by a recovery request
// in one survivor's data dir (recover.go, CheckRecovery).
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
// bootstrap.go (members, genesis, join), voters.go and voterplan.go (voter
// placement), spare.go (spares and the view they copy), placement.go
// (handovers), recover.go (lost quorum), view.go and status.go (read-only
// views for callers outside), port.go and raftguard.go (the member's side of
// its zone port: the server ID it hands the port, the members it pins and how
// it admits a Raft connection), counting.go (Raft RPCs by type), attest.go and
// stall.go (whom it follows when its configuration lags, and a leader that
// starves it), evidence.go and leadervote.go (the members' signed word for the
// zone Lease), witness.go (the replica's view of the cluster), persist.go (the
// server ID and the report sequence numbers, both kept across restarts),
// config.go, deps.go, metrics.go and hclog.go. The zone port is package
// zoneport's and the zone keys package zonekeys'.
//
// raftzone must not import client-go or the Kubernetes API types (its only
// Kubernetes import is k8s.io/utils/clock): it sees the cluster only through
// MemberSource, Genesis and APIHealth, which the agent implements. It must not
// decide how probes run (package probe does), hold the zone keys' file
// (package zonekeys does) nor speak on the wire itself (package zoneport
// does).
package raftzone
