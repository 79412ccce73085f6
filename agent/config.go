package agent

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// Config is everything `edgequorum agent` is told on its command line.
type Config struct {
	// Raft holds the zone-group settings; its Keys and Zone are filled in by
	// Run from KeyFile and the node's zone label.
	Raft raftzone.Config
	// KeyFile is the zone key file, a mounted Secret [--key-file].
	KeyFile string
	// KeyReloadPeriod is how often the agent rereads KeyFile, so that a
	// rotated Secret takes effect without a restart [--key-reload-period].
	KeyReloadPeriod time.Duration
	// KeyRetireGrace is how long a key id dropped from KeyFile keeps
	// verifying: the margin for agents the changed Secret has not reached yet
	// [--key-retire-grace].
	KeyRetireGrace time.Duration
	// Kubeconfig is the kubeconfig path; empty means in-cluster [--kubeconfig].
	Kubeconfig string
	// ZoneLabel is the Node label whose value names the zone [--zone-label].
	ZoneLabel string
	// LeaseNamespace holds the zone and genesis Leases [--lease-namespace].
	LeaseNamespace string
	// WebhookNamespace is the webhook's, where its replicas say which
	// formats they read [--webhook-namespace].
	WebhookNamespace string
	// ZoneLeaseRenew is the zone Lease renewal period [--zone-lease-renew].
	ZoneLeaseRenew time.Duration
	// ZoneLeaseQuietRenew is the zone Lease renewal period while no member
	// needs the cloud's attention; 0 renews every ZoneLeaseRenew always
	// [--zone-lease-quiet-renew].
	ZoneLeaseQuietRenew time.Duration
	// APICheckPeriod is how often apiserver reachability is checked
	// [--apiserver-check-period].
	APICheckPeriod time.Duration
	// APITimeout bounds every Kubernetes API call [--apiserver-timeout].
	APITimeout time.Duration
	// StatusAddress is host:port of the status server [--status-address].
	StatusAddress string
	// StatusAllowCIDRs are the networks, besides this node itself, that may
	// read the zone's details (/v1/status, /metrics) from the status server;
	// /healthz and /readyz are open to all [--status-allow-cidrs].
	StatusAllowCIDRs []netip.Prefix
	// Profiling serves the Go runtime's goroutine, heap, allocation and CPU
	// profiles under /debug/pprof/ on the status server, to this node and
	// the StatusAllowCIDRs only [--profiling]. Off by default: a profile
	// names every function the agent runs, which an operator asks for when
	// sizing a box, not on every node always. Without it the runtime
	// samples no allocation (applyMemProfiling).
	Profiling bool
	// Probes are the probe specs run against every peer [--probe]; empty means
	// DefaultProbes.
	Probes []probe.Spec
	// ScoreLine is the score a peer needs to be judged OK [--score-line].
	ScoreLine float64
	// ConfirmConnects is how many fresh connections to a peer's kubelet
	// port confirm its first failed probe; when none gets any answer the
	// peer is judged failed at once (probe.Confirm). 0 turns confirmation
	// off: the probes' thresholds alone judge [--confirm-connects].
	ConfirmConnects int
	// ConfirmGap is the time between their starts [--confirm-gap].
	ConfirmGap time.Duration
	// TargetSyncPeriod is how often probe targets follow the member list.
	TargetSyncPeriod time.Duration
	// MemoryLimit is the Go runtime's soft memory limit in bytes, unless the
	// GOMEMLIMIT environment variable sets one; MemoryLimitAuto (the default)
	// takes 90 % of the container's memory limit, 0 sets none
	// [--memory-limit]. Near the limit the collector works harder instead of
	// letting the kernel kill the agent.
	MemoryLimit int64
	// GCPercent is how far the Go heap may grow over its live part before
	// the next collection, unless the GOGC environment variable sets it
	// [--gc-percent]. DefaultGCPercent, not the runtime's 100: see there.
	GCPercent int
	// MaxProcs is how many goroutines the agent runs at once, unless the
	// GOMAXPROCS environment variable sets it; 0 leaves the runtime's own
	// default [--max-procs]. DefaultMaxProcs: see there.
	MaxProcs int
	// ReleaseStartupPages drops the binary's pages that only start-up
	// touched from the agent's resident set, at start and once ready
	// (releaseStartupPages) [--release-startup-pages]. On by default;
	// off leaves the kernel alone to age them.
	ReleaseStartupPages bool
}

// DefaultGCPercent is the agent's collector growth. An agent's live heap is
// mostly long-lived state (connections to its peers, the zone's rows), so the
// runtime's 100, which lets the heap reach twice that before collecting, was
// a third of a large zone member's resident memory; at 50 a leader of 129
// members peaked about 10 MiB lower and a spare about 5 MiB lower, with the same CPU
// within what the benchmark resolves (DESIGN.md, "The collector's growth").
const DefaultGCPercent = 50

