// Package zone holds the vocabulary every edgequorum component shares: members,
// signed probe reports, verdicts, and the names and annotation format through which
// the zone leader talks to the admission webhook.
//
// It owns the canonical byte encoding a report's MAC covers, so that the sender,
// the leader and every replica agree on exactly what was signed.
//
// It must stay a leaf: no Kubernetes, Raft, network or storage code, so that store,
// probe, raftzone, apiwriter and admission can all import it. What the zone's word
// looks like as Kubernetes objects (the Node condition, the zone Lease's claim) lives
// in zone/zonek8s.
package zone
