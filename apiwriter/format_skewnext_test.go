//go:build skewnext

package apiwriter

import (
	"context"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSkewFormatsWaitForEveryWebhookReplica runs the leader of the next
// release (tag skewnext), whose verdict and zone Lease formats are a level
// above this release's: it writes them only while its zone and every
// webhook replica read them, and steps down as soon as one does not, a
// rolled-back webhook within WebhookReadsPeriod.
func TestSkewFormatsWaitForEveryWebhookReplica(t *testing.T) {
	next := skew.Current()
	old, now := zone.FormatLevel(skew.Oldest()), zone.FormatLevel(next)
	h := newHarness(t, "node-2")
	// Busy renewals, which take the newest format their readers read; a
	// quiet one is of zone.LeaseQuietFormat, whatever the level
	// (TestQuietLeaseWhileNoMemberNeedsTheCloud).
	h.w.cfg.QuietRenew = 0
	facts := &levelFacts{}
	facts.level.Store(uint32(next))
	h.w.facts = facts
	h.fence.term.Store(4)
	decided := h.clock.Now()
	step := func(want, why string) {
		t.Helper()
		decided = decided.Add(time.Second)
		v, l := h.written(verdict("node-2", zone.Healthy, 4, decided))
		if v != want || l != want {
			t.Fatalf("%s: wrote a verdict of format %s and a Lease of format %s, want %s", why, v, l, want)
		}
	}
	replica := func(l skew.Level) zone.WebhookReplica {
		return zone.WebhookReplica{Level: l, Release: "v9.9.9", At: h.clock.Now()}
	}

	step(old, "no webhook Lease: a webhook of the release before announcements")
	if got := counterValue(t, h.w.metrics.webhookReads.WithLabelValues("missing")); got != 1 {
		t.Errorf("webhook reads missing = %v, want 1", got)
	}

	// One replica rolled, the other still serves the release before.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-new": replica(next), "webhook-old": replica(skew.Oldest())})
	step(old, "the Lease is read again only after WebhookReadsPeriod")
	reads := h.webhookReads()
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(old, "one webhook replica reads only the older formats")
	if h.webhookReads() != reads+1 {
		t.Errorf("the webhook's Lease was read %d times after the period, want once", h.webhookReads()-reads)
	}

	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-new": replica(next), "webhook-new-2": replica(next)})
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(now, "every webhook replica and every member reads the newer formats")
	if got := counterValue(t, h.w.metrics.formatLevel); got != float64(next) {
		t.Errorf("edgequorum_apiwriter_format_level = %v, want %v", got, next)
	}

	// A member of the release before joins: the zone's level falls, and the
	// formats with it at once, with no read.
	facts.level.Store(uint32(skew.Oldest()))
	reads = h.webhookReads()
	step(old, "a member reads only the older formats")
	facts.level.Store(uint32(next))
	step(now, "the member upgraded again")
	if h.webhookReads() != reads {
		t.Error("the webhook's Lease was read before its period passed")
	}

	// The webhook is rolled back.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-back": replica(skew.Oldest())})
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(old, "the webhook rolled back")

	// What the Lease says cannot be read: the oldest formats.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-new": replica(next)})
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(now, "upgraded again")
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-new": {Level: next, Release: "not a version!"}})
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(old, "a Lease that does not parse")
	if got := counterValue(t, h.w.metrics.webhookReads.WithLabelValues("error")); got != 1 {
		t.Errorf("webhook reads error = %v, want 1", got)
	}

	// A Lease of a format newer than this leader reads: the oldest formats.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-new": replica(next)})
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(now, "a Lease that parses again")
	leases := h.client.CoordinationV1().Leases(zone.DefaultWebhookNamespace)
	l, err := leases.Get(context.Background(), zone.WebhookReadsLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(next + 1)
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(h.w.cfg.WebhookReadsPeriod)
	step(old, "a Lease of a newer format")
}