// DefaultMaxProcs is the agent's parallelism: one. The runtime's default is the
// container's CPU limit rounded up and at least two, but an agent uses a few
// percent of a core in many short wakeups (probes, answers, reports), and
// with two Ps the scheduler spent a sixth of a large zone member's CPU
// parking and waking threads to run them side by side; the shipped DaemonSet
// limits it to half a core anyway. At 129 members one P took a leader about
// a point of a core lower and a spare half a point to a point (DESIGN.md,
// "One P").
const DefaultMaxProcs = 1

// maxMaxProcs bounds --max-procs: more Ps than this is a typo, not a
// setting for an agent.
const maxMaxProcs = 256

// DefaultConfig returns the agent defaults.
func DefaultConfig() Config {
	return Config{
		Raft:             raftzone.DefaultConfig(),
		KeyReloadPeriod:  zonekeys.DefaultReloadPeriod,
		KeyRetireGrace:   zonekeys.DefaultRetireGrace,
		ZoneLabel:        zone.DefaultZoneLabel,
		LeaseNamespace:   zone.DefaultLeaseNamespace,
		WebhookNamespace: zone.DefaultWebhookNamespace,
		ZoneLeaseRenew:   5 * time.Second,
		// At three nodes a site, 1.5 writes a minute against the kubelets'
		// 18 node-Lease renewals.
		ZoneLeaseQuietRenew: 40 * time.Second,
		APICheckPeriod:      2 * time.Second,
		APITimeout:          10 * time.Second,
		StatusAddress:       ":9471",
		ScoreLine:           100,
		ConfirmConnects:     probe.DefaultConfirmConnects,
		ConfirmGap:          probe.DefaultConfirmGap,
		TargetSyncPeriod:    2 * time.Second,
		MemoryLimit:         MemoryLimitAuto,
		GCPercent:           DefaultGCPercent,
		MaxProcs:            DefaultMaxProcs,
		ReleaseStartupPages: true,
	}
}

// ProbeConfirm is the flags as probe.Confirm, whose zero value means its
// defaults: there 0 connections is "off" spelled as a negative count.
func (c Config) ProbeConfirm() probe.Confirm {
	if c.ConfirmConnects == 0 {
		return probe.Confirm{Connects: -1}
	}
	return probe.Confirm{Connects: c.ConfirmConnects, Gap: c.ConfirmGap}
}

// DefaultProbes are the probes an agent runs against each peer when --probe is
// not given: the peer agent's /healthz over the authenticated zone port (proves
// the agent runs and holds the zone key) and a TCP connect to the kubelet port.
func DefaultProbes(peerPort int) []probe.Spec {
	specs, err := probe.ParseSpecs(fmt.Sprintf("agent:port=%d,weight=0.5;kubelet:weight=0.5", peerPort))
	if err != nil {
		panic(err) // a constant spec; a failure is a programming error
	}
	return specs
}

// leaseWriteMargin is what a new leader needs, after it won, to renew the
// zone Lease: a Barrier on its own log and one read and one write to the
// apiserver.
const leaseWriteMargin = 2 * time.Second

// longZoneLease is the zone Lease duration past which the agent warns. The
// webhook trusts a zone for that long after its last renewal, so a zone that
// lost its quorum together with some of its nodes should stop vouching for
// them before the node lifecycle controller calls them Unknown: 40 s of the
// controller manager's default 50 s grace period. Only a warning: the agent
// does not know the cluster's grace period.
const longZoneLease = 40 * time.Second

// ZoneLeaseDuration is how long a zone Lease renewal stays valid: one renewal
// period plus the longest leadership handover (raftzone.Config.HandoverBound)
// plus what the new leader needs to renew. A zone that keeps a quorum
// therefore never shows the webhook a lapsed Lease, not even while a leader
// that lost the cloud hands over.
func (c *Config) ZoneLeaseDuration() time.Duration {
	d := c.ZoneLeaseRenew + c.Raft.HandoverBound() + leaseWriteMargin
	return (d + time.Second - 1).Truncate(time.Second)
}

// ZoneLeaseQuietDuration is how long a quiet zone Lease renewal stays valid:
// ZoneLeaseDuration with the quiet renewal period in place of the busy one,
// plus one busy period, since quiet renewals are made at a busy renewal tick.
func (c *Config) ZoneLeaseQuietDuration() time.Duration {
	return c.ZoneLeaseDuration() + c.ZoneLeaseQuietRenew
}

// webhookLeaseCap is the webhook's default --max-zone-lease-duration: it
// believes no zone Lease for longer.
const webhookLeaseCap = time.Minute

