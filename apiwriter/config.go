package apiwriter

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/zone"
)

// Config configures a Writer. Flag names are given in brackets.
type Config struct {
	// Zone is the zone whose Lease this writer renews.
	Zone string
	// Node is this member's node name, the Lease holder while it leads.
	Node string
	// NodeKey is this member's node key, whose public half its Node
	// registers. The leader signs every verdict and Lease renewal it writes
	// with it: the webhook honours nothing else.
	NodeKey ed25519.PrivateKey
	// LeaseNamespace holds zone Leases [--lease-namespace].
	LeaseNamespace string
	// WebhookNamespace holds the webhook's Lease saying what its replicas
	// read (zone.WebhookReadsLease) [--webhook-namespace].
	WebhookNamespace string
	// WebhookReadsPeriod is how often that Lease is read while the zone
	// could write a format above skew.Oldest: how soon a webhook rolled
	// back to the release before is noticed.
	WebhookReadsPeriod time.Duration
	// LeaseRenew is the zone Lease renewal period [--zone-lease-renew].
	LeaseRenew time.Duration
	// LeaseDuration is written as the Lease's leaseDurationSeconds: how long
	// the webhook trusts a renewal. The agent derives it from its own timers
	// so that a leadership handover always fits inside it.
	LeaseDuration time.Duration
	// QuietRenew is the renewal period while the zone is quiet: no member
	// needs the cloud's attention, so the zone Lease is renewed this
	// seldom, and at once (every LeaseRenew) as soon as one does; zero
	// renews every LeaseRenew always [--zone-lease-quiet-renew]. Used only
	// once every reader reads zone.LeaseQuietFormat.
	QuietRenew time.Duration
	// QuietDuration is a quiet renewal's leaseDurationSeconds: QuietRenew
	// plus what LeaseDuration adds to LeaseRenew.
	QuietDuration time.Duration
	// HealthPeriod is how often the apiserver is asked who we are (a
	// SelfSubjectReview, which no cache can answer)
	// [--apiserver-check-period].
	HealthPeriod time.Duration
	// RetryBase and RetryMax bound the per-node backoff of failed writes.
	RetryBase, RetryMax time.Duration
	// WriteTimeout bounds one API call.
	WriteTimeout time.Duration

	Clock      clock.WithTicker
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults: a 5 s Lease renewal costs one write per zone
// every 5 s however large the zone is.
func DefaultConfig() Config {
	return Config{
		LeaseNamespace:     zone.DefaultLeaseNamespace,
		WebhookNamespace:   zone.DefaultWebhookNamespace,
		WebhookReadsPeriod: time.Minute,
		LeaseRenew:         5 * time.Second,
		LeaseDuration:      15 * time.Second,
		QuietRenew:         40 * time.Second,
		QuietDuration:      50 * time.Second,
		HealthPeriod:       2 * time.Second,
		RetryBase:          200 * time.Millisecond,
		RetryMax:           30 * time.Second,
		WriteTimeout:       10 * time.Second,
	}
}

// Validate names the flag of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.Zone == "" {
		errs = append(errs, errors.New("zone is empty"))
	}
	if c.Node == "" {
		errs = append(errs, errors.New("--node-name is required"))
	}
	if len(c.NodeKey) != ed25519.PrivateKeySize {
		errs = append(errs, errors.New("node key is missing: verdicts and the zone Lease must be signed"))
	}
	if c.LeaseNamespace == "" {
		errs = append(errs, errors.New("--lease-namespace is required"))
	}
	if c.WebhookNamespace == "" {
		errs = append(errs, errors.New("--webhook-namespace is required"))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--zone-lease-renew", c.LeaseRenew}, {"--apiserver-check-period", c.HealthPeriod},
		{"retry base", c.RetryBase}, {"retry max", c.RetryMax}, {"write timeout", c.WriteTimeout},
		{"webhook reads period", c.WebhookReadsPeriod}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.flag, d.v))
		}
	}
	if c.LeaseDuration < 2*c.LeaseRenew {
		errs = append(errs, fmt.Errorf("zone lease duration %s must be at least twice --zone-lease-renew %s, or one slow renewal lets the Lease lapse", c.LeaseDuration, c.LeaseRenew))
	}
	switch {
	case c.QuietRenew < 0:
		errs = append(errs, fmt.Errorf("--zone-lease-quiet-renew must be 0 (renew every --zone-lease-renew) or positive, got %s", c.QuietRenew))
	case c.QuietRenew > 0 && c.QuietRenew < c.LeaseRenew:
		errs = append(errs, fmt.Errorf("--zone-lease-quiet-renew %s must be 0 or at least --zone-lease-renew %s", c.QuietRenew, c.LeaseRenew))
	case c.QuietRenew > 0 && c.QuietDuration < c.QuietRenew+c.LeaseRenew:
		errs = append(errs, fmt.Errorf("quiet zone lease duration %s must be at least --zone-lease-quiet-renew %s plus --zone-lease-renew %s, or a quiet Lease lapses between renewals", c.QuietDuration, c.QuietRenew, c.LeaseRenew))
	}
	return errors.Join(errs...)
}
