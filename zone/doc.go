// Package zone holds the vocabulary every edgequorum component shares: verdict
// states, member roles, members, probe results and reports, verdicts, the names
// of the objects and annotations through which the zone leader talks to the
// admission webhook (the zone and genesis Leases, the verdict and node-key
// annotations, the default zone label and Lease namespace), and the value
// formats of those annotations.
//
// It owns every signed encoding, so that whoever signs and whoever checks
// agree on exactly what was signed, each statement in a signature domain of
// its own: a report's canonical bytes, which its zone-key MAC and its
// sender's node signature cover; the verdict annotation, signed by the leader
// that writes it; the zone Lease's claim, signed by its holder, and the
// endorsements it carries; a member's attestation of whom it reaches and a
// member's vote for the leader of a term, each signed with its own node key.
// It also holds SigMemo, which lets a process verify a node signature once
// although it meets it twice.
//
// It must stay a leaf: nothing but the standard library, so no Kubernetes,
// Raft, network or storage code, and it must decide nothing (what the zone
// believes is raftzone's and store's, what the cloud honours admission's).
// store, raftzone, apiwriter, agent, admission and zone/zonek8s import it.
// What the zone's word looks like as Kubernetes objects (the Node condition,
// the zone Lease's claim read from a Lease) lives in zone/zonek8s.
package zone