// Validate checks every flag before anything starts; each message names its
// flag.
func (c *Config) Validate() error {
	errs := []error{c.Raft.ValidateFlags()}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("--key-file is required: there is no built-in zone key (create one with `edgequorum keygen`)"))
	}
	if c.ZoneLabel == "" {
		errs = append(errs, errors.New("--zone-label must not be empty"))
	}
	if c.LeaseNamespace == "" {
		errs = append(errs, errors.New("--lease-namespace must not be empty"))
	}
	if c.WebhookNamespace == "" {
		errs = append(errs, errors.New("--webhook-namespace must not be empty"))
	}
	if _, _, err := net.SplitHostPort(c.StatusAddress); err != nil {
		errs = append(errs, fmt.Errorf("--status-address %q: %w", c.StatusAddress, err))
	}
	if (c.MemoryLimit < 0 && c.MemoryLimit != MemoryLimitAuto) || (c.MemoryLimit > 0 && c.MemoryLimit < 16<<20) {
		errs = append(errs, fmt.Errorf("--memory-limit %d must be auto, 0 (no limit) or at least 16Mi", c.MemoryLimit))
	}
	if c.GCPercent < 10 || c.GCPercent > 1000 {
		errs = append(errs, fmt.Errorf("--gc-percent %d must be between 10 and 1000", c.GCPercent))
	}
	if c.MaxProcs < 0 || c.MaxProcs > maxMaxProcs {
		errs = append(errs, fmt.Errorf("--max-procs %d must be between 0 (the Go runtime's default) and %d", c.MaxProcs, maxMaxProcs))
	}
	if c.ScoreLine <= 0 || c.ScoreLine > 100 {
		errs = append(errs, fmt.Errorf("--score-line %v must be in (0, 100]", c.ScoreLine))
	}
	if c.ConfirmConnects < 0 || c.ConfirmConnects > probe.MaxConfirmConnects {
		errs = append(errs, fmt.Errorf("--confirm-connects %d must be in [0, %d] (0 turns confirmation off)", c.ConfirmConnects, probe.MaxConfirmConnects))
	}
	if c.ConfirmConnects > 1 && c.ConfirmGap <= 0 {
		errs = append(errs, fmt.Errorf("--confirm-gap must be positive, got %s", c.ConfirmGap))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--zone-lease-renew", c.ZoneLeaseRenew}, {"--apiserver-check-period", c.APICheckPeriod},
		{"--apiserver-timeout", c.APITimeout}, {"--target-sync-period", c.TargetSyncPeriod},
		{"--key-reload-period", c.KeyReloadPeriod}, {"--key-retire-grace", c.KeyRetireGrace}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.flag, d.v))
		}
	}
	if c.ZoneLeaseQuietRenew < 0 || (c.ZoneLeaseQuietRenew > 0 && c.ZoneLeaseQuietRenew < c.ZoneLeaseRenew) {
		errs = append(errs, fmt.Errorf("--zone-lease-quiet-renew %s must be 0 (renew every --zone-lease-renew) or at least --zone-lease-renew %s",
			c.ZoneLeaseQuietRenew, c.ZoneLeaseRenew))
	}
	if c.APICheckPeriod > 0 && c.Raft.APIServerFailTimeout < 2*c.APICheckPeriod {
		errs = append(errs, fmt.Errorf("--apiserver-fail-timeout %s must be at least twice --apiserver-check-period %s, or one late check hands leadership over",
			c.Raft.APIServerFailTimeout, c.APICheckPeriod))
	}
	return errors.Join(errs...)
}

// Warnings returns what is allowed but probably wrong in the configuration.
func (c *Config) Warnings() []string {
	var w []string
	if d := c.ZoneLeaseDuration(); d > longZoneLease {
		w = append(w, fmt.Sprintf("--zone-lease-renew %s, --apiserver-fail-timeout %s and --raft-election-timeout %s make the zone Lease valid for %s, more than %s: "+
			"unless the controller manager's --node-monitor-grace-period is longer, a zone that lost its quorum keeps its dead nodes protected for a while after they go Unknown",
			c.ZoneLeaseRenew, c.Raft.APIServerFailTimeout, c.Raft.RaftElectionTimeout, d, longZoneLease))
	}
	if d := c.ZoneLeaseQuietDuration(); c.ZoneLeaseQuietRenew > 0 && d > webhookLeaseCap {
		w = append(w, fmt.Sprintf("--zone-lease-quiet-renew %s makes a quiet zone Lease valid for %s, more than the webhook's default --max-zone-lease-duration %s: "+
			"unless the webhook's is longer, it calls the zone leaderless between quiet renewals",
			c.ZoneLeaseQuietRenew, d, webhookLeaseCap))
	}
	if c.KeyRetireGrace > 0 && c.KeyRetireGrace < secretPropagation+c.KeyReloadPeriod {
		w = append(w, fmt.Sprintf("--key-retire-grace %s is shorter than the kubelet's Secret propagation (about %s) plus --key-reload-period %s: "+
			"a key dropped from the key file may stop verifying before every agent has stopped signing with it",
			c.KeyRetireGrace, secretPropagation, c.KeyReloadPeriod))
	}
	return w
}

// secretPropagation is roughly how long a kubelet takes to deliver a changed
// Secret into a running pod's volume: its sync period (1 min) plus its cache
// TTL. A key retire grace shorter than that plus one reload period is a race.
const secretPropagation = 2 * time.Minute
