package admission

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
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
// holds the formats down until it is gone. A replica of a release that keeps
// no entry (v0.3.0) still reads only the oldest formats: each replica enters
// every serving pod of its own Deployment that has no entry as such
// (unannouncedRelease, at skew.Oldest), so a roll back to such a release
// holds the formats down too.

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
	// unannouncedRelease is the release of an entry a replica writes for a
	// serving pod of its Deployment that keeps none of its own.
	unannouncedRelease = "unannounced"
	// replicaLabel is the label that selects the webhook's Deployment's
	// pods, in every release.
	replicaLabel = "app.kubernetes.io/name"
)

// announcer keeps this replica's entry, and those of the serving replicas
// that keep none.
type announcer struct {
	leases coordinationclient.LeaseInterface
	// pods, when set, lists the pods of the webhook's namespace, with their
	// labels, to find replicas that keep no entry.
	pods     corelisters.PodNamespaceLister
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
	if present {
		for _, name := range a.unannounced(rs) {
			rs[name] = zone.WebhookReplica{Level: skew.Oldest(), Release: unannouncedRelease, At: now.UTC().Truncate(time.Second)}
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

// unannounced lists the other serving replicas of this replica's Deployment
// (its pods with its replicaLabel value, Ready) that have no entry in rs but
// one this replica wrote for them: replicas of a release that keeps none.
func (a *announcer) unannounced(rs map[string]zone.WebhookReplica) []string {
	if a.pods == nil {
		return nil
	}
	self, err := a.pods.Get(a.name)
	if err != nil || self.Labels[replicaLabel] == "" {
		return nil // not a pod of a Deployment this replica can tell
	}
	pods, err := a.pods.List(labels.SelectorFromSet(labels.Set{replicaLabel: self.Labels[replicaLabel]}))
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range pods {
		if c := podReadyCondition(p.Status.Conditions); p.Name == a.name || c == nil || c.Status != corev1.ConditionTrue {
			continue
		}
		if e, ok := rs[p.Name]; ok && e.Release != unannouncedRelease {
			continue
		}
		out = append(out, p.Name)
	}
	return out
}
