package zoneport

import "crypto/ed25519"

// Candidate is a node the cluster's member list places in this zone.
type Candidate struct {
	Node string
	// ProbeAddress is the node's InternalIP, which peers probe.
	ProbeAddress string
	// RaftAddress is host:port of the node's zone port.
	RaftAddress string
	// KubeletPort is the kubelet port the node's Node publishes
	// (status.daemonEndpoints), 0 when it publishes none: where peers'
	// kubelet probes connect.
	KubeletPort int
	// PublicKey is the node key registered on the node's own Node object
	// (zone.NodeKeyAnnotation), nil when none is. Only that node's agent can
	// register it, so a join that proves this key is that node.
	PublicKey ed25519.PublicKey
}

// MemberSource is the zone's member list as the cluster defines it (Nodes with
// the zone label, minus control-plane nodes).
type MemberSource interface {
	// Candidates returns the zone's nodes. ok is false while the source cannot
	// vouch for the list (cache not synced yet); the leader then changes no
	// membership, so a cloud outage never shrinks the zone.
	Candidates() (cs []Candidate, ok bool)
}
