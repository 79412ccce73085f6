package admission

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/zone"
)

// NodeLeaseNamespace is where kubelets renew their Leases; the Decider reads
// them to tell a zone cut off from the cloud from a zone whose quorum is gone.
const NodeLeaseNamespace = "kube-node-lease"

// DefaultNamespace is the webhook's own namespace, as deploy/webhook installs
// it: Pod Security `restricted`, and apart from the agents' namespace, whose
// credentials may write Leases. It holds the repair loop's election Lease.
const DefaultNamespace = "edgequorum-webhook"

// Config is the webhook's configuration. Every field that an operator sets is a
// flag of `edgequorum webhook`; the flag is named in brackets on each field and
// in every validation error.
type Config struct {
	// ListenAddress is host:port of the HTTPS server [--listen-address].
	ListenAddress string
	// Listener, when set, is used instead of listening on ListenAddress, so
	// tests can hand in a socket whose address they already know.
	Listener net.Listener
	// TLSCertFile and TLSKeyFile are the serving pair, re-read when they change
	// on disk [--tls-cert-file, --tls-key-file].
	TLSCertFile string
	TLSKeyFile  string

	// LeaseNamespace holds the zone Leases, which the webhook only reads
	// [--lease-namespace].
	LeaseNamespace string
	// ElectionNamespace holds the repair loop's election Lease: the webhook's
	// own namespace, where agent credentials cannot write
	// [--leader-election-namespace].
	ElectionNamespace string
	// ZoneLabel is the Node label whose value names a node's zone
	// [--zone-label].
	ZoneLabel string
	// AgentUser is the username the agents write under (their
	// ServiceAccount's): their nodes/status writes carry verdicts and the
	// EdgeQuorum condition, which the webhook checks [--agent-user]. Keep it
	// in step with the matchConditions of the nodestatus webhook.
	AgentUser string
	// MaxZoneLeaseDuration caps the leaseDurationSeconds the webhook
	// believes of a zone Lease: the agents write about 15 s; a Lease that
	// claims more is trusted this long [--max-zone-lease-duration].
	MaxZoneLeaseDuration time.Duration
	// MaxCutoffProtection is how long a zone that lost the cloud as a whole
	// keeps its vouched nodes protected; 0 never protects a cut-off zone
	// [--max-cutoff-protection].
	MaxCutoffProtection time.Duration
	// PodReadySlack is how much earlier than its node's Ready condition went
	// Unknown a pod may have turned not ready and still count as turned not
	// ready by the node lifecycle controller. Condition times have one-second
	// resolution, so it must cover at least that [--pod-ready-slack].
	PodReadySlack time.Duration

	// DryRun decides and counts but never patches, and the repair loop writes
	// nothing but the webhook's own certificate (ManageCerts), without which
	// no review could be answered at all [--dry-run].
	DryRun bool
	// Repair runs the repair loop [--repair].
	Repair bool
	// RepairPeriod is how often the repair loop's leader rescans every node,
	// EndpointSlice and Endpoints object: vouching depends on time, so an
	// object can need repair without any event on it [--repair-period].
	RepairPeriod time.Duration
	// RepairQPS and RepairBurst bound the repair loop's writes
	// [--repair-qps, --repair-burst].
	RepairQPS   float64
	RepairBurst int
	// TLSSecret names a Secret in ElectionNamespace to serve the TLS pair
	// from, read through the API (tls.crt, tls.key), instead of
	// TLSCertFile and TLSKeyFile [--tls-secret].
	TLSSecret string
	// ManageCerts makes the repair loop's leader keep TLSSecret itself:
	// create it, renew its CA and serving certificate a third of their
	// validity before expiry, and keep the caBundle of WebhookConfiguration
	// in step (certs.go) [--manage-certs].
	ManageCerts bool
	// WebhookConfiguration names the MutatingWebhookConfiguration whose
	// caBundle ManageCerts keeps [--webhook-configuration].
	WebhookConfiguration string
	// ServiceName is the webhook's Service, whose names the managed serving
	// certificate carries, with TLSDNSNames and TLSIPs besides
	// [--service-name, --tls-dns-names, --tls-ip-sans].
	ServiceName string
	TLSDNSNames []string
	TLSIPs      []net.IP
	// CAValidity and CertValidity are how long the managed CA and serving
	// certificate last; each is renewed with a third left
	// [--ca-validity, --cert-validity].
	CAValidity   time.Duration
	CertValidity time.Duration
	// ZoneStatusPeriod is how often the repair loop's leader judges every
	// zone for the EdgeZones and the zone gauges; ZoneStatusQPS and
	// ZoneStatusBurst bound its EdgeZone writes, each a zone whose status
	// changed [--zone-status-period, --zone-status-qps, --zone-status-burst].
	ZoneStatusPeriod time.Duration
	ZoneStatusQPS    float64
	ZoneStatusBurst  int
	// ZoneClient writes the EdgeZones; nil writes none, and the zone gauges
	// are still exported.
	ZoneClient dynamic.Interface
	// DeadNodeAction is what the repair loop does to a node its zone confirms
	// dead: DeadNodeActionNone, or DeadNodeActionOutOfService to apply the
	// out-of-service taint (see failover) [--dead-node-action].
	DeadNodeAction string
	// DeadNodeDwell is how long a node must stay confirmed dead, by the
	// webhook's clock, before DeadNodeAction acts [--dead-node-dwell].
	DeadNodeDwell time.Duration
	// FailoverMaxPerZone is how many nodes of one zone the failover keeps
	// out of service at once; never more than a minority of the zone either
	// [--failover-max-per-zone].
	FailoverMaxPerZone int
	// FailoverMaxUnhealthy is how many edge nodes (nodes with the zone
	// label) of the whole cluster the failover keeps out of service at once:
	// a count, or a percentage of the edge nodes rounded up, as
	// NodeHealthCheck's maxUnhealthy [--failover-max-unhealthy].
	FailoverMaxUnhealthy intstr.IntOrString
	// FailoverMassOutage is the share of edge nodes the cloud sees Unknown
	// at which the failover acts on no node at all: that many silent nodes
	// are the cloud's own link or a region down, not dead machines, as the
	// controller manager's --unhealthy-zone-threshold judges a zone
	// [--failover-mass-outage-threshold].
	FailoverMassOutage float64
	// LeaderElectionID is the name of the repair loop's election Lease in
	// ElectionNamespace [--leader-election-id].
	LeaderElectionID string
	// Identity names this replica in the election Lease; the pod name is a
	// good choice [--leader-election-identity].
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go leader
	// election's timers [--leader-elect-lease-duration,
	// --leader-elect-renew-deadline, --leader-elect-retry-period].
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// MaxRequestBytes bounds an AdmissionReview body; larger ones get 413
	// [--max-request-bytes].
	MaxRequestBytes int64
	// ReadTimeout, WriteTimeout and IdleTimeout bound the HTTPS server's
	// connections [--http-read-timeout, --http-write-timeout,
	// --http-idle-timeout].
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	IdleTimeout  time.Duration
	// ShutdownDelay is how long Run keeps answering reviews once its context
	// is done, with /readyz failing and keep-alives off, before it closes the
	// listener: the apiserver keeps sending reviews to a terminating replica
	// until the Service's endpoints and kube-proxy have dropped it, and a
	// review sent to a closed port is skipped (Ignore hooks: the node loses
	// its protection for that write) or failed (the Fail nodestatus hook: a
	// leader's verdict write is refused). Zero closes at once
	// [--shutdown-delay].
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight requests once
	// it closes the listener [--shutdown-timeout]. ShutdownDelay plus
	// ShutdownTimeout must stay below the pod's terminationGracePeriodSeconds.
	ShutdownTimeout time.Duration

	// Clock drives every freshness decision and the repair loop; tests inject
	// a fake one. Leader election keeps client-go's real clock.
	Clock clock.WithTicker
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the metrics. Gatherer is what /metrics serves. When
	// both are nil the webhook keeps a private registry and serves it; when
	// only Registerer is set and it is also a Gatherer, it is served.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
}

