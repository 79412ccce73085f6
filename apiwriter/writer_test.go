package apiwriter

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

type fakeFence struct {
	term atomic.Uint64
	// unconfirmed makes VerifyLeader fail while term says we lead, as when
	// the quorum answers too slowly.
	unconfirmed atomic.Bool
	verifies    atomic.Int32
	// confirmations, when positive, is how many more VerifyLeader calls
	// succeed; the one after finds the member deposed (term 0), as when a
	// newer leader won the quorum meanwhile.
	confirmations atomic.Int32
}

func (f *fakeFence) VerifyLeader(context.Context) (uint64, error) {
	f.verifies.Add(1)
	if f.confirmations.Load() > 0 && f.confirmations.Add(-1) == 0 {
		f.term.Store(0)
	}
	if t := f.term.Load(); t != 0 && !f.unconfirmed.Load() {
		return t, nil
	}
	return 0, errors.New("not leader")
}

func (f *fakeFence) Term() uint64 { return f.term.Load() }

// testNodeKey is node-1's node key.
var testNodeKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

type fixedMembers int

func (m fixedMembers) MemberCount() int { return int(m) }

// ZoneLevel: every member announces the level this build speaks.
func (fixedMembers) ZoneLevel() skew.Level { return skew.Current() }

// harness wires a Writer to a fake clientset whose API can be made unreachable.
type harness struct {
	t      *testing.T
	w      *Writer
	client *fake.Clientset
	fence  *fakeFence
	clock  *clocktesting.FakeClock
	down   atomic.Bool
	mu     sync.Mutex
	writes []string // "patch node/x", "create lease/y", ...
	// events are the Events recorded, as "reason regarding-name".
	events []string
	// refused counts the named requests made while the API was down:
	// "get nodes/x" -> n.
	refused map[string]int
}

func newHarness(t *testing.T, nodes ...string) *harness {
	t.Helper()
	h := &harness{t: t, fence: &fakeFence{}, clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0)), refused: map[string]int{}}
	var objs []runtime.Object
	for _, n := range nodes {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, ResourceVersion: "1"}})
	}
	h.client = fake.NewClientset(objs...)
	h.client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if h.down.Load() {
			if na, ok := a.(interface{ GetName() string }); ok {
				h.mu.Lock()
				h.refused[fmt.Sprintf("%s %s/%s", a.GetVerb(), a.GetResource().Resource, na.GetName())]++
				h.mu.Unlock()
			}
			return true, nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		}
		if a.GetResource().Resource == "selfsubjectreviews" {
			// The health check: the apiserver says who is asking. It
			// stores nothing, so it is no write.
			return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
				UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:edgequorum-system:edgequorum-agent"}}}, nil
		}
		if ca, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "events" {
			ev := ca.GetObject().(*eventsv1.Event)
			h.mu.Lock()
			h.events = append(h.events, ev.Reason+" "+ev.Regarding.Name)
			h.mu.Unlock()
			return false, nil, nil
		}
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			h.mu.Lock()
			name := ""
			if na, ok := a.(interface{ GetName() string }); ok {
				name = na.GetName()
			}
			if ca, ok := a.(k8stesting.CreateAction); ok {
				name = ca.GetObject().(metav1.Object).GetName()
			}
			if ua, ok := a.(k8stesting.UpdateAction); ok {
				name = ua.GetObject().(metav1.Object).GetName()
			}
			h.writes = append(h.writes, fmt.Sprintf("%s %s/%s", a.GetVerb(), a.GetResource().Resource, name))
			h.mu.Unlock()
		}
		return false, nil, nil
	})
	cfg := DefaultConfig()
	cfg.Zone, cfg.Node, cfg.Clock = "zone-a", "node-1", h.clock
	cfg.NodeKey = testNodeKey
	w, err := New(cfg, wrap.Clientset(h.client), h.fence, fixedMembers(3))
	if err != nil {
		t.Fatal(err)
	}
	h.w = w
	return h
}

func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.w.Run(ctx); close(done) }()
	h.t.Cleanup(func() { cancel(); <-done })
}

func (h *harness) refusedCount(req string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused[req]
}

func (h *harness) eventLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

func (h *harness) writeLog() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.writes...)
}

// nodeWrites is writeLog without the zone Lease.
func (h *harness) nodeWrites() []string {
	var out []string
	for _, w := range h.writeLog() {
		if strings.Contains(w, " nodes/") {
			out = append(out, w)
		}
	}
	return out
}

// setAnnotation puts a on node, with the EdgeQuorum condition that shows it,
// as someone else than the writer would, and forgets that write.
func (h *harness) setAnnotation(node string, a zone.Annotation) {
	h.t.Helper()
	raw, err := json.Marshal(a)
	if err != nil {
		h.t.Fatal(err)
	}
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	n.Annotations = map[string]string{zone.AnnotationKey: string(raw)}
	n.Status.Conditions = []corev1.NodeCondition{corecond.Condition(a, nil)}
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	h.writes = nil
	h.mu.Unlock()
}

func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func (h *harness) annotation(node string) (zone.Annotation, bool) {
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	raw, ok := n.Annotations[zone.AnnotationKey]
	if !ok {
		return zone.Annotation{}, false
	}
	a, err := zone.ParseAnnotation(raw)
	if err != nil {
		h.t.Fatal(err)
	}
	return a, true
}

// waitTimeout bounds every poll.UntilTrue of these tests.
const waitTimeout = 10 * time.Second

func verdict(node string, st zone.State, term uint64, at time.Time) zone.Verdict {
	return zone.Verdict{Node: node, State: st, Pros: 2, Members: 3, Term: term, Leader: "node-1", DecidedAt: at}
}

