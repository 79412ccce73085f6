// Package apiwriter is the zone leader's only path to the Kubernetes API: it writes
// committed verdicts as the edgequorum.io/verdict Node annotation and renews the
// zone Lease that tells the admission webhook the zone's quorum is alive and
// connected.
//
// Every write is fenced: the writer confirms leadership with a quorum
// (Fence.VerifyLeader) right before it and signs under the leader's Raft term.
// It writes the zone's committed verdict over any other verdict on the Node,
// whatever term that one was decided in, but leaves alone an annotation or
// Lease claiming a term above its own unless a quorum confirms it again after
// reading it (then no leader of that term can exist: the term is forged). A
// deposed leader that wakes up late therefore cannot undo its successor's
// work, and a forged verdict cannot outlive its signer's leadership. A member
// that lost leadership drops its pending verdicts (its successor re-delivers
// every committed one); a leader whose quorum merely answered too slowly
// keeps them and retries. Writes are never blind: a verdict is one JSON patch
// of nodes/status that tests for the annotation value it was judged against
// (so the kubelet's and the node lifecycle controller's writes to other
// fields cost no retry; a node's first verdict tests the resourceVersion),
// and the Lease an Update with a resourceVersion precondition.
//
// The zone Lease also names the standing verdicts other members signed
// (endorsements), and carries the members' signed attestations for the nodes
// the cloud cannot hear from (evidence) while some node needs them.
//
// A verdict is written when it changes, and again when the leader's Node
// informer shows a Node without it (Restore): a Node registered anew or an
// annotation someone removed would otherwise leave the node unprotected until
// its next change.
//
// While the apiserver is unreachable, pending verdicts coalesce — the latest per
// node wins — and are retried with backoff from a rate-limited workqueue; they
// flush as soon as the apiserver answers again. The writer also probes the
// apiserver on every member (leader or not), because reports carry that
// reachability and leadership placement depends on it.
//
// apiwriter must not decide verdicts or touch Raft: it receives committed changes
// through the VerdictSink interface raftzone defines and asks raftzone only to
// verify leadership.
package apiwriter
