package testcluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"
)

// Defaults applied by Options.withDefaults. The grace period is far below the
// production default (50s) so tests see the node lifecycle controller act within
// seconds; the fake kubelets' intervals stay well inside it so a connected node
// never flaps.
const (
	DefaultNodeMonitorGracePeriod = 20 * time.Second
	DefaultLeaseRenewInterval     = 3 * time.Second
	DefaultNodeStatusInterval     = 10 * time.Second
	DefaultStartTimeout           = 90 * time.Second
	DefaultStopTimeout            = 10 * time.Second
	DefaultCloudZone              = "cloud"
	DefaultCloudNodeName          = "cloud"
)

// Options configures Start. The zero value is a working test cluster.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Empty means
	// FindBinDir's search.
	BinDir string
	// Dir receives the cluster's data, certificates, kubeconfigs and logs. Empty
	// means a new temporary directory that Stop removes; a Dir given by the caller
	// is left in place so its logs can be read after Stop.
	Dir string

	// StartTimeout bounds the wait for each component to become ready.
	StartTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before it SIGKILLs a
	// component's process group.
	StopTimeout time.Duration

	// NodeMonitorGracePeriod is KCM's --node-monitor-grace-period: how long a node
	// may go without renewing its Lease before it is marked Ready=Unknown.
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod is KCM's --node-monitor-period; zero keeps KCM's default (5s).
	NodeMonitorPeriod time.Duration
	// NodeStartupGracePeriod is KCM's --node-startup-grace-period; zero keeps
	// KCM's default (1m). It only matters for nodes that never became Ready.
	NodeStartupGracePeriod time.Duration
	// NodeEvictionRate is KCM's --node-eviction-rate (nodes per second that get
	// the NoExecute taint in a healthy zone); zero keeps KCM's default (0.1).
	NodeEvictionRate float64
	// DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds
	// set the tolerations the DefaultTolerationSeconds admission plugin adds to
	// every pod. In 1.36 taint-based eviction is the only eviction mode, so these
	// (or a pod's own tolerationSeconds) are the pod eviction timeout. Zero keeps
	// the apiserver's default (300).
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// Controllers is KCM's --controllers. Empty means {"*"}: every controller
	// enabled by default, including node-lifecycle-controller,
	// taint-eviction-controller, endpointslice-controller and endpoints-controller.
	Controllers []string

	// Scheduler runs kube-scheduler (bin/kube-scheduler, which `make
	// noderuntime` builds) as system:kube-scheduler, so the pods that
	// controllers create are bound to the fake nodes. Without it a test binds
	// its pods itself.
	Scheduler bool

	// AuditPolicy, when set, is an audit.k8s.io/v1 Policy (YAML) the apiserver
	// logs with; the JSON lines land in AuditLogPath. WriteAuditPolicy records
	// every write.
	AuditPolicy string
	// ExtraAPIServerArgs, ExtraKCMArgs and ExtraEtcdArgs are appended to the
	// harness's own flags, so a repeated flag overrides the harness's value.
	ExtraAPIServerArgs []string
	ExtraKCMArgs       []string
	ExtraEtcdArgs      []string

	// NoCloudNode skips the always-healthy node Start adds in CloudZone. Without
	// a healthy zone KCM treats a cut zone as a control-plane outage and neither
	// taints nor evicts, so only tests of that very behaviour should set it.
	NoCloudNode bool
	// CloudZone is the zone of the cloud node.
	CloudZone string

	// LeaseRenewInterval and NodeStatusInterval are the fake kubelets' defaults
	// for renewing their Lease and posting their NodeStatus heartbeat.
	LeaseRenewInterval time.Duration
	NodeStatusInterval time.Duration

	// AdvertiseAddress, when valid, switches the cluster to node-network mode
	// for a real kubelet (internal/realnode): the apiserver serves and
	// advertises on this non-loopback address instead of 127.0.0.1, the
	// endpoint reconciler keeps the "kubernetes" Service's endpoints on it (so
	// pods reach the apiserver through its ClusterIP), the apiserver
	// authenticates to kubelets with a client certificate for exec and logs,
	// reaches them by InternalIP and routes aggregated APIs to endpoint IPs.
	// The address must be assigned to an interface of the network namespace the
	// cluster runs in (realnode.RunInNamespace sets one up); the zero value keeps
	// the loopback-only cluster every other test uses.
	AdvertiseAddress netip.Addr

	// Logger receives the harness's own log lines (fake kubelets, process
	// lifecycle). Nil means a text log at LogDir()/harness.log.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.NodeMonitorGracePeriod == 0 {
		o.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if len(o.Controllers) == 0 {
		o.Controllers = []string{"*"}
	}
	if o.CloudZone == "" {
		o.CloudZone = DefaultCloudZone
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = DefaultLeaseRenewInterval
	}
	if o.NodeStatusInterval == 0 {
		o.NodeStatusInterval = DefaultNodeStatusInterval
	}
	return o
}

// Validate reports the first problem with o after defaults are applied; its
// message names the field.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"StartTimeout", o.StartTimeout},
		{"StopTimeout", o.StopTimeout},
		{"NodeMonitorGracePeriod", o.NodeMonitorGracePeriod},
		{"NodeMonitorPeriod", o.NodeMonitorPeriod},
		{"NodeStartupGracePeriod", o.NodeStartupGracePeriod},
		{"LeaseRenewInterval", o.LeaseRenewInterval},
		{"NodeStatusInterval", o.NodeStatusInterval},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("testcluster: Options.%s must not be negative, got %v", d.name, d.v))
		}
	}
	// A kubelet that renews less than twice per grace period flaps between Ready
	// and Unknown under the slightest scheduling delay.
	if o.LeaseRenewInterval*2 > o.NodeMonitorGracePeriod {
		errs = append(errs, fmt.Errorf("testcluster: Options.LeaseRenewInterval (%v) must be at most half of NodeMonitorGracePeriod (%v)",
			o.LeaseRenewInterval, o.NodeMonitorGracePeriod))
	}
	if o.NodeEvictionRate < 0 {
		errs = append(errs, fmt.Errorf("testcluster: Options.NodeEvictionRate must not be negative, got %v", o.NodeEvictionRate))
	}
	if o.DefaultNotReadyTolerationSeconds < 0 || o.DefaultUnreachableTolerationSeconds < 0 {
		errs = append(errs, errors.New("testcluster: Options.DefaultNotReadyTolerationSeconds and DefaultUnreachableTolerationSeconds must not be negative"))
	}
	if a := o.AdvertiseAddress; a.IsValid() && (!a.Is4() || a.IsLoopback() || a.IsUnspecified()) {
		errs = append(errs, fmt.Errorf("testcluster: Options.AdvertiseAddress must be a non-loopback, specified IPv4 address, got %v", a))
	}
	return errors.Join(errs...)
}

// nodeNetwork reports whether the cluster runs in node-network mode (see
// Options.AdvertiseAddress).
func (o Options) nodeNetwork() bool { return o.AdvertiseAddress.IsValid() }