// Values of DeadNodeAction.
const (
	DeadNodeActionNone         = "none"
	DeadNodeActionOutOfService = "out-of-service"
)

// DefaultConfig returns the defaults. How long a zone Lease counts as fresh is
// the Lease's own leaseDurationSeconds, set by the agents that renew it
// (capped by MaxZoneLeaseDuration), and whether a zone is cut off follows from
// the Leases themselves: no setting has to match the controller manager's
// grace period.
func DefaultConfig() Config {
	return Config{
		ListenAddress:        ":9443",
		LeaseNamespace:       zone.DefaultLeaseNamespace,
		ElectionNamespace:    DefaultNamespace,
		ZoneLabel:            zone.DefaultZoneLabel,
		AgentUser:            DefaultAgentUser,
		MaxZoneLeaseDuration: time.Minute,
		MaxCutoffProtection:  24 * time.Hour,
		PodReadySlack:        5 * time.Second,
		Repair:               true,
		RepairPeriod:         30 * time.Second,
		RepairQPS:            5,
		RepairBurst:          10,
		ZoneStatusPeriod:     10 * time.Second,
		WebhookConfiguration: "edgequorum-webhook",
		ServiceName:          "edgequorum-webhook",
		CAValidity:           5 * 365 * 24 * time.Hour,
		CertValidity:         90 * 24 * time.Hour,
		ZoneStatusQPS:        10,
		ZoneStatusBurst:      50,
		DeadNodeAction:       DeadNodeActionNone,
		DeadNodeDwell:        20 * time.Second,
		FailoverMaxPerZone:   1,
		FailoverMaxUnhealthy: intstr.FromString("10%"),
		FailoverMassOutage:   0.55,
		LeaderElectionID:     "edgequorum-webhook-repair",
		LeaseDuration:        15 * time.Second,
		RenewDeadline:        10 * time.Second,
		RetryPeriod:          2 * time.Second,
		// The apiserver's own limit on a request body is 3 MiB, and a review
		// carries both the object and the old object; 3 MiB covers every
		// realistic Node, EndpointSlice and Endpoints pair.
		MaxRequestBytes: 3 << 20,
		ReadTimeout:     10 * time.Second,
		WriteTimeout:    10 * time.Second,
		IdleTimeout:     90 * time.Second,
		ShutdownDelay:   10 * time.Second,
		ShutdownTimeout: 10 * time.Second,
	}
}

