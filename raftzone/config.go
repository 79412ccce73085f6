package raftzone

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zonekeys"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Config is one member's view of its zone's Raft group. Every duration is an
// agent flag; the flag name is given in brackets on each field and in every
// validation error, so an operator can map a complaint to the flag at once.
type Config struct {
	// Node is this member's Kubernetes node name [--node-name].
	Node string
	// Zone is the value of the zone label this member belongs to.
	Zone string
	// AdvertiseAddress is the IP peers reach this member at; outgoing zone
	// connections leave from it too [--advertise-address].
	AdvertiseAddress string
	// PeerPort is the zone port carrying Raft and the peer API, the same on
	// every member [--peer-port].
	PeerPort int
	// BindAddress is the IP the zone port listens on; empty means
	// AdvertiseAddress [--bind-address].
	BindAddress string
	// DataDir holds the Raft log, snapshots, the replicated state, the server
	// ID and the report sequence; it must survive restarts [--data-dir].
	DataDir string
	// Keys are the zone keys; without them nothing is signed or accepted
	// [--key-file].
	Keys *zonekeys.Ring

	// Voters is the most Raft voters the leader keeps; odd [--voters].
	Voters int
	// Standbys is how many members beyond the voters the leader keeps as
	// Raft nonvoters, replicating so that one can take a lost voter's seat at
	// once. Every other member is a spare: outside the Raft configuration, it
	// reports to the leader and copies the view it needs from a server, so a
	// large zone costs the leader no replication to it [--standbys].
	Standbys int
	// ReportPeriod is how often a member reports even when nothing changed
	// [--report-period].
	ReportPeriod time.Duration
	// VotePeriod is how often the leader recomputes verdicts [--vote-period].
	VotePeriod time.Duration
	// VoteTimeout is how fresh a member's last report must be for its
	// opinions to count [--vote-timeout].
	VoteTimeout time.Duration
	// MaxClockSkew bounds |sent-at − leader clock| for accepted reports
	// [--max-clock-skew].
	MaxClockSkew time.Duration
	// DeadVoterTimeout is how long a voter may look dead before a healthy
	// stand-by replaces it [--dead-voter-timeout].
	DeadVoterTimeout time.Duration
	// APIServerFailTimeout is how long the leader may lose the apiserver before
	// it hands leadership to a voter that reaches it [--apiserver-fail-timeout].
	APIServerFailTimeout time.Duration
	// ReconcilePeriod is how often the leader reconciles membership and voters
	// [--reconcile-period].
	ReconcilePeriod time.Duration
	// JoinRetry is the pause between join rounds of a member without a cluster
	// [--join-retry].
	JoinRetry time.Duration
	// BatchWindow is how long the leader gathers reports into one raft.Apply
	// once a report that changes a result arrives [--report-batch-window].
	BatchWindow time.Duration
	// HeartbeatBatchWindow is how long the leader gathers reports that change
	// nothing (heartbeats) before committing them. Every entry goes to every
	// follower, so this is what keeps Raft traffic down: near a report period,
	// one entry carries a report of every member. A report carrying a change
	// cuts the wait to BatchWindow. Zero means nine tenths of ReportPeriod
	// [--heartbeat-batch-window].
	HeartbeatBatchWindow time.Duration
	// HandshakeTimeout bounds TLS and zone-key authentication on the zone port
	// [--handshake-timeout].
	HandshakeTimeout time.Duration
	// RaftHeartbeatTimeout and RaftElectionTimeout are hashicorp/raft's
	// timers [--raft-heartbeat-timeout, --raft-election-timeout].
	RaftHeartbeatTimeout time.Duration
	RaftElectionTimeout  time.Duration
	// RaftLeaderLeaseTimeout is how long a leader goes on leading without
	// hearing from a quorum. Writes do not rely on it (each batch confirms
	// the leadership with a quorum first); it only makes a cut-off leader
	// step down, so it must outlast the gaps between heartbeats with room
	// for a busy host [--raft-leader-lease-timeout].
	RaftLeaderLeaseTimeout time.Duration
	// RaftHeartbeatInterval is the longest a leader leaves an idle follower
	// without a heartbeat. hashicorp/raft heartbeats every tenth to fifth of
	// HeartbeatTimeout — five to ten a second per follower at 1 s, which a
	// follower needs no more than once per timeout — so the leader runs with
	// a HeartbeatTimeout of five times this; followers keep theirs, and with
	// it how fast they notice a dead leader. The leader counts an answer to
	// a heartbeat as contact, so the interval is at most half the leader
	// lease: a quorum whose answers came a little late must not make the
	// leader step down. Zero means half of RaftHeartbeatTimeout or of
	// RaftLeaderLeaseTimeout, whichever is shorter [--raft-heartbeat-interval].
	RaftHeartbeatInterval time.Duration
	// RaftCommitTimeout is how often the leader sends each follower an
	// AppendEntries when nothing new was appended, to tell it the commit index.
	// hashicorp/raft's 50 ms default costs 20 RPCs a second per follower; a
	// follower's replica only needs to be fresh for status, report deltas and
	// spares' views, and the next entry (one a report period at the least)
	// brings the index anyway [--raft-commit-timeout].
	RaftCommitTimeout time.Duration
	// SnapshotInterval and SnapshotThreshold control log compaction
	// [--snapshot-interval, --snapshot-threshold].
	SnapshotInterval  time.Duration
	SnapshotThreshold uint64

	// Clock drives reports, votes and timeouts; tests inject a fake one.
	Clock clock.WithTicker
	// Logger receives structured logs; raft's hclog output is adapted into it.
	Logger *slog.Logger
	// Registerer receives the metrics; nil keeps them private.
	Registerer prometheus.Registerer
	// Network is the wire; nil dials from AdvertiseAddress over real sockets.
	Network zoneport.Network

	// Release is the release this member announces; empty means this
	// build's (buildinfo.Version). Level is the protocol level it speaks
	// and reads; zero means this build's (skew.Current). Only tests set
	// them, to stand in for a member of another release.
	Release string
	Level   skew.Level
}

