package admission

import (
	"strings"
	"testing"
	"time"
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
