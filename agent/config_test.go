package agent

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := DefaultConfig()
	c.KeyFile = "/etc/edgequorum/zone.key"
	c.Raft.Node, c.Raft.AdvertiseAddress, c.Raft.DataDir = "edge-1", "127.0.0.1", "/var/lib/edgequorum"
	return c
}

// TestZoneLeaseCoversAHandover checks the defaults: a leader that lost the
// apiserver hands over, and its successor renews, inside one Lease duration.
func TestZoneLeaseCoversAHandover(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	d := c.ZoneLeaseDuration()
	handover := c.Raft.HandoverBound() + leaseWriteMargin
	if d < c.ZoneLeaseRenew+handover {
		t.Errorf("zone Lease lasts %s; the last renewal (%s before a cut at worst) plus a handover and renewal (%s) do not fit", d, c.ZoneLeaseRenew, handover)
	}
	if d%time.Second != 0 {
		t.Errorf("zone Lease lasts %s, want whole seconds", d)
	}
	if w := c.Warnings(); len(w) > 0 {
		t.Errorf("defaults warn: %v", w)
	}
	t.Logf("default zone Lease duration %s (handover bound %s)", d, c.Raft.HandoverBound())
}

func TestTimersThatCannotFitAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		flags []string
	}{
		{"fail timeout inside one check period", func(c *Config) {
			c.APICheckPeriod, c.Raft.APIServerFailTimeout = 3*time.Second, 5*time.Second
		}, []string{"--apiserver-fail-timeout", "--apiserver-check-period"}},
		{"quiet renewals more often than busy ones", func(c *Config) {
			c.ZoneLeaseQuietRenew = c.ZoneLeaseRenew / 2
		}, []string{"--zone-lease-quiet-renew", "--zone-lease-renew"}},
		{"negative quiet renewal period", func(c *Config) {
			c.ZoneLeaseQuietRenew = -time.Second
		}, []string{"--zone-lease-quiet-renew"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, f := range tc.flags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

func TestLongZoneLeaseWarns(t *testing.T) {
	c := validConfig()
	c.ZoneLeaseRenew, c.Raft.APIServerFailTimeout = 20*time.Second, 15*time.Second
	if err := c.Validate(); err != nil {
		t.Fatalf("refused: %v", err)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, f := range []string{"--zone-lease-renew 20s", "--apiserver-fail-timeout 15s", "--raft-election-timeout 1s", "42s"} {
		if !strings.Contains(w, f) {
			t.Errorf("warning %q does not name %s", w, f)
		}
	}
}

// TestQuietZoneLease: a quiet renewal stays valid for its own period plus
// what a busy one adds (a handover and the next renewal), within the
// webhook's default cap at the defaults, and a longer one warns.
func TestQuietZoneLease(t *testing.T) {
	c := validConfig()
	if d, want := c.ZoneLeaseQuietDuration(), c.ZoneLeaseQuietRenew+c.ZoneLeaseRenew+c.Raft.HandoverBound(); d < want {
		t.Errorf("a quiet zone Lease lasts %s, want at least %s", d, want)
	}
	if d := c.ZoneLeaseQuietDuration(); d > webhookLeaseCap {
		t.Errorf("a quiet zone Lease lasts %s at the defaults, more than the webhook believes (%s)", d, webhookLeaseCap)
	}
	c.ZoneLeaseQuietRenew = 2 * time.Minute
	if err := c.Validate(); err != nil {
		t.Fatalf("refused: %v", err)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, f := range []string{"--zone-lease-quiet-renew 2m0s", "--max-zone-lease-duration"} {
		if !strings.Contains(w, f) {
			t.Errorf("warning %q does not name %s", w, f)
		}
	}
	c.ZoneLeaseQuietRenew = 0
	if w := c.Warnings(); len(w) > 0 {
		t.Errorf("quiet renewals off warn: %v", w)
	}
}

// TestGCPercentOutsideItsRangeIsRefused: a percent so low that the collector
// runs without pause, or so high that the heap is unbounded in practice, is
// refused by name before anything starts.
func TestGCPercentOutsideItsRangeIsRefused(t *testing.T) {
	for _, p := range []int{-1, 0, 9, 1001} {
		c := validConfig()
		c.GCPercent = p
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--gc-percent") {
			t.Errorf("--gc-percent %d: error %v, want one naming the flag", p, err)
		}
	}
	for _, p := range []int{10, DefaultGCPercent, 100, 1000} {
		c := validConfig()
		c.GCPercent = p
		if err := c.Validate(); err != nil {
			t.Errorf("--gc-percent %d refused: %v", p, err)
		}
	}
}