func TestWritesVerdictOnceAndOnlyOnChange(t *testing.T) {
	h := newHarness(t, "node-2")
	h.fence.term.Store(4)
	h.run()
	at := h.clock.Now()
	h.w.Verdicts(4, []zone.Verdict{verdict("node-2", zone.Healthy, 4, at)}, false)
	poll.UntilTrue(t, waitTimeout, "annotation written", func() bool { _, ok := h.annotation("node-2"); return ok })
	got, _ := h.annotation("node-2")
	want := zone.Annotation{State: zone.Healthy, Zone: "zone-a", Term: 4, Leader: "node-1", At: at.UTC(), Pros: 2, Members: 3}
	if !got.At.Equal(want.At) || got.State != want.State || got.Term != want.Term || got.Zone != want.Zone || got.Members != 3 {
		t.Fatalf("annotation %+v, want %+v", got, want)
	}
	// A resync after a leader change re-delivers the same verdict: no write.
	h.w.Verdicts(5, []zone.Verdict{verdict("node-2", zone.Healthy, 4, at)}, true)
	poll.UntilTrue(t, waitTimeout, "resync handled", func() bool { return h.w.Pending() == 0 })
	if w := h.nodeWrites(); len(w) != 1 || w[0] != "patch nodes/node-2" {
		t.Fatalf("node writes %v, want one patch", w)
	}
	// A real change is written.
	h.w.Verdicts(4, []zone.Verdict{verdict("node-2", zone.Unhealthy, 4, at.Add(time.Second))}, false)
	poll.UntilTrue(t, waitTimeout, "change written", func() bool { a, _ := h.annotation("node-2"); return a.State == zone.Unhealthy })
	if n := len(h.nodeWrites()); n != 2 {
		t.Fatalf("%d node writes, want 2", n)
	}
}

// TestQueuedVerdictOlderThanCommittedIsSkipped: a leader that leads again may
// still hold a verdict queued in an earlier term; once the zone committed a
// newer one for that node, the old one is not written over what stands.
func TestQueuedVerdictOlderThanCommittedIsSkipped(t *testing.T) {
	h := newHarness(t, "node-2")
	h.fence.term.Store(6)
	at := h.clock.Now()
	h.w.Follow(fakeNodeVerdicts{h: h, committed: map[string]zone.Verdict{"node-2": verdict("node-2", zone.Unhealthy, 5, at)}})
	h.run()
	h.w.Verdicts(4, []zone.Verdict{verdict("node-2", zone.Healthy, 4, at.Add(time.Second))}, false)
	poll.UntilTrue(t, waitTimeout, "the queue drained", func() bool { return h.w.Pending() == 0 })
	if w := h.nodeWrites(); len(w) != 0 {
		t.Fatalf("node writes %v, want none for a verdict older than the committed one", w)
	}
	if n := counterValue(t, h.w.metrics.skipped.WithLabelValues(skipSuperseded)); n != 1 {
		t.Errorf("skipped{%s} = %v, want 1", skipSuperseded, n)
	}
}

// TestRestoreWritesLostVerdictsOnly: a Node that lost its committed verdict
// (annotation removed, Node registered anew) or carries one the zone did not
// commit gets it back; a Node that holds it and one whose new verdict is
// already on its way are left alone, and a follower restores nothing.
func TestRestoreWritesLostVerdictsOnly(t *testing.T) {
	h := newHarness(t, "node-2", "node-3")
	h.run()
	at := h.clock.Now()
	v := verdict("node-2", zone.Healthy, 4, at)
	get := func(name string) *corev1.Node {
		n, err := h.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if h.w.Restore(wrap.Node(get("node-2")), v) {
		t.Fatal("a follower restored a verdict")
	}
	h.fence.term.Store(5)
	if !h.w.Restore(wrap.Node(get("node-2")), v) {
		t.Fatal("a node without its verdict was not restored")
	}
	// Written, and done with: a verdict still pending is not restored again.
	poll.UntilTrue(t, waitTimeout, "verdict restored", func() bool {
		a, ok := h.annotation("node-2")
		return ok && a.Term == 4 && a.At.Equal(at) && h.w.Pending() == 0
	})
	if h.w.Restore(wrap.Node(get("node-2")), v) {
		t.Error("a node that holds its verdict was restored again")
	}
	if w := h.nodeWrites(); len(w) != 1 {
		t.Fatalf("node writes %v, want the one restore", w)
	}
	if n := counterValue(t, h.w.metrics.restored); n != 1 {
		t.Errorf("restored = %v, want the one restore", n)
	}

	// An informer view that lags behind the Node queues a check, which
	// reads the Node, writes nothing and is no restore.
	stale := get("node-2")
	delete(stale.Annotations, zone.AnnotationKey)
	unchanged := counterValue(t, h.w.metrics.skipped.WithLabelValues(skipUnchanged))
	if !h.w.Restore(wrap.Node(stale), v) {
		t.Fatal("a view without the verdict queued no check")
	}
	poll.UntilTrue(t, waitTimeout, "the check done", func() bool {
		return h.w.Pending() == 0 && counterValue(t, h.w.metrics.skipped.WithLabelValues(skipUnchanged)) == unchanged+1
	})
	if w := h.nodeWrites(); len(w) != 1 {
		t.Fatalf("node writes %v, want none for a stale view", w)
	}
	if n := counterValue(t, h.w.metrics.restored); n != 1 {
		t.Errorf("restored = %v after a stale view, want 1", n)
	}

	// Someone removes it: it comes back.
	n := get("node-2")
	delete(n.Annotations, zone.AnnotationKey)
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !h.w.Restore(wrap.Node(get("node-2")), v) {
		t.Fatal("a removed verdict was not restored")
	}
	poll.UntilTrue(t, waitTimeout, "verdict restored again", func() bool { _, ok := h.annotation("node-2"); return ok })
	poll.UntilTrue(t, waitTimeout, "the restore counted", func() bool { return counterValue(t, h.w.metrics.restored) == 2 })

	// A verdict the zone did not commit is replaced whatever its decision
	// term, as long as it claims no signing term above ours: the committed
	// verdict is the zone's word, and an earlier leader's forgery must not
	// outlive its leadership.
	newer, _ := json.Marshal(zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: 5, Leader: "node-3"})
	n = get("node-3")
	n.Annotations = map[string]string{zone.AnnotationKey: string(newer)}
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !h.w.Restore(wrap.Node(get("node-3")), verdict("node-3", zone.Healthy, 4, at)) {
		t.Error("a verdict of a newer decision term the zone never committed was left standing")
	}
	poll.UntilTrue(t, waitTimeout, "the committed verdict written over it", func() bool {
		a, ok := h.annotation("node-3")
		return ok && a.State == zone.Healthy && a.Term == 4 && a.SignedTerm == 5 && h.w.Pending() == 0
	})
	// A node whose new verdict waits in the queue lags it by design.
	h.fence.unconfirmed.Store(true) // keeps the queued verdict pending
	h.w.Verdicts(5, []zone.Verdict{verdict("node-2", zone.Unhealthy, 5, at.Add(time.Second))}, false)
	if h.w.Restore(wrap.Node(get("node-2")), verdict("node-2", zone.Unhealthy, 5, at.Add(time.Second))) {
		t.Error("a verdict already queued was queued again as lost")
	}
}

