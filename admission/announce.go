package admission

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// What this replica reads, told to the zone leaders (zone.WebhookReadsLease):
// each replica keeps its own entry in one Lease of the webhook's namespace,
// writes it at start and every readsRenew, removes it once it has stopped
// answering reviews, and drops the entries of replicas that stopped without
// removing theirs (killed, evicted, their node lost) once they are readsStale
// old. A leader writes a format of a newer level only while every entry
// reads it, so a replica of the release before, still serving in a roll,
// holds the formats down until it is gone.

const (
	// readsRenew is how often a replica renews its entry: two replicas
	// cost the apiserver four small writes a minute, whatever the fleet.
	readsRenew = 30 * time.Second
	// readsStale is how old another replica's entry may grow before a
	// replica drops it: several missed renewals, so that a replica that
	// lost the apiserver for a while is not dropped while it still serves.
	readsStale = 3 * time.Minute
	// readsAttempts bounds the retries of one write that met another
	// replica's (a conflict).
	readsAttempts = 3
)

// announcer keeps this replica's entry.
type announcer struct {
	leases   coordinationclient.LeaseInterface
	name     string
	self     zone.WebhookReplica
	clock    clock.WithTicker
	log      *slog.Logger
	writes   *prometheus.CounterVec
	lastFail string
}

func newAnnouncer(cfg Config, leases coordinationclient.LeaseInterface, m *metrics) *announcer {
	return &announcer{
		leases: leases, name: cfg.Identity, clock: cfg.Clock, log: cfg.Logger, writes: m.readsWrites,
		self: zone.WebhookReplica{Level: skew.Current(), Release: buildinfo.Version()},
	}
}

// run writes the entry now and every readsRenew until ctx ends.
func (a *announcer) run(ctx context.Context) {
	for {
		a.report(a.write(ctx, true))
		select {
		case <-ctx.Done():
			return
		case <-a.clock.After(readsRenew):
		}
	}
}

// withdraw removes the entry, once this replica answers no more reviews.
func (a *announcer) withdraw(ctx context.Context) {
	if err := a.write(ctx, false); err != nil {
		a.log.Warn("could not remove this replica's entry from the webhook's reads Lease; another replica drops it later",
			"lease", zone.WebhookReadsLease, "after", readsStale, "err", err)
	}
}

func (a *announcer) report(err error) {
	if err == nil {
		if a.lastFail != "" {
			a.log.Info("this replica's entry in the webhook's reads Lease is written again", "lease", zone.WebhookReadsLease)
		}
		a.lastFail = ""
		return
	}
	if msg := err.Error(); msg != a.lastFail {
		a.log.Warn("could not write this replica's entry in the webhook's reads Lease: zone leaders keep to the formats of the release before",
			"lease", zone.WebhookReadsLease, "err", err)
		a.lastFail = msg
	}
}

// write puts this replica's entry into the Lease (present) or takes it out,
// dropping stale entries of others, and creates the Lease if it is missing.
func (a *announcer) write(ctx context.Context, present bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	for range readsAttempts {
		if err = a.writeOnce(ctx, present); !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	a.writes.WithLabelValues(result).Inc()
	return err
}

func (a *announcer) writeOnce(ctx context.Context, present bool) error {
	cur, err := a.leases.Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
	exists := err == nil
	if apierrors.IsNotFound(err) {
		if !present {
			return nil
		}
		cur, err = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.WebhookReadsLease}}, nil
	}
	if err != nil {
		return fmt.Errorf("read lease %s: %w", zone.WebhookReadsLease, err)
	}
	rs, perr := zone.ParseWebhookReads(cur.Annotations)
	if perr != nil {
		// Only replicas write it; what they cannot read, no leader can
		// either, and a leader that cannot read it keeps to the oldest
		// formats. Start over from this replica's entry.
		a.log.Warn("the webhook's reads Lease does not parse; writing it anew", "lease", zone.WebhookReadsLease, "err", perr)
		rs = map[string]zone.WebhookReplica{}
	}
	now := a.clock.Now()
	for name, r := range rs {
		if name != a.name && now.Sub(r.At) > readsStale {
			delete(rs, name)
		}
	}
	switch _, mine := rs[a.name]; {
	case present:
		e := a.self
		e.At = now.UTC().Truncate(time.Second)
		rs[a.name] = e
	case !mine:
		return nil // withdrawn already, or dropped by another replica
	default:
		delete(rs, a.name)
	}
	if len(rs) > zone.MaxWebhookReplicas {
		return fmt.Errorf("%d webhook replicas have entries in lease %s, more than the %d a zone leader reads: run fewer replicas",
			len(rs), zone.WebhookReadsLease, zone.MaxWebhookReplicas)
	}
	l := cur.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if err := zone.SetWebhookReads(l.Annotations, rs); err != nil {
		return err
	}
	if !exists {
		_, err = a.leases.Create(ctx, l, metav1.CreateOptions{FieldManager: "edgequorum-webhook"})
	} else {
		_, err = a.leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "edgequorum-webhook"})
	}
	if err != nil {
		return fmt.Errorf("write lease %s: %w", zone.WebhookReadsLease, err)
	}
	return nil
}