// DefaultConfig returns the defaults. With them a silent dead peer is judged
// within about a probe period plus two probe timeouts (DESIGN.md, verdict
// rule), one whose processes died within probe period × failure threshold,
// far inside the node lifecycle controller's 50 s grace period.
func DefaultConfig() Config {
	return Config{
		PeerPort:               9470,
		Voters:                 5,
		Standbys:               2,
		ReportPeriod:           2 * time.Second,
		VotePeriod:             time.Second,
		VoteTimeout:            10 * time.Second,
		MaxClockSkew:           30 * time.Second,
		DeadVoterTimeout:       time.Minute,
		APIServerFailTimeout:   5 * time.Second,
		ReconcilePeriod:        5 * time.Second,
		JoinRetry:              time.Second,
		BatchWindow:            20 * time.Millisecond,
		HandshakeTimeout:       5 * time.Second,
		RaftHeartbeatTimeout:   time.Second,
		RaftElectionTimeout:    time.Second,
		RaftLeaderLeaseTimeout: time.Second,
		RaftCommitTimeout:      2 * time.Second,
		SnapshotInterval:       2 * time.Minute,
		SnapshotThreshold:      4096,
	}
}

// heartbeatBatchWindow is HeartbeatBatchWindow with its default applied.
func (c *Config) heartbeatBatchWindow() time.Duration {
	if c.HeartbeatBatchWindow > 0 {
		return c.HeartbeatBatchWindow
	}
	return c.ReportPeriod * 9 / 10
}

// leaderHeartbeatInterval is RaftHeartbeatInterval with its default applied.
func (c *Config) leaderHeartbeatInterval() time.Duration {
	if c.RaftHeartbeatInterval > 0 {
		return c.RaftHeartbeatInterval
	}
	return min(c.RaftHeartbeatTimeout, c.RaftLeaderLeaseTimeout) / 2
}

// Validate checks the whole configuration and names the flag of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.Zone == "" {
		errs = append(errs, errors.New("zone is empty: the node needs a value for the zone label"))
	}
	if c.Level != skew.Unannounced && (c.Level < skew.Oldest() || c.Level > skew.Current()) {
		errs = append(errs, fmt.Errorf("Config.Level is %v; this build speaks %v to %v", c.Level, skew.Oldest(), skew.Current()))
	}
	if err := (skew.Announcement{Release: c.Release, Level: max(c.Level, skew.Oldest())}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("Config.Release: %w", err))
	}
	if c.Keys == nil {
		errs = append(errs, errors.New("--key-file is required: there is no built-in zone key"))
	}
	return errors.Join(append(errs, c.ValidateFlags())...)
}

