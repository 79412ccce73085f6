// Package agentcmd is the agent's command line: its flags, read into an
// agent.Config, and the run of the agent until it is told to stop. Both
// binaries run it — the narrow edgequorum-agent the image's DaemonSet
// starts, and `edgequorum agent`, which hands over to edgequorum-agent when
// it sits beside it — so the flags are one list in one place.
//
// It must not import the webhook, preflight, install or certificate code, or
// a Kubernetes clientset (internal/layering checks it): what it links is
// resident on every edge node.
package agentcmd

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/edgequorum/edgequorum/agent"
	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/probe"
)

const usage = `Runs on every edge node: probes the zone's peers, replicates signed reports
through the zone's Raft group, and — on the elected leader only — writes
verdicts to the Kubernetes API. Every duration below is a flag.`

// Run parses the agent's flags from args and runs the agent until ctx ends.
// Bad flags return a *cli.UsageError (or cli.ErrFlagParse) naming the flag.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg := agent.DefaultConfig()
	r := &cfg.Raft
	fs := cli.NewFlagSet("agent", usage, stderr)
	fs.StringVar(&r.Node, "node-name", "", "this node's name (required; DaemonSet: fieldRef spec.nodeName)")
	fs.StringVar(&r.AdvertiseAddress, "advertise-address", "", "this node's IP that peers reach (required; DaemonSet: fieldRef status.hostIP)")
	fs.StringVar(&r.BindAddress, "bind-address", "", "IP the zone port listens on (default: --advertise-address)")
	fs.IntVar(&r.PeerPort, "peer-port", r.PeerPort, "zone port for Raft and the peer API (TLS 1.3 + zone-key proof), the same on every node")
	fs.StringVar(&r.DataDir, "data-dir", "", "persistent state: Raft log, snapshots, replicated state (required; DaemonSet: hostPath /var/lib/edgequorum)")
	fs.StringVar(&cfg.KeyFile, "key-file", "", "zone key file, one id:base64 line per key, first signs (required; a mounted Secret)")
	fs.DurationVar(&cfg.KeyReloadPeriod, "key-reload-period", cfg.KeyReloadPeriod, "how often --key-file is reread; a changed file is loaded without a restart")
	fs.DurationVar(&cfg.KeyRetireGrace, "key-retire-grace", cfg.KeyRetireGrace, "how long a key id dropped from --key-file keeps verifying peers and reports")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig path (default: in-cluster config)")
	fs.StringVar(&cfg.ZoneLabel, "zone-label", cfg.ZoneLabel, "Node label whose value names the zone")
	fs.StringVar(&cfg.LeaseNamespace, "lease-namespace", cfg.LeaseNamespace, "namespace of the zone and genesis Leases")
	fs.StringVar(&cfg.WebhookNamespace, "webhook-namespace", cfg.WebhookNamespace, "the webhook's namespace, where its replicas say which formats they read")
	fs.Func("status-allow-cidrs", "comma-separated networks (e.g. your Prometheus's) that may read /metrics and /v1/status besides this node itself; default none",
		func(v string) error {
			for _, part := range strings.Split(v, ",") {
				if part = strings.TrimSpace(part); part == "" {
					continue
				}
				p, err := netip.ParsePrefix(part)
				if err != nil {
					return fmt.Errorf("%q is not a CIDR: %w", part, err)
				}
				cfg.StatusAllowCIDRs = append(cfg.StatusAllowCIDRs, p.Masked())
			}
			return nil
		})
	fs.BoolVar(&cfg.Profiling, "profiling", false, "serve the Go runtime's goroutine, heap and allocs profiles on the status server at /debug/pprof/<name> (?debug=1 for text), and a CPU profile at /debug/pprof/profile?seconds=N (N ≤ 10), to the same clients as /metrics; without it the runtime samples no allocation")
	fs.StringVar(&cfg.StatusAddress, "status-address", cli.EnvOr(cli.StatusAddressEnv, cfg.StatusAddress), "host:port of the status server (/healthz, /readyz, /metrics, /v1/status); default $"+cli.StatusAddressEnv+" if set")
	fs.IntVar(&r.Voters, "voters", r.Voters, "most Raft voters in a zone; odd")
	fs.IntVar(&r.Standbys, "standbys", r.Standbys, "members beyond the voters kept as Raft nonvoters, ready to take a lost voter's seat; every other member is a spare outside Raft")
	fs.DurationVar(&r.ReportPeriod, "report-period", r.ReportPeriod, "how often a member reports when nothing changed")
	fs.DurationVar(&r.VotePeriod, "vote-period", r.VotePeriod, "how often the leader recomputes verdicts")
	fs.DurationVar(&r.VoteTimeout, "vote-timeout", r.VoteTimeout, "how fresh a member's last report must be for its votes to count")
	fs.DurationVar(&r.MaxClockSkew, "max-clock-skew", r.MaxClockSkew, "largest accepted difference between a report's sent-at and the leader's clock")
	fs.DurationVar(&r.DeadVoterTimeout, "dead-voter-timeout", r.DeadVoterTimeout, "how long a voter may look dead before a healthy stand-by replaces it")
	fs.DurationVar(&r.APIServerFailTimeout, "apiserver-fail-timeout", r.APIServerFailTimeout, "how long the leader may go without an answer from the apiserver before handing leadership to a voter that reaches it")
	fs.DurationVar(&r.ReconcilePeriod, "reconcile-period", r.ReconcilePeriod, "how often the leader reconciles membership and voters")
	fs.DurationVar(&r.JoinRetry, "join-retry", r.JoinRetry, "pause between join attempts of a member without a cluster")
	fs.DurationVar(&r.BatchWindow, "report-batch-window", r.BatchWindow, "how long the leader gathers reports into one Raft entry once one of them changes a result")
	fs.DurationVar(&r.HeartbeatBatchWindow, "heartbeat-batch-window", r.HeartbeatBatchWindow, "how long the leader gathers reports that change nothing before committing them (0: nine tenths of --report-period)")
	fs.DurationVar(&r.HandshakeTimeout, "handshake-timeout", r.HandshakeTimeout, "bound on TLS and zone-key authentication of a zone connection")
	fs.DurationVar(&r.RaftHeartbeatTimeout, "raft-heartbeat-timeout", r.RaftHeartbeatTimeout, "hashicorp/raft HeartbeatTimeout")
	fs.DurationVar(&r.RaftElectionTimeout, "raft-election-timeout", r.RaftElectionTimeout, "hashicorp/raft ElectionTimeout")
	fs.DurationVar(&r.RaftLeaderLeaseTimeout, "raft-leader-lease-timeout", r.RaftLeaderLeaseTimeout, "how long a leader leads without hearing from a quorum before it steps down; at most --raft-heartbeat-timeout")
	fs.DurationVar(&r.RaftHeartbeatInterval, "raft-heartbeat-interval", r.RaftHeartbeatInterval, "longest gap between the leader's heartbeats to an idle follower, at most half of --raft-heartbeat-timeout and of --raft-leader-lease-timeout (0: half the shorter)")
	fs.DurationVar(&r.RaftCommitTimeout, "raft-commit-timeout", r.RaftCommitTimeout, "hashicorp/raft CommitTimeout: how often idle followers learn the commit index")
	fs.DurationVar(&r.SnapshotInterval, "snapshot-interval", r.SnapshotInterval, "how often Raft checks whether to snapshot")
	fs.Uint64Var(&r.SnapshotThreshold, "snapshot-threshold", r.SnapshotThreshold, "log entries between snapshots")
	fs.DurationVar(&cfg.ZoneLeaseRenew, "zone-lease-renew", cfg.ZoneLeaseRenew, "zone Lease renewal period (leader only); the Lease stays valid for this plus the longest leadership handover")
	fs.DurationVar(&cfg.ZoneLeaseQuietRenew, "zone-lease-quiet-renew", cfg.ZoneLeaseQuietRenew, "zone Lease renewal period (leader only) while no member needs the cloud's attention, once every member and webhook replica reads the quiet format; 0 renews every --zone-lease-renew always")
	fs.DurationVar(&cfg.APICheckPeriod, "apiserver-check-period", cfg.APICheckPeriod, "how often apiserver reachability is checked")
	fs.DurationVar(&cfg.APITimeout, "apiserver-timeout", cfg.APITimeout, "bound on every Kubernetes API call")
	fs.DurationVar(&cfg.TargetSyncPeriod, "target-sync-period", cfg.TargetSyncPeriod, "how often probe targets follow the member list")
	var probes probe.SpecList
	fs.Var(&probes, "probe", "probe run against every peer, repeatable, e.g. tcp:port=10250,weight=0.5,timeout=1s,period=2s,failure-threshold=3\n(default: agent:port=<peer-port>,weight=0.5 and kubelet:weight=0.5)")
	fs.Float64Var(&cfg.ScoreLine, "score-line", cfg.ScoreLine, "weighted probe score (0-100) a peer needs to be judged OK")
	fs.IntVar(&cfg.ConfirmConnects, "confirm-connects", cfg.ConfirmConnects, "fresh connections to a peer's kubelet port that confirm its first failed probe; when none gets any answer the peer is judged failed at once (0: off, the thresholds alone judge)")
	fs.DurationVar(&cfg.ConfirmGap, "confirm-gap", cfg.ConfirmGap, "time between the starts of the --confirm-connects connections")
	fs.Var(cli.MemoryLimitFlag{V: &cfg.MemoryLimit}, "memory-limit", "Go soft memory limit: auto (90% of the container's memory limit, none outside one), 0 for none, or e.g. 96Mi; GOMEMLIMIT, when set, wins")
	fs.IntVar(&cfg.GCPercent, "gc-percent", cfg.GCPercent, "how far the Go heap may grow over its live part before a collection, in percent (GOGC, when set, wins)")
	fs.IntVar(&cfg.MaxProcs, "max-procs", cfg.MaxProcs, "how many goroutines the agent runs at once (0: the Go runtime's default, the container's CPU limit and at least 2; GOMAXPROCS, when set, wins)")
	fs.BoolVar(&cfg.ReleaseStartupPages, "release-startup-pages", cfg.ReleaseStartupPages, "give back the binary's pages that only start-up touched, at start and once the member is ready (the page cache keeps them; what the agent still runs faults back in)")
	logFlags := cli.AddLogFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	cfg.Probes = probes
	log, err := logFlags.Logger(stderr)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return &cli.UsageError{Err: err}
	}
	return agent.Run(ctx, cfg, log)
}