// TestNeverOverwritesHigherTerm: a verdict under a term above ours, written
// by a leader that won a newer term, stays: asking the quorum again after the
// read finds us deposed.
func TestNeverOverwritesHigherTerm(t *testing.T) {
	h := newHarness(t, "node-2")
	h.setAnnotation("node-2", zone.Annotation{State: zone.Healthy, Zone: "zone-a", Term: 9, Leader: "node-3"})

	h.fence.term.Store(7)
	h.fence.confirmations.Store(1) // the newer leader's quorum answers the next check
	h.run()
	h.w.Verdicts(7, []zone.Verdict{verdict("node-2", zone.Unhealthy, 7, h.clock.Now())}, false)
	poll.UntilTrue(t, waitTimeout, "verdict handled", func() bool { return h.w.Pending() == 0 })
	if a, _ := h.annotation("node-2"); a.Term != 9 || a.State != zone.Healthy {
		t.Fatalf("annotation overwritten: %+v", a)
	}
	if w := h.writeLog(); len(w) != 0 {
		t.Fatalf("writes %v, want none", w)
	}
}

func TestFollowerWritesNothing(t *testing.T) {
	h := newHarness(t, "node-2")
	h.run() // fence term 0: not leader
	h.w.Verdicts(3, []zone.Verdict{verdict("node-2", zone.Unhealthy, 3, h.clock.Now())}, false)
	poll.UntilTrue(t, waitTimeout, "pending dropped", func() bool { return h.w.Pending() == 0 })
	h.clock.Step(time.Minute) // lease renewals come due
	if err := h.w.RenewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := h.writeLog(); len(w) != 0 {
		t.Fatalf("a follower wrote %v", w)
	}
}

// TestUnconfirmedLeaderKeepsVerdicts: a leader whose quorum is too slow to
// confirm it still leads, and nobody else will write its verdicts; dropping
// them (as a deposed leader must) left nodes unannotated for good.
func TestUnconfirmedLeaderKeepsVerdicts(t *testing.T) {
	h := newHarness(t, "node-2")
	h.fence.term.Store(2)
	h.fence.unconfirmed.Store(true)
	h.run()
	h.w.Verdicts(2, []zone.Verdict{verdict("node-2", zone.Unhealthy, 2, h.clock.Now())}, false)
	poll.UntilTrue(t, waitTimeout, "a write attempt", func() bool { return h.fence.verifies.Load() > 0 })
	if h.w.Pending() != 1 {
		t.Fatalf("pending %d after an unconfirmed attempt, want the verdict kept", h.w.Pending())
	}
	h.fence.unconfirmed.Store(false)
	poll.UntilTrue(t, waitTimeout, "written after the retry", func() bool {
		h.clock.Step(h.w.cfg.RetryMax)
		return h.w.Pending() == 0
	})
	if a, ok := h.annotation("node-2"); !ok || a.State != zone.Unhealthy {
		t.Fatalf("node-2 annotation %+v (present %v), want unhealthy", a, ok)
	}
}

