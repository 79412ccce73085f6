package admission

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// readsEntries is what the webhook's reads Lease says, by replica.
func readsEntries(t *testing.T, env *testEnv) map[string]zone.WebhookReplica {
	t.Helper()
	l, err := env.client.CoordinationV1().Leases(env.cfg.ElectionNamespace).Get(context.Background(), zone.WebhookReadsLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := zone.ParseWebhookReads(l.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestReplicasAnnounceWhatTheyRead: every replica keeps its entry, with the
// level this build reads; a replica that stopped without removing its own
// is dropped once stale; one that stops cleanly removes its own.
func TestReplicasAnnounceWhatTheyRead(t *testing.T) {
	ctx := context.Background()
	env := newWebhook(t, nil)
	leases := env.client.CoordinationV1().Leases(env.cfg.ElectionNamespace)
	other := newAnnouncer(func() Config { c := env.w.cfg; c.Identity = "webhook-killed"; return c }(), leases, env.w.metrics)
	if err := other.write(ctx, true); err != nil {
		t.Fatal(err)
	}
	stop := env.start(t)
	poll.UntilTrue(t, waitTimeout, "this replica's entry", func() bool { _, ok := readsEntries(t, env)["test"]; return ok })
	rs := readsEntries(t, env)
	if e := rs["test"]; e.Level != skew.Current() || e.Release == "" {
		t.Errorf("this replica's entry: %+v, want level %v and a release", e, skew.Current())
	}
	if _, ok := rs["webhook-killed"]; !ok {
		t.Fatal("another replica's fresh entry was dropped")
	}

	// The other replica was killed: its entry ages while this one renews.
	first := rs["test"].At
	poll.UntilTrue(t, waitTimeout, "the killed replica's entry to be dropped", func() bool {
		env.clock.Step(readsRenew)
		_, ok := readsEntries(t, env)["webhook-killed"]
		return !ok
	})
	rs = readsEntries(t, env)
	if !rs["test"].At.After(first) {
		t.Errorf("this replica's entry was not renewed: %v, first written %v", rs["test"].At, first)
	}
	if got := counter(t, env.w.metrics.readsWrites.WithLabelValues("ok")); got < 3 {
		t.Errorf("reads_lease_writes_total{ok} = %v", got)
	}

	stop()
	if rs := readsEntries(t, env); len(rs) != 0 {
		t.Errorf("after a clean stop the Lease still holds %v", rs)
	}
}

// TestAGarbledReadsLeaseIsWrittenAnew: what no leader can read is replaced
// by this replica's entry, not kept or refused.
func TestAGarbledReadsLeaseIsWrittenAnew(t *testing.T) {
	ctx := context.Background()
	env := newWebhook(t, nil)
	leases := env.client.CoordinationV1().Leases(env.cfg.ElectionNamespace)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.WebhookReadsLease,
		Annotations: map[string]string{zone.WebhookReadsAnnotation: "{not json"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.w.announcer.write(ctx, true); err != nil {
		t.Fatal(err)
	}
	if rs := readsEntries(t, env); len(rs) != 1 || rs["test"].Level != skew.Current() {
		t.Errorf("entries %+v, want this replica's alone", rs)
	}
	l, err := leases.Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[zone.LeaseFormatAnnotation]; got != zone.FormatLevel(zone.WebhookReadsFormat) {
		t.Errorf("the Lease says format %q, want %q", got, zone.FormatLevel(zone.WebhookReadsFormat))
	}
}

// TestReplicasOfAReleaseWithoutEntriesHoldTheFormatsDown: a serving replica of
// the webhook's Deployment that keeps no entry (a release before entries,
// say after a roll back) is entered at the oldest level by the replicas that
// do, for as long as it serves, so no leader writes it a format it cannot
// read; a replica that is not ready yet, or a pod of another app, is not.
func TestReplicasOfAReleaseWithoutEntriesHoldTheFormatsDown(t *testing.T) {
	ns := DefaultNamespace
	pod := func(name, app string, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{replicaLabel: app}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	objs := append(testCluster(), pod("test", "edgequorum-webhook", corev1.ConditionTrue),
		pod("webhook-old", "edgequorum-webhook", corev1.ConditionTrue),
		pod("webhook-starting", "edgequorum-webhook", corev1.ConditionFalse),
		pod("other-app", "something-else", corev1.ConditionTrue))
	env := newWebhook(t, func(c *Config) { c.ElectionNamespace = ns }, objs...)
	env.start(t)
	// Entered at a renewal once the pod cache has it (the first write, at
	// start, may come before).
	poll.Until(t, waitTimeout, "the old replica entered", func() (bool, string) {
		env.clock.Step(readsRenew)
		rs := readsEntries(t, env)
		e, ok := rs["webhook-old"]
		return ok && e.Level == skew.Oldest() && e.Release == unannouncedRelease && len(rs) == 2, fmt.Sprintf("%v", rs)
	})
	if l := zone.WebhookLevel(readsEntries(t, env)); l != skew.Oldest() {
		t.Errorf("leaders read level %v, want %v while the old replica serves", l, skew.Oldest())
	}

	// It rolls to this release and writes its own entry: kept as written.
	leases := env.client.CoordinationV1().Leases(ns)
	upgraded := newAnnouncer(func() Config { c := env.w.cfg; c.Identity = "webhook-old"; return c }(), leases, env.w.metrics)
	if err := upgraded.write(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	before := readsEntries(t, env)["test"].At
	poll.Until(t, waitTimeout, "this replica's renewal", func() (bool, string) {
		env.clock.Step(readsRenew)
		if err := upgraded.write(context.Background(), true); err != nil { // it renews its own, as a live replica does
			t.Fatal(err)
		}
		rs := readsEntries(t, env)
		return rs["test"].At.After(before), fmt.Sprintf("%v", rs)
	})
	if e := readsEntries(t, env)["webhook-old"]; e.Level != skew.Current() || e.Release == unannouncedRelease {
		t.Errorf("the upgraded replica's own entry was overwritten: %+v", e)
	}
	if l := zone.WebhookLevel(readsEntries(t, env)); l != skew.Current() {
		t.Errorf("leaders read level %v once every replica reads %v", l, skew.Current())
	}
}

// TestTheTestClientsetRefusesStaleLeaseWrites: the tests of the reads Lease
// rely on optimisticLeases; two replicas that read the same version and both
// write it must not both succeed, or a lost update would pass unseen.
func TestTheTestClientsetRefusesStaleLeaseWrites(t *testing.T) {
	ctx := context.Background()
	env := newWebhook(t, nil)
	leases := env.client.CoordinationV1().Leases(env.cfg.ElectionNamespace)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := leases.Get(ctx, "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := a.DeepCopy()
	a.Annotations = map[string]string{"by": "a"}
	if _, err := leases.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("first write: %v", err)
	}
	b.Annotations = map[string]string{"by": "b"}
	if _, err := leases.Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second write of the same version: %v, want a Conflict", err)
	}
	if l, err := leases.Get(ctx, "l", metav1.GetOptions{}); err != nil || l.Annotations["by"] != "a" {
		t.Fatalf("stored %v (%v), want the first write's", l.Annotations, err)
	}
}
