package apiwriter

import (
	"context"
	"crypto/ed25519"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// TestQuietLeaseWhileNoMemberNeedsTheCloud: once every reader reads the
// quiet format, a leader whose members need nothing of the cloud renews its
// zone Lease quietly (format 2, signed as such, with a longer duration) and
// only every QuietRenew, and busily in format 1 otherwise; a member the cloud needs its peers' word for, or a
// renewal short of a majority's votes, makes it busy at once and for a while
// after; a member judged unhealthy needs only a majority of its peers' word
// that it is down, which a quiet renewal carries once it is in.
func TestQuietLeaseWhileNoMemberNeedsTheCloud(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-1", "node-2", "node-3")
	h.fence.term.Store(3)
	committed := map[string]zone.Verdict{}
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		committed[n] = verdict(n, zone.Healthy, 3, h.clock.Now())
	}
	h.w.Follow(fakeNodeVerdicts{h: h, committed: committed})
	src := &fakeEvidence{signers: []string{"node-1", "node-2"}, term: 3, voters: []string{"node-1", "node-2"}}
	h.w.Gather(src)
	cfg := h.w.cfg
	pub := testNodeKey.Public().(ed25519.PublicKey)

	type written struct {
		format   string
		duration int32
		evidence bool
	}
	renew := func(why string, want written) {
		t.Helper()
		if err := h.w.RenewLease(ctx); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, ev := l.Annotations[zone.LeaseEvidenceAnnotation]
		got := written{l.Annotations[zone.LeaseFormatAnnotation], ptr.Deref(l.Spec.LeaseDurationSeconds, 0), ev}
		if got != want {
			t.Errorf("%s: wrote %+v, want %+v", why, got, want)
		}
		if !zonek8s.LeaseClaimOf(l).Verify(l.Annotations[zone.LeaseSignatureAnnotation], pub) {
			t.Errorf("%s: the Lease's signature does not verify", why)
		}
		wantQuiet := 0.0
		if want.format == zone.FormatLevel(zone.LeaseQuietFormat) {
			wantQuiet = 1
		}
		if g := counterValue(t, h.w.metrics.leaseQuiet); g != wantQuiet {
			t.Errorf("%s: zone_lease_quiet = %v, want %v", why, g, wantQuiet)
		}
	}
	busySecs, quietSecs := seconds(cfg.LeaseDuration), seconds(cfg.QuietDuration)
	// Busy renewals are of the busy format of the level every reader
	// reads: format 1 before the webhook says, and while it reads level 1
	// only; the current level's otherwise (1 in this release, higher in the
	// skewnext build).
	one, now, two := zone.FormatLevel(skew.Level1), zone.FormatLevel(zone.LeaseFormat(skew.Current())), zone.FormatLevel(zone.LeaseQuietFormat)
	busyOld := written{format: one, duration: busySecs}
	busy := written{format: now, duration: busySecs}
	quiet := written{format: two, duration: quietSecs}

	renew("no webhook replica says what it reads", busyOld)
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-a": {Level: skew.Current(), Release: "v0.4.0", At: h.clock.Now()}})
	h.clock.Step(cfg.WebhookReadsPeriod)
	renew("every reader reads the quiet format", quiet)

	// Due only at the renewal tick nearest QuietRenew.
	h.clock.Step(cfg.QuietRenew - cfg.LeaseRenew)
	if !h.w.quietNotDue() {
		t.Errorf("a quiet Lease renewed again %s after the last", cfg.QuietRenew-cfg.LeaseRenew)
	}
	h.clock.Step(cfg.LeaseRenew / 2)
	if h.w.quietNotDue() {
		t.Errorf("a quiet Lease not renewed %s after the last", cfg.QuietRenew-cfg.LeaseRenew/2)
	}

	// A member the cloud cannot hear: at once, busy, with its evidence.
	src.mu.Lock()
	src.want = []string{"node-3"}
	src.mu.Unlock()
	if !h.w.newlyWanted() {
		t.Fatal("a member newly in need brings no renewal forward")
	}
	renew("a member needs its peers' word", written{format: now, duration: busySecs, evidence: true})
	if h.w.quietNotDue() {
		t.Error("a busy Lease waits for the quiet period")
	}
	src.mu.Lock()
	src.want = nil
	src.mu.Unlock()
	renew("no member needs it any more, but only just", busy)
	h.clock.Step(quietAfter * cfg.LeaseRenew)
	renew("nothing needed for a while", quiet)

	// A member judged unhealthy needs its peers' word that it is down: busy
	// until a majority of them give it, then a quiet renewal carries it.
	committed["node-2"] = verdict("node-2", zone.Unhealthy, 3, h.clock.Now())
	src.mu.Lock()
	src.want, src.down = []string{"node-2"}, map[string][]string{"node-1": {"node-2"}}
	src.mu.Unlock()
	renew("one of an unhealthy member's two peers finds it down", written{format: now, duration: busySecs, evidence: true})
	src.mu.Lock()
	src.signers = []string{"node-1", "node-2", "node-3"}
	src.down["node-3"] = []string{"node-2"}
	src.mu.Unlock()
	h.clock.Step(quietAfter * cfg.LeaseRenew)
	renew("both of an unhealthy member's peers find it down", written{format: two, duration: quietSecs, evidence: true})
	src.mu.Lock()
	src.signers, src.down = []string{"node-1", "node-2"}, nil
	src.mu.Unlock()

	// Votes short of a majority: busy.
	src.mu.Lock()
	src.want, src.voters = nil, []string{"node-1"}
	src.mu.Unlock()
	renew("the votes of one member of three", busy)
	src.mu.Lock()
	src.voters = []string{"node-1", "node-2"}
	src.mu.Unlock()
	h.clock.Step(quietAfter * cfg.LeaseRenew)
	renew("a majority's votes again", quiet)

	// A webhook replica rolled back to the release before: the next
	// renewal after the reads period is of its format, and busy.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-a": {Level: skew.Level1, Release: "v0.3.9", At: h.clock.Now()}})
	h.clock.Step(cfg.WebhookReadsPeriod)
	renew("a webhook replica reads format 1 only", busyOld)

	// Quiet renewals switched off.
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-a": {Level: skew.Current(), Release: "v0.4.0", At: h.clock.Now()}})
	h.clock.Step(cfg.WebhookReadsPeriod)
	h.w.cfg.QuietRenew = 0
	renew("--zone-lease-quiet-renew 0", busy)
}