func TestOutageCoalescesAndFlushesOnReconnect(t *testing.T) {
	h := newHarness(t, "node-2", "node-3")
	h.fence.term.Store(2)
	h.down.Store(true)
	at := h.clock.Now()
	// Three changes of node-2 and one of node-3 arrive during the outage.
	// They are queued before the worker starts, so no attempt can still be
	// carrying an older verdict of node-2 when the apiserver comes back.
	h.w.Verdicts(2, []zone.Verdict{verdict("node-2", zone.Unhealthy, 2, at)}, false)
	h.w.Verdicts(2, []zone.Verdict{verdict("node-2", zone.Healthy, 2, at.Add(time.Second)), verdict("node-3", zone.Healthy, 2, at)}, false)
	h.w.Verdicts(2, []zone.Verdict{verdict("node-2", zone.Unhealthy, 2, at.Add(2*time.Second))}, false)
	h.run()
	poll.UntilTrue(t, waitTimeout, "writes attempted and failed", func() bool {
		ok, since := h.w.ReachableSince()
		return !ok && !since.IsZero() && h.refusedCount("get nodes/node-2") > 0 && h.refusedCount("get nodes/node-3") > 0
	})
	if c := h.w.LastContact(); !c.IsZero() {
		t.Errorf("last contact %s, but the apiserver never answered", c)
	}
	if h.w.Pending() != 2 {
		t.Fatalf("%d verdicts pending during the outage, want 2 (the latest per node)", h.w.Pending())
	}

	h.down.Store(false)
	h.clock.Step(h.w.cfg.HealthPeriod) // the health check notices the apiserver is back
	poll.UntilTrue(t, waitTimeout, "flushed", func() bool { return h.w.Pending() == 0 })
	if a, _ := h.annotation("node-2"); a.State != zone.Unhealthy || !a.At.Equal(at.Add(2*time.Second).UTC()) {
		t.Fatalf("node-2 annotation %+v, want the latest verdict", a)
	}
	// One write per node, and the zone Lease renewed at once: the webhook
	// counts the zone led again from that renewal on. The renewal is the
	// lease loop's, beside the flush, so it may land just after it; the
	// test clock moves no further, so no periodic renewal can follow it.
	var nodes, leases int
	count := func() {
		nodes, leases = 0, 0
		for _, w := range h.writeLog() {
			switch {
			case strings.Contains(w, " nodes/"):
				nodes++
			case strings.Contains(w, " leases/"):
				leases++
			}
		}
	}
	poll.UntilTrue(t, waitTimeout, "the zone Lease renewed after the reconnect", func() bool { count(); return leases > 0 })
	if nodes != 2 || leases != 1 {
		t.Fatalf("writes after reconnect %v, want exactly one per node and the zone Lease's", h.writeLog())
	}
	if !h.w.Reachable() {
		t.Fatal("not reachable after reconnect")
	}
}

func TestZoneLease(t *testing.T) {
	h := newHarness(t)
	h.fence.term.Store(3)
	ctx := context.Background()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := h.client.CoordinationV1().Leases("edgequorum-system").Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "node-1" || l.Annotations[zone.LeaseTermAnnotation] != "3" || l.Annotations[LeaseMembersAnnotation] != "3" {
		t.Fatalf("lease %+v", l)
	}
	// The webhook trusts the Lease for the duration it states: the one the
	// agent derived from its timers, rounded up to whole seconds.
	if want := int32((h.w.cfg.LeaseDuration + time.Second - 1) / time.Second); l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != want {
		t.Fatalf("leaseDurationSeconds %v, want %d", l.Spec.LeaseDurationSeconds, want)
	}
	if c := h.w.LastContact(); !c.Equal(h.clock.Now()) {
		t.Errorf("last contact %s, want the renewal's time %s", c, h.clock.Now())
	}
	first := l.Spec.RenewTime.Time
	h.clock.Step(5 * time.Second)
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, _ = h.client.CoordinationV1().Leases("edgequorum-system").Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if !l.Spec.RenewTime.Time.After(first) {
		t.Fatal("renewTime did not advance")
	}
	// Renewals cost one write each and no read while the cache is good.
	if w := h.writeLog(); len(w) != 2 || w[0] != "create leases/edgequorum-zone-a" || w[1] != "update leases/edgequorum-zone-a" {
		t.Fatalf("writes %v", w)
	}
	// A newer leader took the Lease: we do not renew it.
	l.Annotations[zone.LeaseTermAnnotation] = strconv.Itoa(8)
	h.client.CoordinationV1().Leases("edgequorum-system").Update(ctx, l, metav1.UpdateOptions{})
	h.w.mu.Lock()
	h.w.lease = leaseState{}
	h.w.mu.Unlock()
	h.fence.confirmations.Store(2) // the renewal's own check, then the newer leader's quorum
	if err := h.w.RenewLease(ctx); err == nil {
		t.Fatal("renewed a lease held under a higher term")
	}
	if got := counterValue(t, h.w.metrics.forged.WithLabelValues("lease")); got != 0 {
		t.Errorf("a newer leader's Lease counted as forged %v times", got)
	}
}

// TestForgedTermsDoNotFence: a verdict and a zone Lease written with term
// 2^64-1 (by a stolen credential: no leader ever had it) would fence every
// future leader out for good if a higher term always won. Confirmed by its
// quorum after reading them, the honest leader overwrites both, signed, and
// counts them.
func TestForgedTermsDoNotFence(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-2")
	h.setAnnotation("node-2", zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: math.MaxUint64, Leader: "node-9"})
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: zone.LeaseName("zone-a"), Namespace: zone.DefaultLeaseNamespace,
			Annotations: map[string]string{zone.LeaseTermAnnotation: strconv.FormatUint(math.MaxUint64, 10)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-9"), LeaseDurationSeconds: ptr.To[int32](1 << 30),
			RenewTime: &metav1.MicroTime{Time: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)}},
	}
	if _, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	h.fence.term.Store(3)
	h.run()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatalf("renewing over a forged term: %v", err)
	}
	l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := zonek8s.LeaseClaimOf(l)
	if claim.Holder != "node-1" || claim.Term != 3 || !claim.Renewed.Equal(h.clock.Now()) {
		t.Fatalf("zone Lease after renewal states %+v, want node-1 under term 3 now", claim)
	}
	if !claim.Verify(l.Annotations[zone.LeaseSignatureAnnotation], testNodeKey.Public().(ed25519.PublicKey)) {
		t.Error("the renewed Lease is not signed by node-1's key")
	}

	h.w.Verdicts(3, []zone.Verdict{verdict("node-2", zone.Healthy, 3, h.clock.Now())}, false)
	poll.UntilTrue(t, waitTimeout, "verdict written", func() bool { a, _ := h.annotation("node-2"); return a.Term == 3 })
	a, _ := h.annotation("node-2")
	if a.State != zone.Healthy || a.Signer != "node-1" || !a.Verify("node-2", testNodeKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("verdict after the forged one: %+v, want healthy, signed by node-1", a)
	}
	for _, kind := range []string{"node", "lease"} {
		if got := counterValue(t, h.w.metrics.forged.WithLabelValues(kind)); got != 1 {
			t.Errorf("forged terms counted for %s: %v, want 1", kind, got)
		}
	}
}

