package apiwriter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// levelFacts is a zone of three whose level the test sets.
type levelFacts struct{ level atomic.Uint32 }

func (*levelFacts) MemberCount() int { return 3 }

func (f *levelFacts) ZoneLevel() skew.Level { return skew.Level(f.level.Load()) }

// written writes verdict v for node-2 as the leader of term 4 and renews the
// zone Lease, and returns the levels of the formats they were written in.
func (h *harness) written(v zone.Verdict) (verdict, lease string) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.w.writeVerdict(ctx, v); err != nil {
		h.t.Fatal(err)
	}
	if err := h.w.RenewLease(ctx); err != nil {
		h.t.Fatal(err)
	}
	a, ok := h.annotation("node-2")
	if !ok {
		h.t.Fatal("no verdict on node-2")
	}
	l, err := h.client.CoordinationV1().Leases(h.w.cfg.LeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return zone.FormatLevel(a.V), l.Annotations[zone.LeaseFormatAnnotation]
}

// webhookReads counts the reads of the webhook's Lease.
func (h *harness) webhookReads() int {
	n := 0
	for _, a := range h.client.Actions() {
		if a.GetVerb() == "get" && a.GetNamespace() == zone.DefaultWebhookNamespace {
			n++
		}
	}
	return n
}

// TestFormatsOfTheOldestLevelReadNoWebhookLease: while the zone's level is
// the oldest this build reads, as in every zone of a release that changed
// no API format, there is nothing to choose and the writer reads nothing
// more than it did.
func TestFormatsOfTheOldestLevelReadNoWebhookLease(t *testing.T) {
	h := newHarness(t, "node-2")
	facts := &levelFacts{}
	facts.level.Store(uint32(skew.Oldest()))
	h.w.facts = facts
	h.fence.term.Store(4)
	want := zone.FormatLevel(skew.Oldest())
	for i := range 3 {
		h.clock.Step(2 * h.w.cfg.WebhookReadsPeriod)
		v, l := h.written(verdict("node-2", zone.Healthy, 4, h.clock.Now().Add(time.Duration(i)*time.Second)))
		if v != want || l != want {
			t.Fatalf("wrote a verdict of format %s and a Lease of format %s, want %s", v, l, want)
		}
	}
	if n := h.webhookReads(); n != 0 {
		t.Errorf("read the webhook's Lease %d times at the oldest level", n)
	}
	if got := counterValue(t, h.w.metrics.formatLevel); got != float64(skew.Oldest()) {
		t.Errorf("edgequorum_apiwriter_format_level = %v", got)
	}
}

// setWebhookReads makes the webhook's Lease say what the replicas read.
func (h *harness) setWebhookReads(rs map[string]zone.WebhookReplica) {
	h.t.Helper()
	ctx := context.Background()
	leases := h.client.CoordinationV1().Leases(zone.DefaultWebhookNamespace)
	l, err := leases.Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
	if err != nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.WebhookReadsLease, Namespace: zone.DefaultWebhookNamespace}}
		if l, err = leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	l.Annotations = map[string]string{}
	if err := zone.SetWebhookReads(l.Annotations, rs); err != nil {
		h.t.Fatal(err)
	}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}
