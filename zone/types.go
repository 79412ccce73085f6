package zone

import (
	"fmt"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

// State is the zone's judgement of one node. The zero value "" is not a state,
// not even Unknown: Valid rejects it, so the store refuses to commit a verdict
// nobody computed and ParseAnnotation refuses to read one, and it never reads as
// healthy.
type State string

// The three verdict states of DESIGN.md. Unknown means no quorum either way; the
// leader then keeps whatever it last wrote.
const (
	Unknown   State = "unknown"
	Healthy   State = "healthy"
	Unhealthy State = "unhealthy"
)

// Valid reports whether s is one of the three states, so decoders can reject
// anything else instead of carrying it into the API.
func (s State) Valid() bool {
	switch s {
	case Unknown, Healthy, Unhealthy:
		return true
	}
	return false
}

// Role is a member's Raft suffrage. Only a few members vote so that commits stay
// cheap in large zones; the rest replicate as nonvoters.
type Role string

// Member roles.
const (
	Voter    Role = "voter"
	Nonvoter Role = "nonvoter"
)

// Member is one node of a zone as the replicated state knows it. It is cached in
// the store so that an agent restarted during a cloud outage still knows its zone.
type Member struct {
	// Node is the Kubernetes node name; it identifies the member in reports and
	// verdicts.
	Node string `json:"node"`
	// ServerID is the member's Raft server ID, a UUID persisted in its data dir
	// and never the node name, so a wiped node is told apart from its old self.
	ServerID string `json:"serverID"`
	// Zone is the value of the zone label the member was admitted under.
	Zone string `json:"zone"`
	// ProbeAddress is the host peers probe (the node's InternalIP).
	ProbeAddress string `json:"probeAddress"`
	// RaftAddress is host:port of the member's authenticated Raft and peer-API
	// listener.
	RaftAddress string `json:"raftAddress"`
	// KubeletPort is the kubelet port the member's Node publishes
	// (status.daemonEndpoints), which peers' kubelet probes connect to; 0
	// when unknown (then 10250). Kept here so that a restart during a cloud
	// outage still probes the right port.
	KubeletPort int `json:"kubeletPort,omitempty"`
	// Role is the suffrage the leader gave the member.
	Role Role `json:"role"`
	// PublicKey is the member's Ed25519 node key, pinned when it joined: its
	// reports, its zone-port certificate and its Raft RPCs must all be its own.
	// It changes only through a new join that proves the new key. The value
	// is in NodeKeyAnnotation's form (see EncodeNodeKey), which keeps Member
	// comparable.
	PublicKey string `json:"publicKey,omitempty"`
	// JoinedAt is when the leader admitted the member.
	JoinedAt time.Time `json:"joinedAt"`
}

// Result is one checker's current opinion of one peer.
type Result struct {
	// Peer is the node name of the checked member.
	Peer string `json:"peer"`
	// OK is the checker's pass/fail judgement (score at or above its score line).
	OK bool `json:"ok"`
	// Score is the weighted probe score, 0..100.
	Score float64 `json:"score"`
	// Latency is the time the last probe round took; informative only, so a
	// change in latency alone is not a change worth reporting.
	Latency time.Duration `json:"latency"`
}

// Report is what one member tells its zone every probe period. Results carry only
// what changed since the sender's last committed report; an empty Results is a
// heartbeat that keeps the sender's earlier results fresh.
type Report struct {
	Zone   string    `json:"zone"`
	From   string    `json:"from"`
	Seq    uint64    `json:"seq"`
	SentAt time.Time `json:"sentAt"`
	// Results are sorted by Peer; SigningBytes relies on a fixed order.
	Results []Result `json:"results,omitempty"`
	// APIReachable tells the leader whether the sender reaches the Kubernetes
	// API, which leadership placement needs.
	APIReachable bool   `json:"apiReachable"`
	KeyID        string `json:"keyID"`
	// MAC is HMAC-SHA256 under the zone key KeyID names: proof that the
	// report comes from inside the zone.
	MAC []byte `json:"mac"`
	// Sig is the sender's Ed25519 signature over the same bytes as the MAC:
	// proof that it comes from From and no other member, checked by the
	// leader and again by every replica against From's pinned key.
	Sig []byte `json:"sig,omitempty"`
	// Release and Level are the sender's announcement: the release it runs
	// and the highest protocol level it speaks (package skew). Signed with
	// the rest, so only the sender can say them; the leader switches a
	// zone's formats to a level once every member has announced it. Zero in
	// reports of releases before levels existed.
	Release string     `json:"release,omitempty"`
	Level   skew.Level `json:"level,omitempty"`
}

// Verdict is the leader's committed judgement of one node.
type Verdict struct {
	Node  string `json:"node"`
	State State  `json:"state"`
	// Pros and Cons count fresh reports from other members that found the node
	// healthy and unhealthy.
	Pros int `json:"pros"`
	Cons int `json:"cons"`
	// Members is the zone size M the quorum was computed over.
	Members int `json:"members"`
	// Term is the Raft term of the leader that decided, used to fence API writes.
	Term      uint64    `json:"term"`
	Leader    string    `json:"leader"`
	DecidedAt time.Time `json:"decidedAt"`
}

// Quorum is the number of matching votes a verdict needs in a zone of m members:
// a strict majority of the m-1 members that may vote on a node (never itself).
func Quorum(m int) int {
	if m <= 1 {
		return 0
	}
	return (m-1)/2 + 1
}

// String keeps log lines short.
func (v Verdict) String() string {
	return fmt.Sprintf("%s=%s(+%d/-%d of %d, term %d)", v.Node, v.State, v.Pros, v.Cons, v.Members, v.Term)
}
