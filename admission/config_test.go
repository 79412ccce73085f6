package admission

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestConfigValidate(t *testing.T) {
	valid := func() Config {
		c := DefaultConfig()
		c.TLSCertFile, c.TLSKeyFile, c.Identity = "c", "k", "me"
		return c
	}
	if err := func() error { c := valid(); return c.Validate() }(); err != nil {
		t.Fatalf("defaults with a TLS pair: %v", err)
	}
	tests := []struct {
		mod  func(*Config)
		flag string
	}{
		{func(c *Config) { c.ListenAddress = "nope" }, "--listen-address"},
		{func(c *Config) { c.TLSCertFile = "" }, "--tls-cert-file"},
		{func(c *Config) { c.TLSKeyFile = "" }, "--tls-key-file"},
		{func(c *Config) { c.LeaseNamespace = "" }, "--lease-namespace"},
		{func(c *Config) { c.ElectionNamespace = "" }, "--leader-election-namespace"},
		{func(c *Config) { c.ElectionNamespace = "Bad_Namespace" }, "--leader-election-namespace"},
		{func(c *Config) { c.ZoneLabel = "" }, "--zone-label"},
		{func(c *Config) { c.MaxZoneLeaseDuration = -time.Second }, "--max-zone-lease-duration"},
		{func(c *Config) { c.MaxCutoffProtection = -time.Second }, "--max-cutoff-protection"},
		{func(c *Config) { c.PodReadySlack = 0 }, "--pod-ready-slack"},
		{func(c *Config) { c.MaxRequestBytes = 1 }, "--max-request-bytes"},
		{func(c *Config) { c.ReadTimeout = 0 }, "--http-read-timeout"},
		{func(c *Config) { c.WriteTimeout = 0 }, "--http-write-timeout"},
		{func(c *Config) { c.IdleTimeout = 0 }, "--http-idle-timeout"},
		{func(c *Config) { c.ShutdownTimeout = 0 }, "--shutdown-timeout"},
		{func(c *Config) { c.RepairPeriod = 0 }, "--repair-period"},
		{func(c *Config) { c.RepairQPS = 0 }, "--repair-qps"},
		{func(c *Config) { c.RepairBurst = 0 }, "--repair-burst"},
		{func(c *Config) { c.LeaderElectionID = "Bad_Name" }, "--leader-election-id"},
		{func(c *Config) { c.Identity = "" }, "--leader-election-identity"},
		{func(c *Config) { c.RenewDeadline = c.RetryPeriod }, "--leader-elect-renew-deadline"},
		{func(c *Config) { c.LeaseDuration = c.RenewDeadline }, "--leader-elect-lease-duration"},
		{func(c *Config) { c.DeadNodeAction = "evict" }, "--dead-node-action"},
		{func(c *Config) { c.DeadNodeAction, c.Repair = DeadNodeActionOutOfService, false }, "--dead-node-action"},
		{func(c *Config) { c.DeadNodeAction, c.DeadNodeDwell = DeadNodeActionOutOfService, 0 }, "--dead-node-dwell"},
		{func(c *Config) { c.DeadNodeAction, c.FailoverMaxPerZone = DeadNodeActionOutOfService, 0 }, "--failover-max-per-zone"},
		{func(c *Config) {
			c.DeadNodeAction, c.FailoverMaxUnhealthy = DeadNodeActionOutOfService, intstr.FromString("ten")
		}, "--failover-max-unhealthy"},
		{func(c *Config) {
			c.DeadNodeAction, c.FailoverMaxUnhealthy = DeadNodeActionOutOfService, intstr.FromString("150%")
		}, "--failover-max-unhealthy"},
		{func(c *Config) {
			c.DeadNodeAction, c.FailoverMaxUnhealthy = DeadNodeActionOutOfService, intstr.FromInt32(-1)
		}, "--failover-max-unhealthy"},
		{func(c *Config) { c.DeadNodeAction, c.FailoverMassOutage = DeadNodeActionOutOfService, 0 }, "--failover-mass-outage-threshold"},
		{func(c *Config) { c.DeadNodeAction, c.FailoverMassOutage = DeadNodeActionOutOfService, 1.5 }, "--failover-mass-outage-threshold"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			c := valid()
			tt.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.flag) {
				t.Errorf("Validate = %v, want an error naming %s", err, tt.flag)
			}
		})
	}
	// Repair settings do not matter with repair off.
	c := valid()
	c.Repair, c.Identity, c.RepairQPS = false, "", 0
	if err := c.Validate(); err != nil {
		t.Errorf("repair off: %v", err)
	}
}

// TestMaxUnhealthy: --failover-max-unhealthy is a count, or a percentage of
// the edge nodes rounded up, as NodeHealthCheck's maxUnhealthy.
func TestMaxUnhealthy(t *testing.T) {
	for _, tt := range []struct {
		v     intstr.IntOrString
		total int
		want  int
	}{
		{intstr.FromInt32(3), 1000, 3},
		{intstr.FromString("10%"), 1000, 100},
		{intstr.FromString("10%"), 11, 2},
		{intstr.FromString("10%"), 3, 1},
		{intstr.FromString("0%"), 50, 0},
		{intstr.FromString("10%"), 0, 0},
		{intstr.Parse("5"), 100, 5},
	} {
		got, err := maxUnhealthy(tt.v, tt.total)
		if err != nil || got != tt.want {
			t.Errorf("maxUnhealthy(%s, %d) = %d, %v; want %d", tt.v.String(), tt.total, got, err, tt.want)
		}
	}
}