// DefaultAgentUser is the agents' ServiceAccount as deploy/agent installs it.
const DefaultAgentUser = "system:serviceaccount:" + zone.DefaultLeaseNamespace + ":edgequorum-agent"

// Validate checks the configuration and names the flag of every problem.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Listener == nil {
		if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
			bad("--listen-address %q: %w", c.ListenAddress, err)
		}
	}
	switch {
	case c.TLSSecret != "" && (c.TLSCertFile != "" || c.TLSKeyFile != ""):
		bad("--tls-secret and --tls-cert-file/--tls-key-file exclude each other: serve from the Secret or from files")
	case c.TLSSecret != "":
		if msgs := validation.IsDNS1123Subdomain(c.TLSSecret); len(msgs) > 0 {
			bad("--tls-secret %q: %s", c.TLSSecret, msgs[0])
		}
	case c.TLSCertFile == "" || c.TLSKeyFile == "":
		bad("--tls-secret, or --tls-cert-file and --tls-key-file, is required")
	}
	if c.ManageCerts {
		switch {
		case c.TLSSecret == "":
			bad("--manage-certs needs --tls-secret: the Secret it keeps")
		case !c.Repair:
			bad("--manage-certs needs --repair: the repair loop's leader keeps the certificates")
		}
		if msgs := validation.IsDNS1123Subdomain(c.WebhookConfiguration); len(msgs) > 0 {
			bad("--webhook-configuration %q: %s", c.WebhookConfiguration, msgs[0])
		}
		if msgs := validation.IsDNS1123Label(c.ServiceName); len(msgs) > 0 {
			bad("--service-name %q: %s", c.ServiceName, msgs[0])
		}
		if c.CertValidity <= 0 {
			bad("--cert-validity must be positive, got %s", c.CertValidity)
		}
		if c.CAValidity < c.CertValidity {
			bad("--ca-validity (%s) must be at least --cert-validity (%s)", c.CAValidity, c.CertValidity)
		}
	}
	if msgs := validation.IsDNS1123Label(c.LeaseNamespace); len(msgs) > 0 {
		bad("--lease-namespace %q: %s", c.LeaseNamespace, msgs[0])
	}
	if msgs := validation.IsDNS1123Label(c.ElectionNamespace); len(msgs) > 0 {
		bad("--leader-election-namespace %q: %s", c.ElectionNamespace, msgs[0])
	}
	if msgs := validation.IsQualifiedName(c.ZoneLabel); len(msgs) > 0 {
		bad("--zone-label %q: %s", c.ZoneLabel, msgs[0])
	}
	positive := func(flag string, d time.Duration) {
		if d <= 0 {
			bad("--%s must be positive, got %s", flag, d)
		}
	}
	positive("max-zone-lease-duration", c.MaxZoneLeaseDuration)
	if c.MaxCutoffProtection < 0 {
		bad("--max-cutoff-protection must not be negative, got %s", c.MaxCutoffProtection)
	}
	if c.PodReadySlack < time.Second {
		bad("--pod-ready-slack must be at least 1s (condition times have one-second resolution), got %s", c.PodReadySlack)
	}
	if c.MaxRequestBytes < 64<<10 {
		bad("--max-request-bytes must be at least 65536, got %d", c.MaxRequestBytes)
	}
	positive("http-read-timeout", c.ReadTimeout)
	positive("http-write-timeout", c.WriteTimeout)
	positive("http-idle-timeout", c.IdleTimeout)
	if c.ShutdownDelay < 0 {
		bad("--shutdown-delay must not be negative, got %s", c.ShutdownDelay)
	}
	positive("shutdown-timeout", c.ShutdownTimeout)
	switch c.DeadNodeAction {
	case DeadNodeActionNone:
	case DeadNodeActionOutOfService:
		if !c.Repair {
			bad("--dead-node-action=%s needs the repair loop: --repair must be on", c.DeadNodeAction)
		}
		positive("dead-node-dwell", c.DeadNodeDwell)
		if c.FailoverMaxPerZone < 1 {
			bad("--failover-max-per-zone must be at least 1, got %d", c.FailoverMaxPerZone)
		}
		if _, err := maxUnhealthy(c.FailoverMaxUnhealthy, 100); err != nil {
			bad("--failover-max-unhealthy: %w", err)
		}
		if c.FailoverMassOutage <= 0 || c.FailoverMassOutage > 1 {
			bad("--failover-mass-outage-threshold must be above 0 and at most 1, got %g", c.FailoverMassOutage)
		}
	default:
		bad("--dead-node-action must be %q or %q, got %q", DeadNodeActionNone, DeadNodeActionOutOfService, c.DeadNodeAction)
	}
	if c.Repair {
		positive("repair-period", c.RepairPeriod)
		if c.RepairQPS <= 0 {
			bad("--repair-qps must be positive, got %g", c.RepairQPS)
		}
		if c.RepairBurst < 1 {
			bad("--repair-burst must be at least 1, got %d", c.RepairBurst)
		}
		positive("zone-status-period", c.ZoneStatusPeriod)
		if c.ZoneStatusQPS <= 0 {
			bad("--zone-status-qps must be positive, got %g", c.ZoneStatusQPS)
		}
		if c.ZoneStatusBurst < 1 {
			bad("--zone-status-burst must be at least 1, got %d", c.ZoneStatusBurst)
		}
		if msgs := validation.IsDNS1123Subdomain(c.LeaderElectionID); len(msgs) > 0 {
			bad("--leader-election-id %q: %s", c.LeaderElectionID, msgs[0])
		}
		if c.Identity == "" {
			bad("--leader-election-identity is required when --repair is on")
		}
		positive("leader-elect-retry-period", c.RetryPeriod)
		// client-go's own rules, checked here so the flag gets named.
		if c.RenewDeadline <= time.Duration(1.2*float64(c.RetryPeriod)) {
			bad("--leader-elect-renew-deadline (%s) must exceed 1.2 × --leader-elect-retry-period (%s)", c.RenewDeadline, c.RetryPeriod)
		}
		if c.LeaseDuration <= c.RenewDeadline {
			bad("--leader-elect-lease-duration (%s) must exceed --leader-elect-renew-deadline (%s)", c.LeaseDuration, c.RenewDeadline)
		}
	}
	return errors.Join(errs...)
}

// withDefaults fills what a library caller may leave empty.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil && c.Gatherer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Gatherer == nil {
		if g, ok := c.Registerer.(prometheus.Gatherer); ok {
			c.Gatherer = g
		} else {
			c.Gatherer = prometheus.NewRegistry()
		}
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}
