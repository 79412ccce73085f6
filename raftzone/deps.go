package raftzone

import (
	"context"
	"errors"
	"time"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// The interfaces below are how raftzone sees the world outside the zone. The
// agent package implements them with client-go and the probe package; tests with plain structs.
// Keeping them this small is what keeps raftzone free of Kubernetes code.

// GenesisRecord is what the zone's genesis object holds.
type GenesisRecord struct {
	// ClusterID is a UUID naming the Raft cluster the founder created.
	ClusterID string
	// Founder and FounderID name the one member allowed to bootstrap.
	Founder   string
	FounderID string
	CreatedAt time.Time
}

// ErrGenesisUnavailable means the genesis object could not be read or created
// (apiserver unreachable); a member without state then waits.
var ErrGenesisUnavailable = errors.New("zone genesis object unavailable")

// Genesis decides, once per zone, which member may bootstrap the Raft cluster.
type Genesis interface {
	// Claim atomically creates the zone's genesis object holding rec. It returns
	// the record that exists after the call and whether this call created it.
	// Exactly one Claim per zone may ever return created = true.
	Claim(ctx context.Context, zoneName string, rec GenesisRecord) (GenesisRecord, bool, error)
}

// APIHealth tells whether this member reaches the Kubernetes API. Reports carry
// it and the leader uses its own to decide whether to hand leadership on.
type APIHealth interface {
	Reachable() bool
}

// APIContact is implemented by an APIHealth that knows when the apiserver last
// answered. The leader then measures an outage from that moment: a call that
// hangs until its timeout says nothing for that long, and must not delay the
// handover to a voter that reaches the cloud.
type APIContact interface {
	LastContact() time.Time
}

// Observations are this member's current opinions of its peers.
type Observations interface {
	// Results returns one result per peer the member has evidence about; peers
	// it has not judged yet are left out rather than reported as failed.
	Results() []zone.Result
	// Changes is signalled when a result's OK or score changes, so a flip is
	// reported at once instead of at the next heartbeat.
	Changes() <-chan struct{}
}

// DownObservations are the Observations that also tell which peers every
// probe fails on (kubelet port and agent alike): what a member attests toward
// the out-of-service failover. Observations without it attest no node down.
type DownObservations interface {
	Down() []string
}

// VerdictSink receives committed verdicts on the leader, stamped with the term
// that committed them. It must not block: apiwriter queues and coalesces.
type VerdictSink interface {
	// Verdicts delivers changes committed in term. When resync is true, vs is
	// every committed verdict, sent once after gaining leadership so the sink
	// converges even if the previous leader died before writing.
	Verdicts(term uint64, vs []zone.Verdict, resync bool)
}

// alwaysReachable stands in when no APIHealth is wired (tests, benchmarks).
type alwaysReachable struct{}

func (alwaysReachable) Reachable() bool { return true }

type noObservations struct{}

func (noObservations) Results() []zone.Result   { return nil }
func (noObservations) Changes() <-chan struct{} { return nil }

// WriteStatus is the API writer's progress, shown in Status so an operator sees
// at a glance whether verdicts reach the cloud.
type WriteStatus interface {
	LastWrite() time.Time
	Pending() int
}

// Deps are the parts a Member works with, built before it. Members
// and Genesis are required. The others may be nil: APIHealth then always
// reaches the apiserver, Observations has none, Sink and Writes are left out,
// and New makes its own Port and Leadership.
type Deps struct {
	Members      zoneport.MemberSource
	Genesis      Genesis
	APIHealth    APIHealth
	Observations Observations
	Sink         VerdictSink
	// Writes, when set, adds the API writer's progress to Status.
	Writes WriteStatus
	// Port is the zone port the Member listens on and calls peers with
	// (NewPort); a caller that needs the peer client before the Member
	// exists makes it. Nil means New makes one.
	Port *zoneport.Port
	// Leadership receives the terms this Member leads in; the API writer
	// fences with the same one.
	Leadership *Leadership
}
