package apiwriter

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// The formats of what the leader writes to the API (the verdict annotation,
// the zone Lease) keep to the level every reader reads: the zone's members,
// which a new leader of an older release may replace, and every webhook
// replica (zone.WebhookLevel). Below skew.Oldest's formats there is nothing
// to choose, so while the zone's level is the oldest this build reads, as it
// is in every zone until all its members run the newer release, the writer
// reads nothing; above it, it reads the webhook's Lease at most once per
// WebhookReadsPeriod, from the apiserver's cache, which also notices a
// webhook rolled back.

// formatLevel is the level of the formats to write now, reading the
// webhook's Lease when the last read is older than WebhookReadsPeriod.
func (w *Writer) formatLevel(ctx context.Context) skew.Level {
	zl := w.zoneLevel()
	if zl <= skew.Oldest() {
		return w.setFormatLevel(zl)
	}
	w.mu.Lock()
	wl, due := w.webhook.level, w.webhook.read.IsZero() || w.clock.Since(w.webhook.read) >= w.cfg.WebhookReadsPeriod
	w.mu.Unlock()
	if due {
		wl = w.readWebhookLevel(ctx)
	}
	return w.setFormatLevel(min(zl, wl))
}

// zoneLevel is the level every member of the zone reads, or skew.Oldest
// before the member found it.
func (w *Writer) zoneLevel() skew.Level {
	if w.facts == nil {
		return skew.Oldest()
	}
	if l := w.facts.ZoneLevel(); l != skew.Unannounced {
		return l
	}
	return skew.Oldest()
}

// readWebhookLevel reads the webhook's Lease and remembers what it says.
// Anything but a Lease that parses counts as skew.Oldest: the formats every
// supported webhook reads.
func (w *Writer) readWebhookLevel(ctx context.Context) skew.Level {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	l, result, err := skew.Oldest(), "ok", error(nil)
	lease, gerr := w.client.Leases(w.cfg.WebhookNamespace).Get(ctx, zone.WebhookReadsLease,
		metav1.GetOptions{ResourceVersion: "0"})
	switch {
	case apierrors.IsNotFound(gerr):
		result = "missing"
	case gerr != nil:
		result, err = "error", gerr
	default:
		rs, perr := zone.ParseWebhookReads(lease.Annotations)
		if perr != nil {
			result, err = "error", perr
		} else {
			l = zone.WebhookLevel(rs)
		}
	}
	w.metrics.webhookReads.WithLabelValues(result).Inc()
	w.mu.Lock()
	prev, first := w.webhook.level, w.webhook.read.IsZero()
	w.webhook.level, w.webhook.read = l, w.clock.Now()
	w.mu.Unlock()
	if err != nil {
		w.log.Warn("could not read what the webhook reads; writing the oldest formats", "lease",
			w.cfg.WebhookNamespace+"/"+zone.WebhookReadsLease, "err", fmt.Errorf("read webhook level: %w", err))
	} else if first || prev != l {
		w.log.Info("the webhook's replicas read up to", "level", l.String(), "lease", w.cfg.WebhookNamespace+"/"+zone.WebhookReadsLease)
	}
	return l
}

// setFormatLevel shows l in the metrics, logs a change and returns l.
func (w *Writer) setFormatLevel(l skew.Level) skew.Level {
	if prev := skew.Level(w.lastFormat.Swap(uint32(l))); prev != skew.Unannounced && prev != l {
		w.log.Info("the verdict and zone Lease formats changed", "from", prev.String(), "to", l.String(),
			"why", "the lowest level the zone's members and the webhook's replicas read")
	}
	w.metrics.formatLevel.Set(float64(l))
	return l
}
