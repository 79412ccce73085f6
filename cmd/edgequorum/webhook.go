package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/internal/memlimit"
)

func init() {
	register(command{name: "webhook", summary: "run the cloud admission webhook (Deployment)", run: runWebhook})
}

const webhookUsage = `Runs in the cloud behind a MutatingWebhookConfiguration: strips
node.kubernetes.io/unreachable:NoExecute from nodes their zone vouches for and
keeps their pods and endpoints ready. The node, endpoint and pod status routes
never deny a request of the cluster's own components (failurePolicy Ignore).
The nodestatus route checks the agents' nodes/status writes against what their
zone signed and denies one that changes more than the EdgeQuorum condition or
carries an unsigned or forged verdict, and one it cannot check (failurePolicy
Fail). /healthz, /readyz and /metrics are served on the same HTTPS port. The
repair loop (leader-elected) re-sends objects whose admission was missed, marks
not ready the pods the webhook kept Ready once their node is no longer vouched,
keeps the webhook's memory of honoured verdicts and, with
--dead-node-action=out-of-service, taints nodes their zone confirms dead out of
service and force-deletes their terminating pods.`

func runWebhook(ctx context.Context, args []string, _, stderr io.Writer) error {
	cfg := admission.DefaultConfig()
	fs := cli.NewFlagSet("webhook", webhookUsage, stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig path (default: in-cluster config)")
	fs.StringVar(&cfg.ListenAddress, "listen-address", cfg.ListenAddress, "host:port of the HTTPS server (reviews, /healthz, /readyz, /metrics)")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate, PEM; re-read when it changes (or --tls-secret)")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "serving key, PEM; re-read when it changes (or --tls-secret)")
	fs.StringVar(&cfg.TLSSecret, "tls-secret", "", "Secret in the webhook's namespace to serve the pair from (tls.crt, tls.key), read through the API; instead of --tls-cert-file and --tls-key-file")
	fs.BoolVar(&cfg.ManageCerts, "manage-certs", false, "keep --tls-secret yourself: the repair loop's leader creates it, renews its CA and serving certificate with a third of their validity left, and keeps the caBundle of --webhook-configuration in step")
	fs.StringVar(&cfg.WebhookConfiguration, "webhook-configuration", cfg.WebhookConfiguration, "MutatingWebhookConfiguration whose caBundle --manage-certs keeps")
	fs.StringVar(&cfg.ServiceName, "service-name", cfg.ServiceName, "the webhook's Service, whose names the managed serving certificate carries")
	fs.Func("tls-dns-names", "comma-separated extra DNS names of the managed serving certificate", func(v string) error {
		for n := range strings.SplitSeq(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				cfg.TLSDNSNames = append(cfg.TLSDNSNames, n)
			}
		}
		return nil
	})
	fs.Func("tls-ip-sans", "comma-separated IP addresses the managed serving certificate carries (for a webhook dialled by address)", func(v string) error {
		for a := range strings.SplitSeq(v, ",") {
			ip := net.ParseIP(strings.TrimSpace(a))
			if ip == nil {
				return fmt.Errorf("%q is no IP address", a)
			}
			cfg.TLSIPs = append(cfg.TLSIPs, ip)
		}
		return nil
	})
	fs.DurationVar(&cfg.CAValidity, "ca-validity", cfg.CAValidity, "how long a managed CA lasts; renewed with a third left")
	fs.DurationVar(&cfg.CertValidity, "cert-validity", cfg.CertValidity, "how long a managed serving certificate lasts; renewed with a third left")
	fs.StringVar(&cfg.LeaseNamespace, "lease-namespace", cfg.LeaseNamespace, "namespace of the zone Leases, which the webhook only reads")
	fs.StringVar(&cfg.ZoneLabel, "zone-label", cfg.ZoneLabel, "Node label whose value names the zone")
	fs.DurationVar(&cfg.MaxZoneLeaseDuration, "max-zone-lease-duration", cfg.MaxZoneLeaseDuration, "longest leaseDurationSeconds of a zone Lease the webhook believes")
	legacyLeaseAge := fs.Duration("node-lease-max-age", 0, "deprecated and ignored: whether a zone is cut off follows from the Leases themselves")
	fs.DurationVar(&cfg.MaxCutoffProtection, "max-cutoff-protection", cfg.MaxCutoffProtection, "how long a zone cut off as a whole keeps its vouched nodes protected (0: never)")
	fs.DurationVar(&cfg.PodReadySlack, "pod-ready-slack", cfg.PodReadySlack, "how much before its node went Unknown a pod may have turned not ready and still be revived")
	fs.BoolVar(&cfg.DryRun, "dry-run", cfg.DryRun, "decide and count, but patch nothing and let the repair loop write nothing (but the webhook's own certificate, with --manage-certs)")
	fs.BoolVar(&cfg.Repair, "repair", cfg.Repair, "run the leader-elected repair loop (needs update rights on nodes, endpointslices, endpoints, and patch on pods/status)")
	fs.DurationVar(&cfg.RepairPeriod, "repair-period", cfg.RepairPeriod, "how often the repair loop's leader rescans every node, EndpointSlice and Endpoints")
	fs.Float64Var(&cfg.RepairQPS, "repair-qps", cfg.RepairQPS, "most repair writes per second")
	fs.IntVar(&cfg.RepairBurst, "repair-burst", cfg.RepairBurst, "repair writes allowed in a burst")
	fs.DurationVar(&cfg.ZoneStatusPeriod, "zone-status-period", cfg.ZoneStatusPeriod, "how often the repair loop's leader judges every zone for the EdgeZones (kubectl get edgezones) and the zone gauges")
	fs.Float64Var(&cfg.ZoneStatusQPS, "zone-status-qps", cfg.ZoneStatusQPS, "most EdgeZone writes per second; only zones whose status changed are written, state changes first")
	fs.IntVar(&cfg.ZoneStatusBurst, "zone-status-burst", cfg.ZoneStatusBurst, "EdgeZone writes allowed in a burst")
	fs.StringVar(&cfg.DeadNodeAction, "dead-node-action", cfg.DeadNodeAction, "what the repair loop does to a node its zone, reaching the cloud, judged unhealthy while the cloud sees it Unknown: none, or out-of-service (the node.kubernetes.io/out-of-service taint: its pods are evicted and their volumes detached without waiting for their toleration, and its terminating pods force-deleted, which needs delete on pods; the node must really be down)")
	fs.StringVar(&cfg.AgentUser, "agent-user", cfg.AgentUser, "username the agents write under; their nodes/status writes (verdicts and the EdgeQuorum condition) are checked")
	fs.DurationVar(&cfg.DeadNodeDwell, "dead-node-dwell", cfg.DeadNodeDwell, "how long a node must stay confirmed dead before --dead-node-action acts")
	fs.IntVar(&cfg.FailoverMaxPerZone, "failover-max-per-zone", cfg.FailoverMaxPerZone, "most nodes of one zone --dead-node-action keeps out of service at once (never more than a minority of the zone)")
	fs.Func("failover-max-unhealthy", "most edge nodes of the cluster --dead-node-action keeps out of service at once: a count, or a percentage of the edge nodes, rounded up (default "+cfg.FailoverMaxUnhealthy.String()+")", func(v string) error {
		cfg.FailoverMaxUnhealthy = intstr.Parse(v)
		return nil
	})
	fs.Float64Var(&cfg.FailoverMassOutage, "failover-mass-outage-threshold", cfg.FailoverMassOutage, "share of edge nodes the cloud sees Unknown at which --dead-node-action acts on none: a mass outage, not dead machines")
	fs.StringVar(&cfg.ElectionNamespace, "leader-election-namespace", cfg.ElectionNamespace, "namespace of the repair loop's election Lease: the webhook's own, where agents cannot write (Deployment: the pod's namespace)")
	fs.StringVar(&cfg.LeaderElectionID, "leader-election-id", cfg.LeaderElectionID, "name of the repair loop's election Lease in --leader-election-namespace")
	fs.StringVar(&cfg.Identity, "leader-election-identity", "", "this replica's name in the election Lease (default: the host name; Deployment: the pod name)")
	fs.DurationVar(&cfg.LeaseDuration, "leader-elect-lease-duration", cfg.LeaseDuration, "how long a repair leader's lease lasts without renewal")
	fs.DurationVar(&cfg.RenewDeadline, "leader-elect-renew-deadline", cfg.RenewDeadline, "how long a repair leader keeps trying to renew before it steps down")
	fs.DurationVar(&cfg.RetryPeriod, "leader-elect-retry-period", cfg.RetryPeriod, "pause between election attempts")
	fs.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", cfg.MaxRequestBytes, "largest AdmissionReview body accepted; larger ones get 413")
	fs.DurationVar(&cfg.ReadTimeout, "http-read-timeout", cfg.ReadTimeout, "bound on reading one request, headers included")
	fs.DurationVar(&cfg.WriteTimeout, "http-write-timeout", cfg.WriteTimeout, "bound on answering one request")
	fs.DurationVar(&cfg.IdleTimeout, "http-idle-timeout", cfg.IdleTimeout, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", cfg.ShutdownDelay, "how long reviews are still answered after SIGTERM, with /readyz failing, while the Service's endpoints drop this replica (0: stop at once)")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", cfg.ShutdownTimeout, "how long in-flight requests may finish once the listener closes")
	memoryLimit := int64(memlimit.Auto)
	fs.Var(cli.MemoryLimitFlag{V: &memoryLimit}, "memory-limit", "Go soft memory limit: auto (90% of the container's memory limit, none outside one), 0 for none, or e.g. 1Gi; GOMEMLIMIT, when set, wins")
	logFlags := cli.AddLogFlags(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	log, err := logFlags.Logger(stderr)
	if err != nil {
		return err
	}
	if memoryLimit < 0 && memoryLimit != memlimit.Auto || memoryLimit > 0 && memoryLimit < 64<<20 {
		return cli.Usagef("--memory-limit %d must be auto, 0 (no limit) or at least 64Mi", memoryLimit)
	}
	// Its caches grow with the cluster: near the container's limit the
	// collector works harder rather than the kernel killing the webhook.
	memlimit.Apply(memoryLimit, "/sys/fs/cgroup", log)
	if *legacyLeaseAge != 0 {
		log.Warn("--node-lease-max-age is deprecated and ignored: whether a zone is cut off follows from its Leases; remove the flag")
	}
	if cfg.Identity == "" {
		if cfg.Identity, err = os.Hostname(); err != nil {
			return cli.Usagef("--leader-election-identity is empty and the host name is unknown: %v", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return &cli.UsageError{Err: err}
	}
	cfg.Logger = log
	reg := buildinfo.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg

	restCfg, err := webhookRESTConfig(*kubeconfig)
	if err != nil {
		return err
	}
	clientLimits(restCfg, cfg)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if cfg.ZoneClient, err = dynamic.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("kubernetes client for EdgeZones: %w", err)
	}
	w, err := admission.New(cfg, client)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// clientLimits sets the API clients' own rate limit above the write budgets
// the webhook paces itself to (--repair-qps, --zone-status-qps and their
// bursts), with room for its Events, Leases and reads: client-go's default of
// 5 a second would bind first, and at ten thousand zones hold the first
// EdgeZones back by half an hour and a regional outage's repairs behind them.
func clientLimits(c *rest.Config, cfg admission.Config) {
	c.QPS = float32(cfg.RepairQPS+cfg.ZoneStatusQPS) + 10
	c.Burst = cfg.RepairBurst + cfg.ZoneStatusBurst + 20
}

// webhookRESTConfig loads the kubeconfig at path, or the in-cluster config when
// path is empty, and names the webhook in the apiserver's audit log.
func webhookRESTConfig(path string) (*rest.Config, error) {
	var (
		c   *rest.Config
		err error
	)
	if path == "" {
		if c, err = rest.InClusterConfig(); err != nil {
			return nil, fmt.Errorf("in-cluster config (pass --kubeconfig outside a cluster): %w", err)
		}
	} else if c, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", path, err)
	}
	c.UserAgent = "edgequorum-webhook/" + buildinfo.Version()
	return c, nil
}
