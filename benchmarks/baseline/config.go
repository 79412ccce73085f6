package baseline

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Well-known names from SuperEdge that the daemon reads from the cluster.
const (
	// ZoneLabel groups nodes into zones when zone checking is enabled.
	ZoneLabel = "superedgehealth/topology-zone"
	// MasterLabel marks cloud nodes that are never checked.
	MasterLabel = "node-role.kubernetes.io/master"
	// AnnotationKey holds the vote result on the Node: "true" or "false".
	AnnotationKey = "superedgehealth/node-health"
	// ZoneConfigMap switches zone checking on (TaintZoneConfigKey = "true").
	ZoneConfigMap      = "edge-health-zone-config"
	TaintZoneConfigKey = "TaintZoneAdmission"
	// HMACConfigMap holds the exchange key under HMACKey.
	HMACConfigMap = "hmac-config"
	HMACKey       = "hmackey"
	// ConfigNamespace holds both ConfigMaps.
	ConfigNamespace = "kube-system"
	// UnreachableTaint is the taint the pros branch removes (NoExecute only).
	UnreachableTaint = "node.kubernetes.io/unreachable"
)

// Annotation values.
const (
	Healthy   = "true"
	Unhealthy = "false"
)

// Ping is the ping plugin's settings (SuperEdge: --pingplugin=timeout=,retrytime=,weight=,port=).
type Ping struct {
	Port    int
	Timeout time.Duration
	Tries   int
	Weight  float64
}

// Config is one daemon's settings. Every duration is a flag of the
// edgehealth command; the flag is named in brackets.
type Config struct {
	// NodeName finds this node in the node list [--node-name].
	NodeName string
	// LocalIP is this node's InternalIP: its identity in rows and the address
	// the exchange server binds [--local-ip].
	LocalIP string
	// Kubeconfig is the client configuration; empty means in-cluster [--kubeconfig].
	Kubeconfig string
	// MetricsAddress serves /metrics for the harness; it is not counted as
	// exchange traffic [--metrics-address].
	MetricsAddress string

	// CheckPeriod is SuperEdge's healthcheckperiod: node list refresh and
	// checks [--check-period].
	CheckPeriod time.Duration
	// ScoreLine is the summed plugin score a node needs to be normal [--score-line].
	ScoreLine float64
	// Ping configures the only plugin [--ping-port, --ping-timeout, --ping-tries].
	Ping Ping

	// CommunPeriod, CommunTimeout, CommunTries and CommunPort are the exchange
	// settings [--commun-period, --commun-timeout, --commun-tries, --commun-port].
	CommunPeriod  time.Duration
	CommunTimeout time.Duration
	CommunTries   int
	CommunPort    int

	// VotePeriod and VoteTimeout drive the vote [--vote-period, --vote-timeout].
	VotePeriod  time.Duration
	VoteTimeout time.Duration

	// QPS and Burst are the Kubernetes client's rate limit [--kube-api-qps,
	// --kube-api-burst]; SuperEdge keeps client-go's defaults.
	QPS   float32
	Burst int
}

// DefaultConfig returns SuperEdge's defaults.
func DefaultConfig() Config {
	return Config{
		CheckPeriod:   10 * time.Second,
		ScoreLine:     100,
		Ping:          Ping{Port: 10250, Timeout: 5 * time.Second, Tries: 3, Weight: 1},
		CommunPeriod:  60 * time.Second,
		CommunTimeout: 2 * time.Second,
		CommunTries:   1,
		CommunPort:    51005,
		VotePeriod:    10 * time.Second,
		VoteTimeout:   60 * time.Second,
		QPS:           5,
		Burst:         10,
	}
}

// Validate names the flag of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required"))
	}
	if net.ParseIP(c.LocalIP) == nil {
		errs = append(errs, fmt.Errorf("--local-ip %q is not an IP address", c.LocalIP))
	}
	if c.MetricsAddress != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddress); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-address %q: %w", c.MetricsAddress, err))
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--check-period", c.CheckPeriod}, {"--ping-timeout", c.Ping.Timeout}, {"--commun-period", c.CommunPeriod},
		{"--commun-timeout", c.CommunTimeout}, {"--vote-period", c.VotePeriod}, {"--vote-timeout", c.VoteTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.flag, d.v))
		}
	}
	if c.Ping.Port < 1 || c.Ping.Port > 65535 {
		errs = append(errs, fmt.Errorf("--ping-port %d is out of range 1-65535", c.Ping.Port))
	}
	if c.CommunPort < 1 || c.CommunPort > 65535 {
		errs = append(errs, fmt.Errorf("--commun-port %d is out of range 1-65535", c.CommunPort))
	}
	if c.Ping.Tries < 1 {
		errs = append(errs, fmt.Errorf("--ping-tries must be at least 1, got %d", c.Ping.Tries))
	}
	if c.CommunTries < 1 {
		errs = append(errs, fmt.Errorf("--commun-tries must be at least 1, got %d", c.CommunTries))
	}
	if c.Ping.Weight <= 0 || c.Ping.Weight > 1 {
		errs = append(errs, fmt.Errorf("--ping-weight %v must be in (0, 1]", c.Ping.Weight))
	}
	if c.ScoreLine <= 0 || c.ScoreLine > 100 {
		errs = append(errs, fmt.Errorf("--score-line %v must be in (0, 100]", c.ScoreLine))
	}
	if c.QPS <= 0 || c.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) and --kube-api-burst (%d) must be positive", c.QPS, c.Burst))
	}
	return errors.Join(errs...)
}