// fakeNodeVerdicts is the agent's view for the writer: the fake clientset's
// Nodes and a fixed committed state.
type fakeNodeVerdicts struct {
	h         *harness
	committed map[string]zone.Verdict
}

func (f fakeNodeVerdicts) ZoneNodes() []*kubeclient.Node {
	list, err := f.h.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		f.h.t.Fatal(err)
	}
	var out []*kubeclient.Node
	for i := range list.Items {
		out = append(out, wrap.Node(&list.Items[i]))
	}
	return out
}

func (f fakeNodeVerdicts) CommittedVerdict(node string) (zone.Verdict, bool) {
	v, ok := f.committed[node]
	return v, ok
}

// TestPredecessorVerdictsStand: a new leader leaves standing the committed
// verdicts other members signed, and names each in the zone Lease instead (one
// write per verdict change, not one more per node and handover). A verdict
// whose signature its signer's Node does not verify it signs again.
func TestPredecessorVerdictsStand(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-2", "node-3")
	node3Key := ed25519.NewKeyFromSeed(append([]byte{3}, make([]byte, ed25519.SeedSize-1)...))
	n3, err := h.client.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n3.Annotations = map[string]string{zone.NodeKeyAnnotation: zone.EncodeNodeKey(node3Key.Public().(ed25519.PublicKey))}
	if _, err := h.client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	at := h.clock.Now()
	v := verdict("node-2", zone.Healthy, 4, at)
	v.Leader = "node-3"
	decided := zone.AnnotationFor("zone-a", v, skew.Oldest())
	decided.Sign("node-2", "node-3", node3Key)
	h.setAnnotation("node-2", decided)
	committed := map[string]zone.Verdict{"node-2": v}
	h.w.Follow(fakeNodeVerdicts{h: h, committed: committed})
	h.run()
	h.fence.term.Store(5)
	get := func() *kubeclient.Node {
		n, err := h.client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return wrap.Node(n)
	}

	if h.w.Restore(get(), v) {
		t.Fatal("a verdict signed by the leader that decided it was queued to be signed again")
	}
	endorses := func(want string) {
		t.Helper()
		h.w.mu.Lock()
		h.w.lease = leaseState{}
		h.w.mu.Unlock()
		if err := h.w.RenewLease(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claim := zonek8s.LeaseClaimOf(l)
		if claim.Endorses != want || !claim.Verify(l.Annotations[zone.LeaseSignatureAnnotation], testNodeKey.Public().(ed25519.PublicKey)) {
			t.Fatalf("zone Lease endorses %q (signed: %v), want %q, signed", claim.Endorses,
				claim.Verify(l.Annotations[zone.LeaseSignatureAnnotation], testNodeKey.Public().(ed25519.PublicKey)), want)
		}
	}
	// The Lease names the verdict itself, not its signer: it vouches for
	// nothing else node-3 signs.
	endorses("node-2:" + zone.VerdictDigest(decided.Sig))
	if w := h.nodeWrites(); len(w) != 0 {
		t.Fatalf("node writes %v, want none", w)
	}

	// node-3 wrote node-9's decision: it stands too, the Lease naming it.
	v.Leader = "node-9"
	committed["node-2"] = v
	restored := zone.AnnotationFor("zone-a", v, skew.Oldest())
	restored.Sign("node-2", "node-3", node3Key)
	h.setAnnotation("node-2", restored)
	if h.w.Restore(get(), v) {
		t.Fatal("a committed verdict another member signed was queued to be signed again")
	}
	endorses("node-2:" + zone.VerdictDigest(restored.Sig))

	// Signed with a key node-3's Node does not register: signed again, and
	// the Lease names it no more.
	forged := zone.AnnotationFor("zone-a", v, skew.Oldest())
	forged.Sign("node-2", "node-3", ed25519.NewKeyFromSeed(append([]byte{9}, make([]byte, ed25519.SeedSize-1)...)))
	h.setAnnotation("node-2", forged)
	if !h.w.Restore(get(), v) {
		t.Fatal("a verdict its signer's key does not verify was not queued to be signed again")
	}
	poll.UntilTrue(t, waitTimeout, "verdict signed by node-1", func() bool { a, _ := h.annotation("node-2"); return a.Signer == "node-1" })
	a, _ := h.annotation("node-2")
	if a.Leader != "node-9" || a.Term != 4 || a.SignedTerm != 5 || !a.At.Equal(at) || !a.Verify("node-2", testNodeKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("signed again: %+v, want node-9's decision of term 4, validly signed by node-1 under term 5", a)
	}
	if h.w.Restore(get(), v) {
		t.Error("a verdict this leader signed was queued again")
	}
	h.w.mu.Lock()
	h.w.lease = leaseState{}
	h.w.mu.Unlock()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	l, _ := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
	if e, ok := l.Annotations[zone.LeaseEndorsesAnnotation]; ok {
		t.Errorf("zone Lease still endorses %q with no predecessor's verdict standing", e)
	}
}

func TestUnreachableErr(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{context.DeadlineExceeded, true},
		{apierrors.NewServiceUnavailable("x"), true},
		{apierrors.NewTooManyRequests("x", 1), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{apierrors.NewConflict(gr, "x", errors.New("rv")), false},
		{apierrors.NewForbidden(gr, "x", errors.New("rbac")), false},
		{errors.New("some transport failure"), true},
		{apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		// The apiserver answered: the webhook it had to call did not.
		{apierrors.NewInternalError(errors.New(`failed calling webhook "nodestatus.webhook.edgequorum.io": failed to call webhook: ` +
			`Post "https://edgequorum-webhook.edgequorum-webhook.svc:443/mutate/nodestatus?timeout=5s": dial tcp 10.96.0.9:443: connect: connection refused`)), false},
	} {
		if got := unreachableErr(tc.err); got != tc.want {
			t.Errorf("unreachableErr(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestNewLeaderTakesLeaseAtOnce: the resync a new leader receives makes it
// renew the zone Lease immediately, not one renewal period later.
func TestNewLeaderTakesLeaseAtOnce(t *testing.T) {
	h := newHarness(t)
	h.fence.term.Store(6)
	h.run()
	h.w.Verdicts(6, nil, true)
	poll.UntilTrue(t, waitTimeout, "zone lease taken without waiting for the renewal period", func() bool {
		l, err := h.client.CoordinationV1().Leases("edgequorum-system").Get(context.Background(), zone.LeaseName("zone-a"), metav1.GetOptions{})
		return err == nil && l.Annotations[zone.LeaseTermAnnotation] == "6"
	})
}

// TestVerdictEventsOnChange: the leader records an Event on the Node when a
// verdict changes the node's state, and on the zone Lease when it takes the
// Lease over; a verdict written again with the same state (a new leader's,
// signed again) is no news.
func TestVerdictEventsOnChange(t *testing.T) {
	h := newHarness(t, "node-2")
	h.fence.term.Store(2)
	h.run()
	at := h.clock.Now()
	write := func(term uint64, st zone.State, at time.Time) {
		t.Helper()
		h.fence.term.Store(term)
		h.w.Verdicts(term, []zone.Verdict{verdict("node-2", st, term, at)}, false)
		poll.UntilTrue(t, waitTimeout, "verdict written", func() bool {
			a, ok := h.annotation("node-2")
			return ok && a.State == st && a.Term == term && h.w.Pending() == 0
		})
	}
	write(2, zone.Healthy, at)
	write(3, zone.Healthy, at.Add(time.Second))
	write(3, zone.Unhealthy, at.Add(2*time.Second))
	if err := h.w.RenewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := h.w.RenewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{EventJudgedHealthy + " node-2", EventJudgedUnhealthy + " node-2", EventLeaderChanged + " " + zone.LeaseName("zone-a")}
	if got := h.eventLog(); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// TestConditionShowsTheVerdict: every verdict write carries the EdgeQuorum
// condition that shows it, in the same single write; a Node whose verdict
// stands but whose condition does not show it (written before the condition
// existed, or edited) gets the condition back alone, and a Node that shows
// its verdict costs nothing.
func TestConditionShowsTheVerdict(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "node-2")
	h.fence.term.Store(4)
	h.run()
	get := func() *corev1.Node {
		n, err := h.client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	condition := func() *corev1.NodeCondition {
		c, _ := corecond.FindCondition(get().Status.Conditions)
		return c
	}
	at := h.clock.Now()
	h.w.Verdicts(4, []zone.Verdict{verdict("node-2", zone.Healthy, 4, at)}, false)
	poll.UntilTrue(t, waitTimeout, "healthy condition", func() bool {
		c := condition()
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == zonek8s.ConditionReasonPeersReach
	})
	if c := condition(); c.Message != "zone zone-a: 2 of 2 peers reach it, 0 do not (leader node-1, term 4)" {
		t.Errorf("message %q", c.Message)
	}
	later := at.Add(5 * time.Second)
	h.w.Verdicts(4, []zone.Verdict{verdict("node-2", zone.Unhealthy, 4, later)}, false)
	poll.UntilTrue(t, waitTimeout, "unhealthy condition", func() bool {
		c := condition()
		return c != nil && c.Status == corev1.ConditionFalse && c.Reason == zonek8s.ConditionReasonPeersCannotReach && h.w.Pending() == 0
	})
	if c := condition(); !c.LastTransitionTime.Equal(ptrTime(metav1.NewTime(later).Rfc3339Copy())) {
		t.Errorf("transition time %v, want the unhealthy verdict's %v", c.LastTransitionTime, later)
	}
	if w := h.nodeWrites(); len(w) != 2 {
		t.Fatalf("node writes %v, want one per verdict change, each with its condition", w)
	}

	// Someone marks the condition True; the annotation still stands.
	n := get()
	raw := n.Annotations[zone.AnnotationKey]
	_, i := corecond.FindCondition(n.Status.Conditions)
	n.Status.Conditions[i].Status = corev1.ConditionTrue
	if _, err := h.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := verdict("node-2", zone.Unhealthy, 4, later)
	if !h.w.Restore(wrap.Node(get()), v) {
		t.Fatal("a condition that does not show the verdict was not restored")
	}
	poll.UntilTrue(t, waitTimeout, "condition restored", func() bool {
		c := condition()
		return c != nil && c.Status == corev1.ConditionFalse
	})
	if got := get().Annotations[zone.AnnotationKey]; got != raw {
		t.Errorf("restoring the condition rewrote the annotation:\n%s\nwas\n%s", got, raw)
	}
	if h.w.Restore(wrap.Node(get()), v) {
		t.Error("a node that shows its verdict was restored again")
	}
	if w := h.nodeWrites(); len(w) != 4 {
		t.Fatalf("node writes %v, want the two verdicts, the edit and the one restore", w)
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// TestEndorsementsFitThePolicy: in a zone of many nodes with long names, the
// zone Lease names no more verdicts than deploy/agent's policy lets its
// annotation hold; the rest this leader signs again.
func TestEndorsementsFitThePolicy(t *testing.T) {
	const nodes = 80
	signerKey := ed25519.NewKeyFromSeed(append([]byte{3}, make([]byte, ed25519.SeedSize-1)...))
	names := []string{"node-3"}
	for i := range nodes {
		names = append(names, fmt.Sprintf("%s-%03d", strings.Repeat("n", 240), i))
	}
	h := newHarness(t, names...)
	ctx := context.Background()
	n3, err := h.client.CoreV1().Nodes().Get(ctx, "node-3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n3.Annotations = map[string]string{zone.NodeKeyAnnotation: zone.EncodeNodeKey(signerKey.Public().(ed25519.PublicKey))}
	if _, err := h.client.CoreV1().Nodes().Update(ctx, n3, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	committed := map[string]zone.Verdict{}
	for _, n := range names[1:] {
		v := verdict(n, zone.Healthy, 4, h.clock.Now())
		committed[n] = v
		a := zone.AnnotationFor("zone-a", v, skew.Oldest())
		a.SignedTerm = 4
		a.Sign(n, "node-3", signerKey)
		h.setAnnotation(n, a)
	}
	h.w.Follow(fakeNodeVerdicts{h: h, committed: committed})
	e := h.w.endorsements(5)
	if got := len(zone.FormatEndorsements(e)); got > maxEndorsesBytes || len(e) == 0 || len(e) == nodes {
		t.Fatalf("endorsements name %d of %d verdicts in %d bytes; want some, not all, within %d", len(e), nodes, got, maxEndorsesBytes)
	}
	last := names[len(names)-1]
	n, err := h.client.CoreV1().Nodes().Get(ctx, last, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.fence.term.Store(5)
	if !h.w.Restore(wrap.Node(n), committed[last]) {
		t.Error("a verdict the Lease has no room to name was not queued to be signed again")
	}
}

// fakeEvidence wants evidence for the nodes in want and attests for each
// member in signers; voters vote that node-1 leads in term.
type fakeEvidence struct {
	mu      sync.Mutex
	want    []string
	signers []string
	term    uint64
	voters  []string
	// down is what the signers find down; they reach every other node.
	down map[string][]string
}

func (f *fakeEvidence) Leadership(context.Context) (uint64, []zone.LeaderVote) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []zone.LeaderVote
	for _, s := range f.voters {
		v := zone.LeaderVote{Zone: "zone-a", Term: f.term, Leader: "node-1", Signer: s}
		v.Sign(testNodeKey)
		out = append(out, v)
	}
	return f.term, out
}

// TestLeaseCarriesLeaderVotes: each renewal carries the members' votes that
// the writer leads in the term it renews under, none that are for another
// term; while they are short of a majority of the zone's members, the next
// renewal comes sooner, a bounded number of times per term.
func TestLeaseCarriesLeaderVotes(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.fence.term.Store(3)
	src := &fakeEvidence{term: 3, voters: []string{"node-1"}}
	h.w.Gather(src)
	votes := func() []zone.LeaderVote {
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw, ok := l.Annotations[zone.LeaseLeadershipAnnotation]
		if !ok {
			return nil
		}
		v, err := zone.ParseLeadership("zone-a", raw)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v := votes(); len(v) != 1 || v[0].Term != 3 || v[0].Leader != "node-1" {
		t.Fatalf("votes %+v, want node-1's for term 3", v)
	}
	// One vote of three members: short of a majority.
	soon := 0
	for h.w.votesSoon() {
		soon++
	}
	if soon != soonRetriesPerTerm {
		t.Errorf("%d renewals brought forward, want %d", soon, soonRetriesPerTerm)
	}
	src.mu.Lock()
	src.voters = []string{"node-1", "node-2"}
	src.mu.Unlock()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v := votes(); len(v) != 2 {
		t.Errorf("%d votes, want 2", len(v))
	}
	if h.w.votesSoon() {
		t.Error("a renewal brought forward with a majority's votes")
	}
	// A renewal carries a majority of the members and one more, its own
	// vote first.
	src.mu.Lock()
	src.voters = []string{"node-0", "node-2", "node-3", "node-4", "node-1"}
	src.mu.Unlock()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v := votes(); len(v) != 3 || !slices.ContainsFunc(v, func(v zone.LeaderVote) bool { return v.Signer == "node-1" }) {
		t.Errorf("votes %+v, want 3 of 5 with node-1's (3 members)", v)
	}
	// Votes for another term than the one renewed under are left out.
	h.fence.term.Store(4)
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v := votes(); v != nil {
		t.Errorf("votes %+v carried under term 4", v)
	}
}

// TestFounderRenewsWithVotesAsTheZoneGrows: a zone's founder leads alone for
// a moment, and its lone vote is a majority of the one member it has. When
// the others join, or the zone's Nodes are more than its members, the Lease
// it wrote carries the votes of no majority the webhook counts: it renews
// soon, rather than at its next renewal, when a cut could already be on.
func TestFounderRenewsWithVotesAsTheZoneGrows(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.fence.term.Store(2)
	members := &growingMembers{}
	members.n.Store(1)
	h.w.facts = members
	src := &fakeEvidence{term: 2, voters: []string{"node-1"}}
	h.w.Gather(src)
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if h.w.votesSoon() {
		t.Fatal("a lone founder's Lease brought forward: its vote is its zone's majority")
	}
	members.n.Store(3)
	if !h.w.votesSoon() {
		t.Fatal("the zone grew to 3 members and its Lease carries 1 vote, but no renewal is brought forward")
	}
	soon := 1
	for h.w.votesSoon() {
		soon++
	}
	if soon != soonRetriesPerTerm {
		t.Errorf("%d renewals brought forward, want %d", soon, soonRetriesPerTerm)
	}
	// Growing again starts the count over.
	members.n.Store(5)
	if !h.w.votesSoon() {
		t.Error("the zone grew to 5 members, but no renewal is brought forward")
	}

	// The webhook counts the zone's Nodes: a founder alone among three
	// Nodes is short of their majority too.
	h = newHarness(t, "node-1", "node-2", "node-3")
	h.fence.term.Store(2)
	one := &growingMembers{}
	one.n.Store(1)
	h.w.facts = one
	h.w.Follow(fakeNodeVerdicts{h: h})
	h.w.Gather(&fakeEvidence{term: 2, voters: []string{"node-1"}})
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if !h.w.votesSoon() {
		t.Error("a founder alone among 3 Nodes renews with its lone vote at its next renewal only")
	}
}

// growingMembers is a zone whose member count the test sets.
type growingMembers struct{ n atomic.Int64 }

func (m *growingMembers) MemberCount() int { return int(m.n.Load()) }

func (*growingMembers) ZoneLevel() skew.Level { return skew.Current() }

func (f *fakeEvidence) WantEvidence() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.want)
}

func (f *fakeEvidence) GatherEvidence(_ context.Context, nodes []string) []zone.Attestation {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []zone.Attestation
	for _, s := range f.signers {
		a := zone.Attestation{Zone: "zone-a", Signer: s, At: time.Unix(1_800_000_000, 0)}
		for _, n := range nodes {
			if slices.Contains(f.down[s], n) {
				a.Down = append(a.Down, n)
			} else {
				a.Reach = append(a.Reach, n)
			}
		}
		a.Sign(testNodeKey)
		out = append(out, a)
	}
	return out
}

// TestLeaseCarriesEvidenceOnlyWhileWanted: the zone Lease carries the
// members' attestations while some member needs them, and nothing once none
// does; a member newly in need makes the leader renew at once, not at the
// next renewal.
func TestLeaseCarriesEvidenceOnlyWhileWanted(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t)
	h.fence.term.Store(3)
	// A majority's votes: only a member newly in need brings a renewal
	// forward here.
	src := &fakeEvidence{signers: []string{"node-1", "node-2"}, term: 3, voters: []string{"node-1", "node-2"}}
	h.w.Gather(src)
	evidence := func() (string, bool) {
		l, err := h.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
		if err != nil {
			return "", false
		}
		v, ok := l.Annotations[zone.LeaseEvidenceAnnotation]
		return v, ok
	}
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := evidence(); ok {
		t.Fatalf("evidence %q with no member in need", v)
	}
	h.w.cfg.LeaseRenew = time.Hour // only the evidence check renews here
	h.run()
	src.mu.Lock()
	src.want = []string{"node-3"}
	src.mu.Unlock()
	poll.UntilTrue(t, waitTimeout, "evidence for node-3 in the Lease", func() bool {
		h.clock.Step(evidenceCheck)
		v, ok := evidence()
		atts, err := zone.ParseEvidence("zone-a", v)
		return ok && err == nil && len(atts) == 2 && atts[0].Reaches("node-3") && atts[1].Verify(testNodeKey.Public().(ed25519.PublicKey))
	})
	if g := counterValue(t, h.w.metrics.evidence); g != 1 {
		t.Errorf("evidence_nodes = %v, want 1", g)
	}
	src.mu.Lock()
	src.want = nil
	src.mu.Unlock()
	if err := h.w.RenewLease(ctx); err != nil {
		t.Fatal(err)
	}
	if v, ok := evidence(); ok {
		t.Errorf("evidence %q still carried once no member needs it", v)
	}
}

// TestEvidenceWantedForNodesTheCloudMarkedUnknown: a member whose Node the
// cloud marked Ready Unknown needs its peers' word whatever its agent reports,
// the leader's own Node included (its kubelet may be cut while its agent is
// not); a node the failover marked needs none.
func TestEvidenceWantedForNodesTheCloudMarkedUnknown(t *testing.T) {
	h := newHarness(t, "node-1", "node-2", "node-3")
	ctx := context.Background()
	for name, change := range map[string]func(*corev1.Node){
		"node-1": func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
		},
		"node-3": func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
			n.Annotations = map[string]string{zone.OutOfServiceAnnotation: "2026-11-26T12:00:00Z"}
		},
	} {
		n, err := h.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(n)
		if _, err := h.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.w.Follow(fakeNodeVerdicts{h: h})
	if got := h.w.unmarked([]string{"node-3"}); !slices.Equal(got, []string{"node-1"}) {
		t.Errorf("evidence wanted for %v, want [node-1]: the leader's own Unknown Node, not the one out of service", got)
	}
}