// ValidateFlags checks what comes from command-line flags alone, so the agent
// can reject a bad invocation before it loads keys or asks the apiserver for
// its zone.
func (c *Config) ValidateFlags() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Node == "" {
		bad("--node-name is required")
	}
	if net.ParseIP(c.AdvertiseAddress) == nil {
		bad("--advertise-address %q is not an IP address", c.AdvertiseAddress)
	}
	if c.BindAddress != "" && net.ParseIP(c.BindAddress) == nil {
		bad("--bind-address %q is not an IP address", c.BindAddress)
	}
	if c.PeerPort < 1 || c.PeerPort > 65535 {
		bad("--peer-port %d is out of range 1-65535", c.PeerPort)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("--data-dir is required")
	}
	if c.Voters < 1 || c.Voters%2 == 0 {
		bad("--voters must be a positive odd number, got %d", c.Voters)
	}
	if c.Standbys < 0 {
		bad("--standbys must not be negative, got %d", c.Standbys)
	}
	positive := []struct {
		flag string
		d    time.Duration
	}{
		{"--report-period", c.ReportPeriod}, {"--vote-period", c.VotePeriod},
		{"--vote-timeout", c.VoteTimeout}, {"--max-clock-skew", c.MaxClockSkew},
		{"--dead-voter-timeout", c.DeadVoterTimeout}, {"--apiserver-fail-timeout", c.APIServerFailTimeout},
		{"--reconcile-period", c.ReconcilePeriod}, {"--join-retry", c.JoinRetry},
		{"--report-batch-window", c.BatchWindow},
		{"--handshake-timeout", c.HandshakeTimeout},
		{"--raft-heartbeat-timeout", c.RaftHeartbeatTimeout}, {"--raft-election-timeout", c.RaftElectionTimeout},
		{"--raft-leader-lease-timeout", c.RaftLeaderLeaseTimeout}, {"--raft-commit-timeout", c.RaftCommitTimeout},
		{"--snapshot-interval", c.SnapshotInterval},
	}
	for _, p := range positive {
		if p.d <= 0 {
			bad("%s must be positive, got %s", p.flag, p.d)
		}
	}
	if c.VoteTimeout > 0 && c.ReportPeriod > 0 && c.VoteTimeout < 2*c.ReportPeriod {
		bad("--vote-timeout %s must be at least twice --report-period %s, or one lost report makes a member's votes stale", c.VoteTimeout, c.ReportPeriod)
	}
	if c.BatchWindow >= c.ReportPeriod && c.ReportPeriod > 0 {
		bad("--report-batch-window %s must be shorter than --report-period %s", c.BatchWindow, c.ReportPeriod)
	}
	switch hbw := c.heartbeatBatchWindow(); {
	case c.HeartbeatBatchWindow < 0:
		bad("--heartbeat-batch-window must not be negative, got %s", c.HeartbeatBatchWindow)
	case c.ReportPeriod <= 0:
		// Reported above; the window follows the period.
	case hbw >= c.ReportPeriod:
		bad("--heartbeat-batch-window %s must be shorter than --report-period %s", hbw, c.ReportPeriod)
	case hbw < c.BatchWindow && c.HeartbeatBatchWindow == 0:
		bad("--report-batch-window %s must not be longer than the heartbeat batch window, which defaults to nine tenths of --report-period (%s); shorten it or set --heartbeat-batch-window",
			c.BatchWindow, hbw)
	case hbw < c.BatchWindow:
		bad("--heartbeat-batch-window %s must not be shorter than --report-batch-window %s", hbw, c.BatchWindow)
	}
	if c.RaftLeaderLeaseTimeout > c.RaftHeartbeatTimeout {
		bad("--raft-leader-lease-timeout %s must not exceed --raft-heartbeat-timeout %s", c.RaftLeaderLeaseTimeout, c.RaftHeartbeatTimeout)
	}
	if c.RaftHeartbeatInterval < 0 {
		bad("--raft-heartbeat-interval must not be negative, got %s", c.RaftHeartbeatInterval)
	}
	if c.RaftHeartbeatInterval > c.RaftHeartbeatTimeout/2 {
		bad("--raft-heartbeat-interval %s must be at most half --raft-heartbeat-timeout %s, or one late heartbeat starts an election",
			c.RaftHeartbeatInterval, c.RaftHeartbeatTimeout)
	}
	if c.RaftHeartbeatInterval > c.RaftLeaderLeaseTimeout/2 {
		bad("--raft-heartbeat-interval %s must be at most half --raft-leader-lease-timeout %s, or a few late answers make the leader step down",
			c.RaftHeartbeatInterval, c.RaftLeaderLeaseTimeout)
	}
	if c.SnapshotThreshold == 0 {
		bad("--snapshot-threshold must be positive")
	}
	return errors.Join(errs...)
}

func (c *Config) raftAddress() string {
	return net.JoinHostPort(c.AdvertiseAddress, fmt.Sprint(c.PeerPort))
}

func (c *Config) bindAddress() string {
	ip := c.BindAddress
	if ip == "" {
		ip = c.AdvertiseAddress
	}
	return net.JoinHostPort(ip, fmt.Sprint(c.PeerPort))
}

// withDefaults fills what a caller may leave out: the real clock, the default
// logger and the host's network.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Network == nil {
		c.Network = zoneport.HostNetwork(net.ParseIP(c.AdvertiseAddress))
	}
	return c
}
