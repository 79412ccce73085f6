package agent

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"time"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// The parts below are how an agent meets the cluster: its member list, the
// zone's genesis and the registration of its node key. They are exported for
// programs that stand in for many members at once (the benchmark's load
// generator, which measures a 129-member zone's leader in real time on one
// machine), so that the stand-ins join, prove themselves and see the zone
// exactly as an agent does, not by a copy of these rules.

// MemberList is the zone's member list as an agent sees it: the Nodes with
// the zone label, their addresses and registered node keys, from one
// informer. Run must be running for Candidates to say anything.
type MemberList struct{ m *nodeMembers }

// NewMemberList watches the Nodes whose label (the agent's --zone-label)
// has the value zoneName; peerPort is the zone port every member uses.
func NewMemberList(client kubeclient.Interface, label, zoneName string, peerPort int) *MemberList {
	return &MemberList{m: newNodeMembers(client, label, zoneName, peerPort)}
}

// Run feeds the list until ctx ends.
func (l *MemberList) Run(ctx context.Context) { l.m.run(ctx) }

// Candidates implements zoneport.MemberSource.
func (l *MemberList) Candidates() ([]zoneport.Candidate, bool) { return l.m.Candidates() }

// NewGenesis is the zone genesis an agent claims: a Lease in namespace (the
// agent's --lease-namespace) that only one member can create, and that a
// member takes over when its founder is no node of the zone's member list
// (see leaseGenesis).
func NewGenesis(client kubeclient.Interface, namespace string, members zoneport.MemberSource) raftzone.Genesis {
	return leaseGenesis{client: client, namespace: namespace, members: members}
}

// RegisterNodeKey publishes pub on node's own Node object, retrying until it
// is there or ctx ends, as an agent does at start (see registerNodeKey); the
// client must carry node's own agent credentials, which the node-key policy
// checks.
func RegisterNodeKey(ctx context.Context, client kubeclient.Interface, node string, pub ed25519.PublicKey,
	log func(msg string, args ...any)) error {
	return registerNodeKey(ctx, client, node, pub, log)
}

// ProbeObservations are a prober's results as a member reports them.
func ProbeObservations(m *probe.Manager) raftzone.Observations { return probeObservations{m} }

// SyncProbeTargets keeps m probing the members of srv's zone (named zone)
// that keep accepts (nil: every other member), checking every period until
// ctx ends, as an agent keeps its prober on its peers.
func SyncProbeTargets(ctx context.Context, m *probe.Manager, srv *raftzone.Member, zone string, period time.Duration,
	keep func(node string) bool, log *slog.Logger) {
	syncTargets(ctx, m, srv, zone, period, keep, log)
}