// TestQuietLeaseRenewsOnItsOwn: the renewal loop makes a quiet renewal about
// every QuietRenew, not every LeaseRenew, and a busy one as soon as a member
// needs the cloud.
func TestQuietLeaseRenewsOnItsOwn(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-1", "node-2", "node-3")
	h.fence.term.Store(3)
	src := &fakeEvidence{signers: []string{"node-1", "node-2"}, term: 3, voters: []string{"node-1", "node-2"}}
	h.w.Gather(src)
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-a": {Level: skew.Current(), Release: "v0.4.0", At: h.clock.Now()}})
	lease := func() *coordinationv1.Lease {
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return l
	}
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := func(l *coordinationv1.Lease) bool {
		return l.Annotations[zone.LeaseFormatAnnotation] == zone.FormatLevel(zone.LeaseQuietFormat)
	}
	first := lease().Spec.RenewTime.Time
	if !quiet(lease()) {
		t.Fatal("the first renewal is not quiet")
	}
	h.run()
	// Tick by tick: the loop renews once the quiet period is over.
	var renewed time.Time
	poll.UntilTrue(t, waitTimeout, "a quiet renewal", func() bool {
		h.clock.Step(time.Second)
		renewed = lease().Spec.RenewTime.Time
		return renewed.After(first)
	})
	if gap := renewed.Sub(first); gap < h.w.cfg.QuietRenew-h.w.cfg.LeaseRenew/2 {
		t.Errorf("quiet renewals %s apart, want about %s", gap, h.w.cfg.QuietRenew)
	}
	src.mu.Lock()
	src.want = []string{"node-3"}
	src.mu.Unlock()
	poll.UntilTrue(t, waitTimeout, "a busy renewal with evidence", func() bool {
		h.clock.Step(evidenceCheck)
		l := lease()
		_, ev := l.Annotations[zone.LeaseEvidenceAnnotation]
		return !quiet(l) && ev
	})
	if gap := lease().Spec.RenewTime.Time.Sub(renewed); gap >= h.w.cfg.QuietRenew/2 {
		t.Errorf("the busy renewal came %s after the quiet one, want it at once", gap)
	}
}

// TestNewLeaderTakesOverAQuietLease: a handover while the zone is quiet. The
// new leader renews over its predecessor's quiet Lease at once, under its own
// term: busily while the members' votes for its term are short of a majority
// (they have not all seen the election yet), quietly once they are in, and
// the takeover is recorded.
func TestNewLeaderTakesOverAQuietLease(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-1", "node-2", "node-3")
	h.setWebhookReads(map[string]zone.WebhookReplica{"webhook-a": {Level: skew.Current(), Release: "v0.4.0", At: h.clock.Now()}})
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.LeaseName("zone-a"), Namespace: zone.DefaultLeaseNamespace,
		Annotations: map[string]string{zone.LeaseTermAnnotation: "3", zone.LeaseFormatAnnotation: zone.FormatLevel(zone.LeaseQuietFormat)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-3"), LeaseDurationSeconds: ptr.To(seconds(h.w.cfg.QuietDuration)),
			RenewTime: &metav1.MicroTime{Time: h.clock.Now().Add(-20 * time.Second)}}}
	if _, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := &fakeEvidence{signers: []string{"node-1", "node-2"}, term: 4, voters: []string{"node-1"}}
	h.w.Gather(src)
	h.fence.term.Store(4)
	lease := func() *coordinationv1.Lease {
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l := lease()
	if ptr.Deref(l.Spec.HolderIdentity, "") != "node-1" || l.Annotations[zone.LeaseTermAnnotation] != "4" ||
		l.Annotations[zone.LeaseFormatAnnotation] != zone.FormatLevel(zone.LeaseFormat(skew.Current())) || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != seconds(h.w.cfg.LeaseDuration) {
		t.Errorf("takeover with one vote of three: holder %v, annotations %v, duration %v; want node-1's busy renewal under term 4",
			ptr.Deref(l.Spec.HolderIdentity, ""), l.Annotations, ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
	}
	if got := h.eventLog(); !slices.Contains(got, EventLeaderChanged+" "+zone.LeaseName("zone-a")) {
		t.Errorf("events %v, want the takeover recorded", got)
	}
	src.mu.Lock()
	src.voters = []string{"node-1", "node-2"}
	src.mu.Unlock()
	h.clock.Step(quietAfter * h.w.cfg.LeaseRenew)
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if l := lease(); l.Annotations[zone.LeaseFormatAnnotation] != zone.FormatLevel(zone.LeaseQuietFormat) {
		t.Errorf("with a majority's votes for term 4, a while later: annotations %v, want a quiet renewal", l.Annotations)
	}
}
