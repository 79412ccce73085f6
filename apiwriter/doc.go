// Package apiwriter is the zone leader's only path to the Kubernetes API. It
// owns four things: the committed verdicts it writes on the zone's Nodes (the
// edgequorum.io/verdict annotation and the EdgeQuorum condition that shows
// it), the zone Lease that tells the admission webhook the zone's quorum is
// alive and reaches the cloud, the Events that record both, and this member's
// knowledge of whether the apiserver is reachable.
//
// # Fencing: what the writer overwrites
//
// Before every write the writer confirms with a quorum that it still leads
// (Fence.VerifyLeader) and signs what it writes with its node key under the
// term it leads. It never writes a verdict decided in a term above the one it
// leads. On the Node it writes the zone's committed verdict over any other
// verdict, whatever term that one was decided in, and over an annotation it
// cannot parse: the committed verdict is the zone's word, so an earlier
// leader's forgery does not outlive its leadership. It leaves an annotation
// alone only when it already states the committed decision and is signed by
// this member or by another member whose verdict the zone Lease endorses (then
// it writes the condition alone, if the condition does not show the verdict).
// A verdict queued earlier that the zone has since superseded is dropped
// unwritten.
//
// A Node annotation or zone Lease that claims a signing term above the
// writer's own is overwritten too, but only if a quorum confirms the writer
// again after it read that object (confirmForged): a leader of a higher term
// would need a quorum that no longer confirms this one, so the term is one
// the zone never had, and one write of a huge term must not pin the zone.
// Such overwrites are counted (edgequorum_apiwriter_forged_terms_total). If
// the quorum does not confirm the writer, it writes nothing. A member that
// lost leadership drops its pending verdicts (its successor re-delivers every
// committed one); a leader whose quorum merely answered too slowly keeps them
// and retries.
//
// # How it writes
//
// A verdict is one JSON patch (RFC 6902, never a merge patch, never an
// Update) of the Node's status subresource, which stores metadata too, so
// annotation and condition change in one write. The patch tests the
// annotation value the writer judged against (a node's first verdict tests
// the resourceVersion instead, since a JSON patch cannot test that a key is
// absent) and the condition's list index by its type, so the kubelet's and
// the node lifecycle controller's writes to other fields cost no retry, while
// a verdict written meanwhile by anyone else, or a reordered condition list,
// fails the patch and is read again. A verdict is written when it changes,
// and again when the leader's Node informer shows a Node without it (Restore):
// a Node registered anew or an annotation someone removed or edited would
// otherwise leave the node unprotected until its next change.
//
// The zone Lease is created once and then renewed by Update of the copy last
// written, whose resourceVersion is the precondition; a conflict drops that
// copy and the next renewal reads the Lease again. Besides holder, term and
// member count it names the standing verdicts other members signed
// (endorsements), carries the members' signed attestations for the nodes that
// need them (evidence) and the members' signed votes that the holder leads in
// its term, and is signed by the holder. It is renewed every LeaseRenew while
// the zone is busy (a member needs its peers' word that they reach it, or a
// member judged unhealthy a majority's word that it is down, or the votes
// are short, or any of these was within quietAfter renewals), and
// quietly every QuietRenew otherwise, once every reader reads the quiet
// format (lease.go, quiet); at once when this member starts to lead or a
// member starts to need evidence, and sooner (a bounded number of times per
// term) while its votes are short of a majority.
//
// Both formats keep to the level every reader reads (format.go): the lowest
// the zone's members announce (ZoneFacts) and, once that is above the
// oldest level this build writes, the lowest any webhook replica says in
// the webhook's reads Lease, read at most once per WebhookReadsPeriod.
//
// Events (a verdict that changes a node's state, a leader taking the Lease
// over) are best effort: a failed Event is counted, never retried, and never
// fails the write it records.
//
// While the apiserver is unreachable, pending verdicts coalesce (the newest
// per node wins) and are retried with backoff from a rate-limited workqueue;
// they flush as soon as the apiserver answers again. Every member, leader or
// not, checks the apiserver every HealthPeriod with a SelfSubjectReview,
// because reports carry that reachability and leadership placement depends on
// it. Only a successful write or review proves the apiserver reachable: an
// edge API proxy answers reads from its cache, so a read can only prove it
// unreachable.
//
// # What it must not do
//
// apiwriter must not decide verdicts, touch Raft or read the replicated
// store, and must not import raftzone. It receives committed verdicts through
// Verdicts (the VerdictSink raftzone defines) and sees the zone only through
// the interfaces it defines: Fence and ZoneFacts (raftzone.Leadership),
// NodeVerdicts (the agent's Node informer and the zone's committed verdicts,
// set by Follow) and EvidenceSource (raftzone.Member, set by Gather). It must
// write nothing to the API but the verdict annotation and EdgeQuorum
// condition on Nodes, the zone Lease and its Events, and read nothing of the
// webhook's but its reads Lease.
package apiwriter
