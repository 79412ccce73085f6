package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// TestWebhookTrustsOnlyTheZoneOnRealAPIServer: with the shipped policies, each
// agent's own pod-bound token and the webhook's rule reading a real
// apiserver, an agent of one zone may still write a verdict on a node of
// another zone and a zone Lease in its own name, but neither is honoured; it
// may not write a Lease in another node's name; while that zone is cut off,
// neither an unsigned "unhealthy" verdict nor the removal of the verdict ends
// the node's protection; and a zone Lease "renewed in 2099" by its own leader
// keeps a zone protected no longer than the Lease's duration plus
// --max-cutoff-protection. On the webhook of stop 23, the unsigned verdict and
// the removal each ended the protection.
func TestWebhookTrustsOnlyTheZoneOnRealAPIServer(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns, sa := installAgent(ctx, t, c)
	admin := c.Client()

	// Zone site-a: a1 leads, a2 is vouched for. Zone site-b: b1, whose
	// agent is the intruder.
	type member struct {
		name   string
		key    ed25519.PrivateKey
		client kubernetes.Interface
	}
	members := map[string]*member{}
	var siteA []*testcluster.Kubelet
	for _, m := range []struct{ name, zone string }{{"trust-a1", "site-a"}, {"trust-a2", "site-a"}, {"trust-b1", "site-b"}} {
		k, err := c.AddNode(ctx, testcluster.NodeOptions{Name: m.name, Zone: m.zone})
		if err != nil {
			t.Fatal(err)
		}
		if m.zone == "site-a" {
			siteA = append(siteA, k)
		}
		seed := sha256.Sum256([]byte(m.name))
		pod := createPodOn(ctx, t, admin, ns, sa, "agent-"+m.name, m.name)
		members[m.name] = &member{name: m.name, key: ed25519.NewKeyFromSeed(seed[:]),
			client: tokenClient(t, c, createToken(ctx, t, admin, ns, sa, podRef(pod)))}
	}
	a1, a2, b1 := members["trust-a1"], members["trust-a2"], members["trust-b1"]
	// The lease policy takes effect once the apiserver's policy informer has
	// it; until then, a Lease in another node's name (below) would pass.
	untilDenied(t, leaseWritesPolicy, "an agent creating a Lease in another node's name", func(try int) error {
		return createLease(ctx, b1.client, ns, fmt.Sprintf("edgequorum-probe-%d", try), a1.name)
	})
	for _, m := range members {
		// Each agent registers its own key, as at start.
		poll.Until(t, time.Minute, m.name+"'s agent registering its key", func() (bool, string) {
			err := setNodeKey(ctx, m.client, m.name, zone.EncodeNodeKey(m.key.Public().(ed25519.PublicKey)))
			return err == nil, fmt.Sprint(err)
		})
	}

	// The webhook's rule over informers of this apiserver, on a clock the
	// test moves.
	clk := clocktesting.NewFakeClock(time.Now())
	cfg := admission.DefaultConfig()
	cfg.Clock = clk
	factory := informers.NewSharedInformerFactory(admin, 0)
	nodeLeases := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(admission.NodeLeaseNamespace))
	zoneLeases := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(cfg.LeaseNamespace))
	d, err := admission.NewDecider(cfg, admission.Caches{
		Nodes:      factory.Core().V1().Nodes().Lister(),
		Pods:       factory.Core().V1().Pods().Lister(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Lister().Leases(admission.NodeLeaseNamespace),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Lister().Leases(cfg.LeaseNamespace),
	}, admission.Informers{
		Nodes:      factory.Core().V1().Nodes().Informer(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Informer(),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Informer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []informers.SharedInformerFactory{factory, nodeLeases, zoneLeases} {
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
		t.Cleanup(f.Shutdown)
	}
	poll.UntilTrue(t, time.Minute, "the webhook's rule judging every Node", d.HasSynced)

	const term = 5
	leaseName := zone.LeaseName("site-a")
	// writeLease writes the site-a zone Lease as by's agent does, signed with
	// signer's key.
	writeLease := func(by *member, holder string, renewed time.Time, signer *member) error {
		leases := by.client.CoordinationV1().Leases(ns)
		l, err := leases.Get(ctx, leaseName, metav1.GetOptions{})
		create := apierrors.IsNotFound(err)
		if create {
			l, err = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: ns}}, nil
		}
		if err != nil {
			return err
		}
		l.Labels = map[string]string{zonek8s.ZoneLabel: "site-a"}
		l.Annotations = map[string]string{zone.LeaseTermAnnotation: strconv.Itoa(term)}
		l.Spec.HolderIdentity = ptr.To(holder)
		l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
		l.Spec.RenewTime = &metav1.MicroTime{Time: renewed.Truncate(time.Microsecond)}
		l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(signer.key)
		if create {
			_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else {
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		return err
	}
	// setVerdict writes patch (JSON) as a2's verdict annotation with by's
	// agent's credentials, and waits until the cache shows want.
	setVerdict := func(by *member, patch, want string) {
		t.Helper()
		if err := patchAnnotation(ctx, by.client, a2.name, zone.AnnotationKey, patch, ""); err != nil {
			t.Fatalf("%s's agent writing %s on %s: %v", by.name, patch, a2.name, err)
		}
		poll.UntilTrue(t, time.Minute, "the verdict in the cache", func() bool {
			n, err := factory.Core().V1().Nodes().Lister().Get(a2.name)
			return err == nil && n.Annotations[zone.AnnotationKey] == want
		})
	}
	// writeVerdict puts a site-a verdict on a2, signed by signer (unsigned if
	// nil), with by's agent's credentials; removeVerdict removes it.
	writeVerdict := func(by, signer *member, term uint64, state zone.State) {
		t.Helper()
		a := zone.Annotation{State: state, Zone: "site-a", Term: term, Leader: a1.name, At: time.Now(), Pros: 1, Members: 2}
		if signer != nil {
			a.Leader = signer.name
			a.Sign(a2.name, signer.name, signer.key)
		}
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		setVerdict(by, jsonString(t, string(raw)), string(raw))
	}
	removeVerdict := func(by *member) { setVerdict(by, "null", "") }
	// decide waits until a2 is decided for want, judged by its own
	// annotation or, if refused is set, by its last signed verdict because
	// its annotation was refused for that reason.
	decide := func(want, refused admission.Reason) {
		t.Helper()
		poll.Until(t, time.Minute, fmt.Sprintf("%s decided %s (annotation refused: %q)", a2.name, want, refused), func() (bool, string) {
			dec, _, err := d.DecideNode(a2.name)
			if err != nil {
				t.Fatal(err)
			}
			return dec.Reason == want && dec.Refused == refused, fmt.Sprintf("%+v", dec)
		})
	}

	// The leader's Lease and verdict vouch.
	if err := writeLease(a1, a1.name, clk.Now(), a1); err != nil {
		t.Fatalf("the leader's agent writing its zone Lease: %v", err)
	}
	writeVerdict(a1, a1, term, zone.Healthy)
	decide(admission.ReasonZoneLeaseFresh, "")

	// Another zone's agent may write an edgequorum.io annotation, but its
	// verdict is not honoured, even under term 2^64-1: a2 is judged by the
	// leader's.
	writeVerdict(b1, b1, ^uint64(0), zone.Healthy)
	decide(admission.ReasonZoneLeaseFresh, admission.ReasonSignerNotMember)
	// Nor its Lease: it may hold site-a's Lease in its own name...
	if err := writeLease(b1, b1.name, clk.Now(), b1); err != nil {
		t.Fatalf("%s's agent writing a Lease in its own name: %v", b1.name, err)
	}
	// ...never in the leader's,
	if err := writeLease(b1, a1.name, clk.Now(), b1); !deniedBy(err, leaseWritesPolicy) {
		t.Fatalf("%s's agent writing the Lease in %s's name: %v, want refused by %s", b1.name, a1.name, err, leaseWritesPolicy)
	}
	// ...and the webhook keeps the leader's last renewal.
	writeVerdict(a1, a1, term, zone.Healthy)
	decide(admission.ReasonZoneLeaseFresh, "")

	// Site-a is cut off: its kubelets and its leader go silent after one
	// last renewal, made after every kubelet renewal the webhook saw. The
	// webhook's clock stood still since the test began, so every kubelet
	// renewal so far counts as seen then: bring it to now and have a2's
	// kubelet renew once more first, or a slow setup would make a2 look
	// silent well before the cut.
	if now := time.Now(); now.After(clk.Now()) {
		clk.SetTime(now)
	}
	kubeletLeases := nodeLeases.Coordination().V1().Leases().Lister().Leases(admission.NodeLeaseNamespace)
	before, err := kubeletLeases.Get(a2.name)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, a2.name+"'s kubelet renewing once more", func() (bool, string) {
		l, err := kubeletLeases.Get(a2.name)
		return err == nil && !l.Spec.RenewTime.Equal(before.Spec.RenewTime), "not renewed"
	})
	for _, k := range siteA {
		k.Cut()
	}
	if now := time.Now(); now.After(clk.Now()) {
		clk.SetTime(now)
	}
	last := clk.Now().Truncate(time.Microsecond)
	if err := writeLease(a1, a1.name, last, a1); err != nil {
		t.Fatal(err)
	}
	// The webhook must see that last renewal before its clock moves on: one
	// seen only after the step would count from then, and a2's kubelet,
	// heard before, would look silent before the cut.
	poll.UntilTrue(t, time.Minute, "the last renewal in the webhook's cache", func() bool {
		l, err := zoneLeases.Coordination().V1().Leases().Lister().Leases(cfg.LeaseNamespace).Get(leaseName)
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.Equal(last)
	})
	decide(admission.ReasonZoneLeaseFresh, "")
	clk.Step(15 * time.Second)
	decide(admission.ReasonZoneCutOff, "")
	// The leader cannot write back now. Another zone's agent writes an
	// unsigned "unhealthy" verdict on a2, then removes the verdict: a2 stays
	// protected by the last verdict its zone signed.
	writeVerdict(b1, nil, term+1, zone.Unhealthy)
	decide(admission.ReasonZoneCutOff, admission.ReasonUnsigned)
	removeVerdict(b1)
	decide(admission.ReasonZoneCutOff, admission.ReasonNoVerdict)
	// The link comes back; the leader renews and writes the verdict back.
	for _, k := range siteA {
		if err := k.Reconnect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeLease(a1, a1.name, clk.Now(), a1); err != nil {
		t.Fatal(err)
	}
	writeVerdict(a1, a1, term, zone.Healthy)
	decide(admission.ReasonZoneLeaseFresh, "")

	// The leader renews "in 2099". It counts from when it was seen: fresh for
	// the Lease's 15 s, then the zone's kubelets are asked.
	if err := writeLease(a1, a1.name, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC), a1); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, time.Minute, "the 2099 renewal in the cache", func() bool {
		l, err := zoneLeases.Coordination().V1().Leases().Lister().Leases(ns).Get(leaseName)
		return err == nil && l.Spec.RenewTime.Year() == 2099
	})
	decide(admission.ReasonZoneLeaseFresh, "")
	clk.Step(15 * time.Second)
	if dec, _, _ := d.DecideNode(a2.name); dec.Reason == admission.ReasonZoneLeaseFresh {
		t.Fatalf("a zone Lease renewed in 2099 is still fresh 15 s after it was seen: %+v", dec)
	}
	clk.Step(cfg.MaxCutoffProtection)
	if dec, _, _ := d.DecideNode(a2.name); dec.Vouched {
		t.Fatalf("a zone Lease renewed in 2099 still protects the zone past --max-cutoff-protection: %+v", dec)
	}
}
