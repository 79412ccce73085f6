package admission

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// deciderEnv is a Decider over a fake clientset, with synced informers and a
// fake clock at testNow.
type deciderEnv struct {
	d      *Decider
	client *fake.Clientset
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
}

// settled waits until the Decider's own handlers have had every Lease its
// caches hold. An informer fills its cache before it calls handlers, and the
// handlers stamp a renewal with the webhook's clock when they see it: a test
// that waits on the cache alone and then steps the fake clock can have the
// renewal stamped after the step, as if heard later than it was.
func (env *deciderEnv) settled(t testing.TB) {
	t.Helper()
	poll.UntilTrue(t, waitTimeout, "the webhook's evidence to have every cached Lease", func() bool {
		nodeLeases, err1 := env.d.caches.NodeLeases.List(labels.Everything())
		zoneLeases, err2 := env.d.caches.ZoneLeases.List(labels.Everything())
		if err1 != nil || err2 != nil {
			return false
		}
		e := env.d.evidence
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, l := range nodeLeases {
			if r, ok := e.kubelets[l.Name]; !ok || !r.renewed.Equal(renewTime(l)) {
				return false
			}
		}
		for _, l := range zoneLeases {
			rec, c := e.zones[l.Name], zonek8s.LeaseClaimOf(l)
			if rec == nil || rec.latest.sig != l.Annotations[zone.LeaseSignatureAnnotation] ||
				rec.latest.Holder != c.Holder || rec.latest.Term != c.Term || !rec.latest.Renewed.Equal(c.Renewed) {
				return false
			}
		}
		return true
	})
}

// newTestDecider returns a Decider over a fake clientset holding objs.
func newTestDecider(t *testing.T, mod func(*Config), objs ...runtime.Object) *Decider {
	return newDeciderEnv(t, mod, objs...).d
}

func newDeciderEnv(t testing.TB, mod func(*Config), objs ...runtime.Object) *deciderEnv {
	t.Helper()
	env := &deciderEnv{client: fake.NewClientset(objs...), clock: clocktesting.NewFakeClock(testNow), reg: prometheus.NewRegistry()}
	cfg := DefaultConfig()
	cfg.Clock = env.clock
	if mod != nil {
		mod(&cfg)
	}
	all := informers.NewSharedInformerFactory(env.client, 0)
	nodeLeases := informers.NewSharedInformerFactoryWithOptions(env.client, 0, informers.WithNamespace(NodeLeaseNamespace))
	zoneLeases := informers.NewSharedInformerFactoryWithOptions(env.client, 0, informers.WithNamespace(cfg.LeaseNamespace))
	caches := Caches{
		Nodes:      all.Core().V1().Nodes().Lister(),
		Pods:       all.Core().V1().Pods().Lister(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Lister().Leases(NodeLeaseNamespace),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Lister().Leases(cfg.LeaseNamespace),
	}
	m, err := newMetrics(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	env.d, err = newDecider(cfg, caches, Informers{
		Nodes:      all.Core().V1().Nodes().Informer(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Informer(),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Informer(),
	}, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		for _, f := range []informers.SharedInformerFactory{all, nodeLeases, zoneLeases} {
			f.Shutdown()
		}
	})
	for _, f := range []informers.SharedInformerFactory{all, nodeLeases, zoneLeases} {
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(),
		all.Core().V1().Nodes().Informer().HasSynced,
		all.Core().V1().Pods().Informer().HasSynced,
		nodeLeases.Coordination().V1().Leases().Informer().HasSynced,
		zoneLeases.Coordination().V1().Leases().Informer().HasSynced, env.d.HasSynced) {
		t.Fatal("caches did not sync")
	}
	return env
}

func TestDecide(t *testing.T) {
	ns := zone.DefaultLeaseNamespace
	zoneLease := func(age time.Duration) *coordinationv1.Lease {
		return testLease(ns, zone.LeaseName("z"), testNow.Add(-age))
	}
	kubeletLease := func(node string, age time.Duration) *coordinationv1.Lease {
		return testLease(NodeLeaseNamespace, node, testNow.Add(-age))
	}
	healthy := func(name string) *corev1.Node {
		return testNode(name, "z", zone.Healthy, corev1.ConditionUnknown)
	}
	withAnnotation := func(v string) *corev1.Node {
		n := healthy("n1")
		n.Annotations[zone.AnnotationKey] = v
		return n
	}
	relabeled := healthy("n1")
	relabeled.Labels[zone.DefaultZoneLabel] = "elsewhere"
	unlabeled := healthy("n1")
	delete(unlabeled.Labels, zone.DefaultZoneLabel)
	lasting := func(age time.Duration, seconds *int32) *coordinationv1.Lease {
		l := zoneLease(age)
		l.Spec.LeaseDurationSeconds = seconds
		return signLease(l)
	}
	acquiredOnly := func(age time.Duration) *coordinationv1.Lease {
		l := zoneLease(0)
		l.Spec.AcquireTime, l.Spec.RenewTime = &metav1.MicroTime{Time: testNow.Add(-age)}, nil
		return signLease(l)
	}
	// A member renewing its kubelet Lease now, after the zone Lease went
	// stale: the zone is not cut off, so only the zone Lease can vouch.
	reachable := []runtime.Object{healthy("n2"), kubeletLease("n2", 0)}
	// n1's peers, who attest in the zone Lease that they reach it.
	peers := []runtime.Object{healthy("n2"), healthy("n3")}
	sited := func(name string) *corev1.Node {
		n := healthy(name)
		n.Labels = map[string]string{"example.com/site": "z"}
		return n
	}

	tests := []struct {
		name string
		mod  func(*Config)
		node *corev1.Node // decided; also in the cluster
		objs []runtime.Object
		want Decision
	}{
		{name: "no annotation", node: testNode("n1", "z", "", corev1.ConditionUnknown),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Reason: ReasonNoVerdict}},
		{name: "annotation not JSON", node: withAnnotation("healthy"),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Reason: ReasonBadVerdict}},
		{name: "annotation with a foreign state", node: withAnnotation(`{"state":"pros","zone":"z"}`),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Reason: ReasonBadVerdict}},
		{name: "unhealthy", node: testNode("n1", "z", zone.Unhealthy, corev1.ConditionUnknown),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Zone: "z", Reason: ReasonNotHealthy}},
		{name: "unknown", node: testNode("n1", "z", zone.Unknown, corev1.ConditionUnknown),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Zone: "z", Reason: ReasonNotHealthy}},
		{name: "label names another zone", node: relabeled,
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Zone: "z", Reason: ReasonZoneMismatch}},
		{name: "label gone", node: unlabeled,
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Zone: "z", Reason: ReasonZoneMismatch}},
		{name: "zone lease fresh", node: healthy("n1"),
			objs: append([]runtime.Object{zoneLease(19 * time.Second)}, peers...), want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		// The zone reaches the cloud; the cloud cannot hear n1's kubelet:
		// only a majority of n1's peers, each signing for itself, vouches.
		{name: "zone lease fresh, but n1 has no peers to attest", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Zone: "z", Reason: ReasonNoQuorumEvidence}},
		{name: "zone lease fresh, one peer of three attests", node: healthy("n1"),
			objs: append([]runtime.Object{attested(zoneLease(time.Second), testNow, "n2")}, append(peers, healthy("n4"))...),
			want: Decision{Zone: "z", Reason: ReasonNoQuorumEvidence}},
		{name: "zone lease fresh, the leader attests for n1 and itself twice over", node: healthy("n1"),
			objs: append([]runtime.Object{attested(zoneLease(time.Second), testNow, "n1", "n1", "n2")}, append(peers, healthy("n4"))...),
			want: Decision{Zone: "z", Reason: ReasonNoQuorumEvidence}},
		{name: "zone lease fresh, two peers of three attest", node: healthy("n1"),
			objs: append([]runtime.Object{attested(zoneLease(time.Second), testNow, "n2", "n3")}, append(peers, healthy("n4"))...),
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease fresh, attestations a Lease term old", node: healthy("n1"),
			objs: append([]runtime.Object{attested(zoneLease(time.Second), testNow.Add(-testLeaseDuration*time.Second), "n2", "n3")}, peers...),
			want: Decision{Zone: "z", Reason: ReasonNoQuorumEvidence}},
		{name: "zone lease fresh, an attestation signed with another key", node: healthy("n1"),
			objs: append([]runtime.Object{forgedAttestation(attested(zoneLease(time.Second), testNow, "n2"), "n3")}, peers...),
			want: Decision{Zone: "z", Reason: ReasonNoQuorumEvidence}},
		{name: "zone lease fresh, the kubelet heard: nothing at stake", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Second), kubeletLease("n1", time.Second)}, want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease acquired but never renewed: the agents always renew", node: healthy("n1"),
			objs: append([]runtime.Object{acquiredOnly(time.Second)}, reachable...), want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "zone lease exactly its duration old is stale; a member renews", node: healthy("n1"),
			objs: append([]runtime.Object{zoneLease(20 * time.Second)}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		// The controller manager's grace period plays no part: no member
		// renewed after the zone Lease went stale, so the zone is cut off
		// from that moment, with kubelet Leases 39 s old or 1 s old.
		{name: "zone lease just stale, members renewed before it went stale", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(20 * time.Second), healthy("n2"), kubeletLease("n2", 39*time.Second), kubeletLease("n1", 21*time.Second)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "zone lease within the agents' 15 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(14*time.Second, ptr.To[int32](15))}, append(reachable, healthy("n3"))...),
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease past the agents' 15 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(15*time.Second+time.Millisecond, ptr.To[int32](15))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "a long zone lease duration holds past 20 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(50*time.Second, ptr.To[int32](60))}, append(reachable, healthy("n3"))...),
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "a zone lease duration is believed up to --max-zone-lease-duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(61*time.Second, ptr.To[int32](3600))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "zone lease without a duration is not honoured", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, nil)}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonNoZoneLease}},
		{name: "zone lease with a zero duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, ptr.To[int32](0))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonNoZoneLease}},
		{name: "zone lease with a negative duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, ptr.To[int32](-15))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonNoZoneLease}},
		{name: "the node itself renews its kubelet lease", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Minute), kubeletLease("n1", time.Second)},
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "cut off for an hour", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Hour), healthy("n2"), kubeletLease("n1", time.Hour), kubeletLease("n2", time.Hour+time.Minute)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "cut off longer than the protection", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(25 * time.Hour), kubeletLease("n1", 25*time.Hour)},
			want: Decision{Zone: "z", Reason: ReasonCutOffExpired}},
		{name: "cut-off measured from the newest lease", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(24*time.Hour + 10*time.Second), healthy("n2"), kubeletLease("n1", 25*time.Hour), kubeletLease("n2", 24*time.Hour-5*time.Second)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "a member that renewed long after the zone went stale reaches the cloud", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(30 * time.Hour), healthy("n2"), kubeletLease("n1", 30*time.Hour), kubeletLease("n2", 2*time.Hour)},
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "a kubelet Lease renewed in 2099 counts as renewed when seen: it keeps no zone protected", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Hour), kubeletLease("n1", -time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).Sub(testNow))},
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "cut off, zone lease never seen", node: healthy("n1"),
			objs: []runtime.Object{kubeletLease("n1", time.Hour)},
			want: Decision{Zone: "z", Reason: ReasonNoZoneLease}},
		{name: "no lease at all", node: healthy("n1"),
			want: Decision{Zone: "z", Reason: ReasonNoZoneLease}},
		{name: "zero protection never keeps a cut-off zone", node: healthy("n1"),
			mod:  func(c *Config) { c.MaxCutoffProtection = 0 },
			objs: []runtime.Object{zoneLease(time.Minute), kubeletLease("n1", time.Minute)},
			want: Decision{Zone: "z", Reason: ReasonCutOffExpired}},
		{name: "members of other zones do not count", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Hour), kubeletLease("n1", time.Hour),
				testNode("other", "y", zone.Healthy, corev1.ConditionTrue), kubeletLease("other", time.Second)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "custom zone label", node: func() *corev1.Node {
			n := healthy("n1")
			n.Labels = map[string]string{"example.com/site": "z"}
			return n
		}(), mod: func(c *Config) { c.ZoneLabel = "example.com/site" },
			objs: []runtime.Object{zoneLease(time.Second), sited("n2"), sited("n3")}, want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDecider(t, tt.mod, append(tt.objs, tt.node)...)
			got, err := d.Decide(tt.node)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
			byName, _, err := d.DecideNode(tt.node.Name)
			if err != nil || byName != got {
				t.Errorf("DecideNode = %+v, %v; want %+v", byName, err, got)
			}
		})
	}
}

func TestDecideNodeMissing(t *testing.T) {
	d := newTestDecider(t, nil)
	got, node, err := d.DecideNode("nope")
	if err != nil || node != nil || got != (Decision{Reason: ReasonNodeNotFound}) {
		t.Errorf("DecideNode(missing) = %+v, %v, %v", got, node, err)
	}
}

// TestDecideFollowsTime: the same caches give a different answer as time
// passes, which is why the repair loop rescans.
func TestDecideFollowsTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
	d := newTestDecider(t, func(c *Config) { c.Clock = clk },
		n, testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testLease(NodeLeaseNamespace, "n1", testNow))
	steps := []struct {
		after time.Duration
		want  Reason
	}{
		{0, ReasonZoneLeaseFresh},
		// Stale, and no member renewed since: cut off at once, whatever
		// the controller manager's grace period.
		{20 * time.Second, ReasonZoneCutOff},
		{24 * time.Hour, ReasonCutOffExpired},
	}
	for _, s := range steps {
		clk.Step(s.after)
		got, err := d.Decide(n)
		if err != nil || got.Reason != s.want {
			t.Errorf("at +%s: %+v, %v; want %s", clk.Since(testNow), got, err, s.want)
		}
	}
}

// TestDecideTrustsOnlyWhatTheZoneSigned: a healthy verdict counts only if the
// zone Lease holder (a member of the node's zone, with the key its own Node
// registers) signed it for this node, under a term no higher than the
// Lease's. Everything else is refused and counted once by reason.
func TestDecideTrustsOnlyWhatTheZoneSigned(t *testing.T) {
	ns := zone.DefaultLeaseNamespace
	verdict := func(node string, change func(*zone.Annotation), signer string) *corev1.Node {
		n := testNode(node, "z", "", corev1.ConditionUnknown)
		a := zone.Annotation{State: zone.Healthy, Zone: "z", Term: testTerm, Leader: "n1", At: nodeLost, Pros: 2, Members: 3}
		if change != nil {
			change(&a)
		}
		if signer != "" {
			a.Sign(node, signer, testKey(signer))
		}
		b, _ := json.Marshal(a)
		n.Annotations[zone.AnnotationKey] = string(b)
		return n
	}
	copied := verdict("n2", nil, "n1")
	copied.Name = "n1"
	keyless := testNode("n3", "z", "", corev1.ConditionTrue)
	delete(keyless.Annotations, zone.NodeKeyAnnotation)
	lease := func(change func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l := testLease(ns, zone.LeaseName("z"), testNow.Add(-time.Second))
		if change != nil {
			change(l)
		}
		return l
	}
	// n2 and n4 attest, in the zone Lease, that they reach n1: a majority of
	// its peers.
	members := []runtime.Object{testNode("n2", "z", "", corev1.ConditionTrue), keyless, testNode("n4", "z", "", corev1.ConditionTrue),
		testNode("y1", "y", "", corev1.ConditionTrue)}
	tests := []struct {
		name  string
		node  *corev1.Node
		lease *coordinationv1.Lease
		want  Reason
	}{
		{"signed by the holder", verdict("n1", nil, "n1"), lease(nil), ReasonZoneLeaseFresh},
		{"a decision of an earlier term, signed by the holder", verdict("n1", func(a *zone.Annotation) { a.Term, a.Leader = 3, "n2" }, "n1"), lease(nil), ReasonZoneLeaseFresh},
		{"unsigned", verdict("n1", nil, ""), lease(nil), ReasonUnsigned},
		{"signed by a node of another zone", verdict("n1", nil, "y1"), lease(nil), ReasonSignerNotMember},
		{"signed by a node that is not there", verdict("n1", nil, "ghost"), lease(nil), ReasonSignerNotMember},
		{"signed by a member without a key", verdict("n1", nil, "n3"), lease(nil), ReasonSignerNoKey},
		{"copied from another node", copied, lease(nil), ReasonBadSignature},
		{"signed by a member that does not hold the Lease", verdict("n1", nil, "n2"), lease(nil), ReasonSignerNotLeader},
		{"a term above the Lease's (2^64-1)", verdict("n1", func(a *zone.Annotation) { a.Term = math.MaxUint64 }, "n1"), lease(nil), ReasonTermAheadOfLease},
		{"the Lease's term under another leader", verdict("n1", func(a *zone.Annotation) { a.Leader = "n2" }, "n1"), lease(nil), ReasonLeaderMismatch},
		{"an unsigned Lease", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			delete(l.Annotations, zone.LeaseSignatureAnnotation)
		}), ReasonNoZoneLease},
		{"a Lease held by a node of another zone", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Spec.HolderIdentity = ptr.To("y1")
			signLease(l)
		}), ReasonNoZoneLease},
		{"a Lease whose zone label names another zone", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Labels[zonek8s.ZoneLabel] = "y"
			signLease(l)
		}), ReasonNoZoneLease},
		{"a Lease whose endorsements do not parse", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Annotations[zone.LeaseEndorsesAnnotation] = "n2"
			signLease(l)
		}), ReasonNoZoneLease},
		{"a Lease changed after it was signed", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		}), ReasonNoZoneLease},
		// The skew policy: agents upgraded before their webhook.
		{"a verdict of a newer release's format", verdict("n1", func(a *zone.Annotation) { a.V = skew.Current() + 1 }, "n1"), lease(nil), ReasonNewerFormat},
		{"a Lease of a newer release's format", verdict("n1", nil, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(skew.Current() + 1)
			signLease(l)
		}), ReasonNoZoneLease},
		{"the formats of this release", verdict("n1", func(a *zone.Annotation) { a.V = zone.VerdictFormat(skew.Current()) }, "n1"), lease(func(l *coordinationv1.Lease) {
			l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(zone.LeaseFormat(skew.Current()))
			signLease(l)
		}), ReasonZoneLeaseFresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newDeciderEnv(t, nil, append([]runtime.Object{tt.node, tt.lease}, members...)...)
			for range 2 {
				got, err := env.d.Decide(tt.node)
				if err != nil || got.Reason != tt.want || got.Vouched != (tt.want == ReasonZoneLeaseFresh) {
					t.Fatalf("Decide = %+v, %v; want %s", got, err, tt.want)
				}
			}
			if tt.want == ReasonZoneLeaseFresh {
				return
			}
			// Counted once, though decided twice: a Node is reviewed with
			// every status post.
			if got := testutil.ToFloat64(env.d.evidence.metrics.verdictsRefused.WithLabelValues(string(tt.want))); got != 1 {
				t.Errorf("verdicts_refused_total{%s} = %v, want 1", tt.want, got)
			}
		})
	}
}

// TestDecideTimesLeasesByItsOwnClock: a zone Lease renewed "in 2099" counts
// as renewed when the webhook saw it, so a zone that then dies is protected
// for the Lease's duration and the cut-off window, not until 2099.
func TestDecideTimesLeasesByItsOwnClock(t *testing.T) {
	future := testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
	env := newDeciderEnv(t, nil, n, future, testLease(NodeLeaseNamespace, "n1", testNow.Add(-time.Second)),
		testNode("n2", "z", "", corev1.ConditionTrue), testNode("n3", "z", "", corev1.ConditionTrue))
	for _, s := range []struct {
		after time.Duration
		want  Reason
	}{
		{0, ReasonZoneLeaseFresh},
		{testLeaseDuration*time.Second - time.Millisecond, ReasonZoneLeaseFresh},
		{time.Millisecond, ReasonZoneCutOff},
		{24 * time.Hour, ReasonCutOffExpired},
	} {
		env.clock.Step(s.after)
		if got, err := env.d.Decide(n); err != nil || got.Reason != s.want {
			t.Fatalf("at +%s: %+v, %v; want %s", env.clock.Since(testNow), got, err, s.want)
		}
	}
}

// TestDecideKeepsTheLastHonouredLease: a write the zone did not sign neither
// renews its Lease nor takes it away; the last signed renewal ages as before.
func TestDecideKeepsTheLastHonouredLease(t *testing.T) {
	ctx := context.Background()
	n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
	env := newDeciderEnv(t, nil, n, testNode("y1", "y", "", corev1.ConditionTrue),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testLease(NodeLeaseNamespace, "n1", testNow.Add(-time.Second)))
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	forge := func(change func(*coordinationv1.Lease)) {
		l, err := leases.Get(ctx, zone.LeaseName("z"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
		change(l)
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilTrue(t, waitTimeout, "the forged Lease in the cache", func() bool {
			c, _ := env.d.caches.ZoneLeases.Get(zone.LeaseName("z"))
			return c != nil && c.Spec.RenewTime.Equal(l.Spec.RenewTime)
		})
		env.settled(t)
	}
	env.clock.Step(10 * time.Second)
	// Renewed now, by a node of another zone (signed with its own key).
	forge(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("y1"); signLease(l) })
	env.clock.Step(10 * time.Second)
	if got, _ := env.d.Decide(n); got.Reason != ReasonZoneCutOff {
		t.Fatalf("after a forged renewal, the zone's own Lease went stale on time: %+v, want %s", got, ReasonZoneCutOff)
	}
	if got := testutil.ToFloat64(env.d.evidence.metrics.leasesRefused.WithLabelValues(leaseHolderNotMember)); got != 1 {
		t.Errorf("zone_leases_refused_total{%s} = %v, want 1", leaseHolderNotMember, got)
	}
}

// TestDecideAcrossAHandover: when the zone Lease changes holder, a verdict
// its predecessor signed counts as long as the new holder's Lease names that
// very verdict, or, in the release before's form, vouches for that
// predecessor up to the verdict's term (the verdict here carries no signing
// term, as that release's did); a verdict the Lease does not name never
// counts.
func TestDecideAcrossAHandover(t *testing.T) {
	n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown) // decided and signed by n1, term 7
	env := newDeciderEnv(t, nil, n, testNode("n2", "z", "", corev1.ConditionTrue),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testLease(NodeLeaseNamespace, "n1", testNow))
	if got, _ := env.d.Decide(n); !got.Vouched {
		t.Fatalf("before the handover: %+v", got)
	}
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	for _, tt := range []struct {
		endorses string
		want     Reason
	}{
		{"n1=7", ReasonZoneLeaseFresh},
		{"n1=6", ReasonSignerNotLeader}, // not up to the verdict's term
		{"", ReasonSignerNotLeader},
		{"n3=7", ReasonSignerNotLeader},
		{"n1=7,n3=9", ReasonZoneLeaseFresh},
		// This release's form names the verdict itself.
		{"n1:" + zone.VerdictDigest([]byte("another verdict")), ReasonSignerNotLeader},
		{"n2:" + zone.VerdictDigest(verdictSig(t, n)), ReasonSignerNotLeader},
		{"n1:" + zone.VerdictDigest(verdictSig(t, n)), ReasonZoneLeaseFresh},
	} {
		env.clock.Step(time.Second)
		handOver(t, env, "n2", tt.endorses)
		if got, _ := env.d.Decide(n); got.Reason != tt.want {
			t.Errorf("the predecessor's verdict under a Lease endorsing %q: %+v, want %s", tt.endorses, got, tt.want)
		}
	}
	// A webhook that starts now reads the same from the Lease alone.
	if got, _ := newTestDecider(t, nil, n, testNode("n2", "z", "", corev1.ConditionTrue), mustGetLease(t, leases)).Decide(n); !got.Vouched {
		t.Errorf("a fresh webhook on the predecessor's verdict: %+v", got)
	}
}

// TestDecideEndsAnEarlierLeadersWordWithItsLeadership: a leader that signs a
// healthy verdict for a node its zone judged dead is believed while it holds
// the zone Lease (the quorum's word is the remedy for that); once the Lease
// moves on, the forgery counts no more, though the new holder still vouches
// for the old leader's committed verdicts, and the new leader's write-back of
// the committed verdict, decided before the forgery, is honoured, not refused
// as a replay. Every verdict here is signed under a term (SignedTerm).
func TestDecideEndsAnEarlierLeadersWordWithItsLeadership(t *testing.T) {
	ctx := context.Background()
	sign := func(node, signer string, a zone.Annotation) string {
		a.Sign(node, signer, testKey(signer))
		b, _ := json.Marshal(a)
		return string(b)
	}
	committed := zone.Annotation{State: zone.Unhealthy, Zone: "z", Term: testTerm, Leader: "n1", At: nodeLost, Cons: 2, Members: 4, SignedTerm: testTerm}
	other := zone.Annotation{State: zone.Healthy, Zone: "z", Term: testTerm, Leader: "n1", At: nodeLost, Pros: 2, Members: 4, SignedTerm: testTerm}
	dead := testNode("n3", "z", "", corev1.ConditionUnknown)
	dead.Annotations[zone.AnnotationKey] = sign("n3", "n1", committed)
	cut := testNode("n4", "z", "", corev1.ConditionUnknown)
	cut.Annotations[zone.AnnotationKey] = sign("n4", "n1", other)
	env := newDeciderEnv(t, nil, testNode("n1", "z", "", corev1.ConditionTrue), testNode("n2", "z", "", corev1.ConditionTrue), dead, cut,
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow))
	nodes := env.client.CoreV1().Nodes()
	set := func(node, raw string) *corev1.Node {
		t.Helper()
		n, err := nodes.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations[zone.AnnotationKey] = raw
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilTrue(t, waitTimeout, node+"'s verdict in the cache", func() bool {
			c, err := env.d.caches.Nodes.Get(node)
			return err == nil && c.Annotations[zone.AnnotationKey] == raw
		})
		c, _ := env.d.caches.Nodes.Get(node)
		return c
	}

	// n1, leading, forges: honoured while it holds the Lease.
	env.clock.Step(time.Second)
	forged := committed
	forged.State, forged.At, forged.Pros, forged.Cons = zone.Healthy, env.clock.Now(), 3, 0
	n3 := set("n3", sign("n3", "n1", forged))
	if got, _ := env.d.Decide(n3); !got.Vouched {
		t.Fatalf("the Lease holder's own verdict: %+v, want vouched", got)
	}

	// n2 takes over under the next term and names the verdicts of n1's
	// that the zone committed: n4's, not the forgery on n3.
	var n4Verdict zone.Annotation
	if n4, err := env.d.caches.Nodes.Get("n4"); err == nil {
		n4Verdict, _ = zone.ParseAnnotation(n4.Annotations[zone.AnnotationKey])
	}
	handOver(t, env, "n2", zone.FormatEndorsements(map[string]string{"n4": zone.VerdictDigest(n4Verdict.Sig)}))
	if got, _ := env.d.Decide(n3); got.Vouched || got.Reason != ReasonSignerNotLeader {
		t.Errorf("n1's forgery under n2's Lease: %+v, want not vouched, %s", got, ReasonSignerNotLeader)
	}
	n4, _ := env.d.caches.Nodes.Get("n4")
	if got, _ := env.d.Decide(n4); !got.Vouched {
		t.Errorf("n1's committed verdict the new Lease names: %+v, want vouched", got)
	}

	// n2 writes the committed verdict back, signed under its term: the
	// verdict it states was decided before the forgery, and counts.
	back := committed
	back.SignedTerm = testTerm + 1
	n3 = set("n3", sign("n3", "n2", back))
	if got, _ := env.d.Decide(n3); got.Reason != ReasonNotHealthy || got.Refused != "" {
		t.Errorf("the new leader's write-back of the committed verdict: %+v, want honoured (%s)", got, ReasonNotHealthy)
	}
	// And the forgery, replayed, is refused as what it is: older by term.
	n3 = set("n3", sign("n3", "n1", forged))
	if got, _ := env.d.Decide(n3); got.Vouched || got.Refused == "" {
		t.Errorf("the forgery replayed after the write-back: %+v, want refused and judged by the write-back", got)
	}
}

// attested replaces l's evidence with attestations made at at by signers,
// each reaching every test member of its zone but itself (a signer named
// twice attests twice).
func attested(l *coordinationv1.Lease, at time.Time, signers ...string) *coordinationv1.Lease {
	z := l.Labels[zonek8s.ZoneLabel]
	var atts []zone.Attestation
	for i, signer := range signers {
		a := zone.Attestation{Zone: z, Signer: signer, At: at.Add(time.Duration(i) * time.Millisecond)}
		for _, n := range testMembers[z] {
			if n != signer {
				a.Reach = append(a.Reach, n)
			}
		}
		a.Sign(testKey(signer))
		atts = append(atts, a)
	}
	l.Annotations[zone.LeaseEvidenceAnnotation] = zone.FormatEvidence(atts)
	return l
}

// forgedAttestation adds to l's evidence an attestation in signer's name,
// signed with a key its Node does not register.
func forgedAttestation(l *coordinationv1.Lease, signer string) *coordinationv1.Lease {
	z := l.Labels[zonek8s.ZoneLabel]
	atts, err := zone.ParseEvidence(z, l.Annotations[zone.LeaseEvidenceAnnotation])
	if err != nil {
		panic(err)
	}
	a := zone.Attestation{Zone: z, Signer: signer, At: testNow, Reach: testMembers[z]}
	a.Sign(testKey("thief"))
	l.Annotations[zone.LeaseEvidenceAnnotation] = zone.FormatEvidence(append(atts, a))
	return l
}

// TestDecideProtectsInACutOnlyWhatWasAlive: a zone gone dark as a whole is
// judged by its last verdicts only for the nodes the cloud saw alive when it
// went dark: n1's kubelet, silent for 30 s when the zone Lease was last
// renewed (its renewals every 5 s), had died before, and its leader's
// "healthy" buys it nothing, unless a majority of its peers attested then that
// they reach it. Times are the webhook's: when it saw each renewal.
func TestDecideProtectsInACutOnlyWhatWasAlive(t *testing.T) {
	for _, tt := range []struct {
		name    string
		signers []string
		want    Reason
	}{
		{"no evidence when the zone went dark", nil, ReasonSilentBeforeCut},
		{"its peers attested then", []string{"n2"}, ReasonZoneCutOff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
			env := newDeciderEnv(t, nil, n, testNode("n2", "z", "", corev1.ConditionTrue),
				attested(testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testNow),
				testLease(NodeLeaseNamespace, "n1", testNow), testLease(NodeLeaseNamespace, "n2", testNow))
			env.clock.Step(30 * time.Second)
			renewLease(t, env, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
			renewLease(t, env, zone.DefaultLeaseNamespace, zone.LeaseName("z"), func(l *coordinationv1.Lease) *coordinationv1.Lease {
				return signLease(attested(l, env.clock.Now(), tt.signers...))
			})
			if got, _ := env.d.Decide(n); got.Reason != ReasonNoQuorumEvidence && got.Reason != ReasonZoneLeaseFresh {
				t.Fatalf("while connected: %+v", got)
			}
			env.clock.Step(testLeaseDuration*time.Second + time.Second) // dark
			got, err := env.d.Decide(n)
			if err != nil || got.Reason != tt.want || got.Vouched != (tt.want == ReasonZoneCutOff) {
				t.Errorf("in the cut: %+v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// renewLease renews the named Lease at the test clock's time, changed by
// change, and waits until the Decider's cache holds the renewal.
func renewLease(t *testing.T, env *deciderEnv, namespace, name string, change func(*coordinationv1.Lease) *coordinationv1.Lease) {
	t.Helper()
	ctx := context.Background()
	leases := env.client.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
	if _, err := leases.Update(ctx, change(l), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, waitTimeout, name+"'s renewal seen", func() bool {
		if namespace == NodeLeaseNamespace {
			c, _ := env.d.caches.NodeLeases.Get(name)
			return c != nil && c.Spec.RenewTime.Equal(l.Spec.RenewTime)
		}
		c, _ := env.d.caches.ZoneLeases.Get(name)
		return c != nil && c.Spec.RenewTime.Equal(l.Spec.RenewTime)
	})
	env.settled(t)
}

// TestDecideDownBeforeCutOutlivesTheLeadersWord: n3 dies right after its
// kubelet renewed, so the cloud saw it alive 4 s before the zone went dark,
// well inside a renew interval and a half. Its peers n1 (the leader) and n2
// had said it down before the cut; then a thief with the leader's key signs
// n3 healthy and takes back the leader's word with a later attestation. In
// the cut, the peers' word stands: what a member once said counts, not only
// its newest attestation, and the leader's word alone is no majority.
func TestDecideDownBeforeCutOutlivesTheLeadersWord(t *testing.T) {
	for _, tt := range []struct {
		name string
		// downBy attest n3 down 3 s after its kubelet renewed.
		downBy []string
		// renewedAfter: n3's kubelet renews after its peers' word.
		renewedAfter bool
		want         Reason
	}{
		{"a majority of its peers said it down", []string{"n1", "n2"}, false, ReasonDownBeforeCut},
		{"only its leader said it down", []string{"n1"}, false, ReasonZoneCutOff},
		{"its kubelet renewed after its peers' word", []string{"n1", "n2"}, true, ReasonZoneCutOff},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n3 := testNode("n3", "z", zone.Healthy, corev1.ConditionUnknown)
			env := newDeciderEnv(t, nil, n3, testNode("n1", "z", "", corev1.ConditionTrue), testNode("n2", "z", "", corev1.ConditionTrue),
				testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow),
				testLease(NodeLeaseNamespace, "n1", testNow), testLease(NodeLeaseNamespace, "n2", testNow), testLease(NodeLeaseNamespace, "n3", testNow))
			zoneLease := zone.LeaseName("z")
			env.clock.Step(3 * time.Second)
			renewLease(t, env, zone.DefaultLeaseNamespace, zoneLease, func(l *coordinationv1.Lease) *coordinationv1.Lease {
				var atts []zone.Attestation
				for _, signer := range tt.downBy {
					a := zone.Attestation{Zone: "z", Signer: signer, At: env.clock.Now(), Down: []string{"n3"}}
					a.Sign(testKey(signer))
					atts = append(atts, a)
				}
				l.Annotations[zone.LeaseEvidenceAnnotation] = zone.FormatEvidence(atts)
				return signLease(l)
			})
			env.clock.Step(time.Second)
			if tt.renewedAfter {
				renewLease(t, env, NodeLeaseNamespace, "n3", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
			}
			// The thief: n1's key, a verdict calling n3 healthy, and a
			// later attestation (dated a minute ahead) that n1 reaches it.
			forged := testNode("n3", "z", zone.Healthy, corev1.ConditionUnknown)
			a, _ := zone.ParseAnnotation(forged.Annotations[zone.AnnotationKey])
			a.At = env.clock.Now().UTC()
			a.Sign("n3", "n1", testKey("n1"))
			raw, _ := json.Marshal(a)
			forged.Annotations[zone.AnnotationKey] = string(raw)
			renewLease(t, env, zone.DefaultLeaseNamespace, zoneLease, func(l *coordinationv1.Lease) *coordinationv1.Lease {
				return signLease(attested(l, env.clock.Now().Add(time.Minute), "n1"))
			})
			// The cloud heard n3's kubelet 4 s ago: nothing is at stake yet.
			if got, _ := env.d.Decide(forged); got.Reason != ReasonZoneLeaseFresh {
				t.Fatalf("while connected: %+v, want %s", got, ReasonZoneLeaseFresh)
			}
			env.clock.Step(testLeaseDuration * time.Second) // dark
			got, err := env.d.Decide(forged)
			if err != nil || got.Reason != tt.want || got.Vouched != (tt.want == ReasonZoneCutOff) {
				t.Errorf("in the cut: %+v, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// verdictSig is the signature of n's verdict annotation.
func verdictSig(t *testing.T, n *corev1.Node) []byte {
	t.Helper()
	a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey])
	if err != nil {
		t.Fatal(err)
	}
	return a.Sig
}

// handOver has holder take zone z's Lease under the next term, naming
// endorses, and waits until the Decider's cache holds it.
func handOver(t *testing.T, env *deciderEnv, holder, endorses string) {
	t.Helper()
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	l, err := leases.Get(context.Background(), zone.LeaseName("z"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
	l.Annotations[zone.LeaseTermAnnotation] = strconv.Itoa(testTerm + 1)
	l.Annotations[zone.LeaseEndorsesAnnotation] = endorses
	if _, err := leases.Update(context.Background(), signLease(l), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, waitTimeout, holder+"'s Lease in the cache", func() bool {
		c, _ := env.d.caches.ZoneLeases.Get(zone.LeaseName("z"))
		return c != nil && ptr.Deref(c.Spec.HolderIdentity, "") == holder && c.Annotations[zone.LeaseEndorsesAnnotation] == endorses
	})
	env.settled(t)
}

func mustGetLease(t *testing.T, leases interface {
	Get(context.Context, string, metav1.GetOptions) (*coordinationv1.Lease, error)
}) *coordinationv1.Lease {
	t.Helper()
	l, err := leases.Get(context.Background(), zone.LeaseName("z"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = ""
	return l
}

// TestDecideGivesNoGraceToAStolenLease: a member that writes the zone Lease
// in its own name (with its own key: it may lie about itself) is honoured as
// holder until the leader takes the Lease back, and not a moment longer,
// whichever term it claimed: the leader's Lease vouches only for predecessors
// whose verdicts are the zone's committed ones.
func TestDecideGivesNoGraceToAStolenLease(t *testing.T) {
	for _, stolenTerm := range []uint64{testTerm - 1, testTerm, math.MaxUint64} {
		t.Run(fmt.Sprintf("term %d", stolenTerm), func(t *testing.T) {
			ctx := context.Background()
			healthy := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown) // signed by n1, the leader
			thief := testNode("n2", "z", "", corev1.ConditionTrue)
			env := newDeciderEnv(t, nil, healthy, thief, testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow),
				testLease(NodeLeaseNamespace, "n1", testNow))
			leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
			write := func(holder string, term uint64) {
				t.Helper()
				l, err := leases.Get(ctx, zone.LeaseName("z"), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				l.Spec.HolderIdentity = ptr.To(holder)
				l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now()}
				l.Annotations[zone.LeaseTermAnnotation] = strconv.FormatUint(term, 10)
				if _, err := leases.Update(ctx, signLease(l), metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				poll.UntilTrue(t, waitTimeout, holder+" holding the Lease in the cache", func() bool {
					c, _ := env.d.caches.ZoneLeases.Get(zone.LeaseName("z"))
					return c != nil && ptr.Deref(c.Spec.HolderIdentity, "") == holder &&
						c.Annotations[zone.LeaseTermAnnotation] == strconv.FormatUint(term, 10)
				})
				env.settled(t)
			}
			// n2 takes the Lease and signs a verdict for n1 with its own key.
			write("n2", stolenTerm)
			forged := testNode("n1", "z", "", corev1.ConditionUnknown)
			a := zone.Annotation{State: zone.Healthy, Zone: "z", Term: stolenTerm, Leader: "n2", At: nodeLost}
			a.Sign("n1", "n2", testKey("n2"))
			raw, _ := json.Marshal(a)
			forged.Annotations[zone.AnnotationKey] = string(raw)
			if got, _ := env.d.Decide(forged); !got.Vouched {
				t.Fatalf("while n2 holds the Lease, its verdict: %+v", got)
			}
			// The leader takes it back under a higher term, as its writer
			// does over any term its quorum never had.
			env.clock.Step(time.Second)
			write("n1", testTerm+1)
			if got, _ := env.d.Decide(forged); got.Vouched {
				t.Fatalf("after the leader took the Lease back, n2's verdict: %+v", got)
			}
			if got, _ := env.d.Decide(healthy); !got.Vouched {
				t.Fatalf("the leader's own verdict after it took the Lease back: %+v", got)
			}
		})
	}
}

// TestDecideIgnoresNodesThatJoinDuringACut: a node labelled into a zone after
// the zone's last renewal was no member that renewal spoke for; its kubelet
// Lease does not make the zone look reachable.
func TestDecideIgnoresNodesThatJoinDuringACut(t *testing.T) {
	ctx := context.Background()
	n := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
	env := newDeciderEnv(t, nil, n, testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow.Add(-time.Minute)),
		testLease(NodeLeaseNamespace, "n1", testNow.Add(-time.Minute)))
	if got, _ := env.d.Decide(n); got.Reason != ReasonZoneCutOff {
		t.Fatalf("before: %+v", got)
	}
	late := testNode("late", "z", "", corev1.ConditionTrue)
	if _, err := env.client.CoreV1().Nodes().Create(ctx, late, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.client.CoordinationV1().Leases(NodeLeaseNamespace).Create(ctx, testLease(NodeLeaseNamespace, "late", testNow), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.UntilTrue(t, waitTimeout, "the new node and its Lease in the caches", func() bool {
		_, err1 := env.d.caches.Nodes.Get("late")
		_, err2 := env.d.caches.NodeLeases.Get("late")
		return err1 == nil && err2 == nil && !env.d.evidence.memberSince("late", "z").IsZero()
	})
	env.settled(t)
	if got, _ := env.d.Decide(n); got.Reason != ReasonZoneCutOff {
		t.Fatalf("a node that joined during the cut decided the zone: %+v, want %s", got, ReasonZoneCutOff)
	}
}

// TestDecideJudgesByTheLastSignedVerdict: any agent token may write or remove
// the verdict annotation on any Node, so what the zone did not sign, or signed
// earlier, must not end a node's protection. The node is judged by the last
// verdict the zone signed for it; each refusal is counted; a newer verdict the
// zone signed, healthy or not, is judged as it comes.
func TestDecideJudgesByTheLastSignedVerdict(t *testing.T) {
	ctx := context.Background()
	// n1's verdict, decided by n1 (the leader) in testTerm at nodeLost and
	// signed by it, is on the Node before the webhook starts: nobody asks
	// about it before it is replaced.
	env := newDeciderEnv(t, nil, testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown),
		testNode("n2", "z", "", corev1.ConditionTrue), testNode("y1", "y", "", corev1.ConditionTrue),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testLease(NodeLeaseNamespace, "n1", testNow.Add(-time.Minute)))
	nodes := env.client.CoreV1().Nodes()
	verdict := func(state zone.State, term uint64, at time.Time, signer string) string {
		a := zone.Annotation{State: state, Zone: "z", Term: term, Leader: "n1", At: at, Pros: 2, Members: 3}
		if signer != "" {
			a.Sign("n1", signer, testKey(signer))
		}
		b, _ := json.Marshal(a)
		return string(b)
	}
	// set writes raw as n1's verdict ("" removes it) and returns n1 as the
	// cache then holds it.
	set := func(raw string) *corev1.Node {
		t.Helper()
		n, err := nodes.Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if raw == "" {
			delete(n.Annotations, zone.AnnotationKey)
		} else {
			n.Annotations[zone.AnnotationKey] = raw
		}
		if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var cached *corev1.Node
		poll.UntilTrue(t, waitTimeout, "n1's new verdict in the cache", func() bool {
			cached, _ = env.d.caches.Nodes.Get("n1")
			return cached != nil && cached.Annotations[zone.AnnotationKey] == raw
		})
		return cached
	}
	refusals := func(r Reason) float64 {
		return testutil.ToFloat64(env.d.evidence.metrics.verdictsRefused.WithLabelValues(string(r)))
	}
	// The zone is cut off: its Lease goes stale and no kubelet renews.
	env.clock.Step(testLeaseDuration * time.Second)
	earlier := nodeLost.Add(-time.Minute)
	for _, tt := range []struct {
		name    string
		raw     string
		want    Decision
		counted Reason
	}{
		{"unsigned and unhealthy", verdict(zone.Unhealthy, testTerm, testNow, ""),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonUnsigned}, ReasonUnsigned},
		{"signed by a node of another zone", verdict(zone.Unhealthy, testTerm, testNow, "y1"),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonSignerNotMember}, ReasonSignerNotMember},
		{"signed by a member that is not the leader", verdict(zone.Unhealthy, testTerm, testNow, "n2"),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonSignerNotLeader}, ReasonSignerNotLeader},
		{"a forged term", verdict(zone.Unknown, math.MaxUint64, testNow, "n1"),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonTermAheadOfLease}, ReasonTermAheadOfLease},
		{"not JSON", "unhealthy",
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonBadVerdict}, ReasonBadVerdict},
		{"removed", "",
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonNoVerdict}, ReasonNoVerdict},
		{"an older verdict the leader signed, replayed", verdict(zone.Unhealthy, testTerm, earlier, "n1"),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonSuperseded}, ReasonSuperseded},
		{"a verdict of an earlier term, replayed", verdict(zone.Unhealthy, testTerm-1, testNow, "n1"),
			Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff, Refused: ReasonSuperseded}, ""},
		// What the zone decides next is judged, healthy or not.
		{"the leader's next verdict", verdict(zone.Unhealthy, testTerm, testNow, "n1"),
			Decision{Zone: "z", Reason: ReasonNotHealthy}, ""},
		{"then the healthy one replayed", verdict(zone.Healthy, testTerm, nodeLost, "n1"),
			Decision{Zone: "z", Reason: ReasonNotHealthy, Refused: ReasonSuperseded}, ""},
		{"then removed", "",
			Decision{Zone: "z", Reason: ReasonNotHealthy, Refused: ReasonNoVerdict}, ""},
	} {
		before := refusals(tt.counted)
		n := set(tt.raw)
		for _, by := range []string{"review", "cache"} {
			got, err := env.d.Decide(n)
			if by == "cache" {
				got, _, err = env.d.DecideNode("n1")
			}
			if err != nil || got != tt.want {
				t.Errorf("%s, decided from the %s: %+v, %v; want %+v", tt.name, by, got, err, tt.want)
			}
		}
		if tt.counted != "" {
			if got := refusals(tt.counted) - before; got != 1 {
				t.Errorf("%s: verdicts_refused_total{%s} rose by %v, want 1", tt.name, tt.counted, got)
			}
		}
	}
}

// TestDecideAfterTheZoneStartsOver: a zone whose members were all wiped
// starts again at term 1. The verdicts of its old terms no longer stand
// under its new Lease, so they hold nothing back: the new ones are judged.
func TestDecideAfterTheZoneStartsOver(t *testing.T) {
	ctx := context.Background()
	env := newDeciderEnv(t, nil, testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow), testLease(NodeLeaseNamespace, "n1", testNow))
	if got, _, _ := env.d.DecideNode("n1"); !got.Vouched {
		t.Fatalf("before: %+v", got)
	}
	leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	l := mustGetLease(t, leases)
	l.Annotations[zone.LeaseTermAnnotation] = "1"
	if _, err := leases.Update(ctx, signLease(l), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := env.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := zone.Annotation{State: zone.Healthy, Zone: "z", Term: 1, Leader: "n1", At: testNow, Pros: 2, Members: 3}
	a.Sign("n1", "n1", testKey("n1"))
	raw, _ := json.Marshal(a)
	n.Annotations[zone.AnnotationKey] = string(raw)
	if _, err := env.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, waitTimeout, "n1 judged by its term-1 verdict", func() (bool, string) {
		got, _, err := env.d.DecideNode("n1")
		return err == nil && got == Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}, fmt.Sprintf("%+v, %v", got, err)
	})
}

// votedLease is zone z's Lease held by holder under term, renewed at renew,
// carrying the votes of voters that holder leads in term (none when empty),
// signed by holder.
func votedLease(holder string, term uint64, renew time.Time, voters ...string) *coordinationv1.Lease {
	l := testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), renew)
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Annotations[zone.LeaseTermAnnotation] = strconv.FormatUint(term, 10)
	var votes []zone.LeaderVote
	for _, v := range voters {
		vote := zone.LeaderVote{Zone: "z", Term: term, Leader: holder, Signer: v}
		vote.Sign(testKey(v))
		votes = append(votes, vote)
	}
	if len(votes) > 0 {
		l.Annotations[zone.LeaseLeadershipAnnotation] = zone.FormatLeadership(votes)
	}
	return signLease(l)
}

// TestZoneLeaseClaimNeedsAMajoritysVotes: once a zone's Lease has carried the
// votes of a majority of its members that its holder leads in its term, the
// webhook honours no claim without such votes: not a stolen follower's under
// a higher term with its own vote alone, not one with none, not one whose
// votes are copied from another term's, and no claim under a lower term
// while the honoured one is fresh. A real handover, voted for, is honoured.
func TestZoneLeaseClaimNeedsAMajoritysVotes(t *testing.T) {
	env := newDeciderEnv(t, nil, testNode("n1", "z", "", corev1.ConditionTrue), testNode("n2", "z", "", corev1.ConditionTrue),
		testNode("n3", "z", "", corev1.ConditionTrue))
	e := env.d.evidence
	name := zone.LeaseName("z")
	honoured := func(l *coordinationv1.Lease) (string, uint64) {
		t.Helper()
		c := e.zoneClaim(name, l)
		if c == nil {
			return "", 0
		}
		return c.Holder, c.Term
	}
	refused := func(reason string) float64 {
		return testutil.ToFloat64(e.metrics.leasesRefused.WithLabelValues(reason))
	}

	// Before any votes, a claim without them is honoured: agents of the
	// release before.
	if h, term := honoured(votedLease("n1", 7, testNow)); h != "n1" || term != 7 {
		t.Fatalf("a legacy claim: honoured %s/%d", h, term)
	}
	env.clock.Step(time.Second)
	if h, term := honoured(votedLease("n1", 7, env.clock.Now(), "n1", "n2")); h != "n1" || term != 7 {
		t.Fatalf("n1's claim with a majority's votes: honoured %s/%d", h, term)
	}
	honest := votedLease("n1", 7, env.clock.Now(), "n1", "n2")
	for _, tt := range []struct {
		name   string
		lease  func() *coordinationv1.Lease
		reason string
	}{
		{"a stolen follower's own vote under a higher term", func() *coordinationv1.Lease {
			return votedLease("n2", 8, env.clock.Now(), "n2")
		}, leaseLeadershipMinority},
		{"a claim without votes", func() *coordinationv1.Lease { return votedLease("n2", 8, env.clock.Now()) }, leaseNoLeadership},
		{"votes copied from the honest leader's term", func() *coordinationv1.Lease {
			l := votedLease("n2", 8, env.clock.Now())
			votes, err := zone.ParseLeadership("z", honest.Annotations[zone.LeaseLeadershipAnnotation])
			if err != nil {
				t.Fatal(err)
			}
			for i := range votes {
				votes[i].Term, votes[i].Leader = 8, "n2"
			}
			l.Annotations[zone.LeaseLeadershipAnnotation] = zone.FormatLeadership(votes)
			return signLease(l)
		}, leaseLeadershipMinority},
		{"votes for another holder", func() *coordinationv1.Lease {
			l := votedLease("n2", 7, env.clock.Now())
			l.Annotations[zone.LeaseLeadershipAnnotation] = honest.Annotations[zone.LeaseLeadershipAnnotation]
			return signLease(l)
		}, leaseBadLeadership},
		{"a deposed leader's term while the honoured one is fresh", func() *coordinationv1.Lease {
			return votedLease("n3", 6, env.clock.Now(), "n3", "n2")
		}, leaseStaleTerm},
	} {
		env.clock.Step(100 * time.Millisecond)
		before := refused(tt.reason)
		if h, term := honoured(tt.lease()); h != "n1" || term != 7 {
			t.Errorf("%s: honoured %s/%d, want n1's term 7 to stand", tt.name, h, term)
		}
		if got := refused(tt.reason) - before; got != 1 {
			t.Errorf("%s: %v refusals counted as %s, want 1", tt.name, got, tt.reason)
		}
	}

	env.clock.Step(time.Second)
	if h, term := honoured(votedLease("n2", 8, env.clock.Now(), "n2", "n3")); h != "n2" || term != 8 {
		t.Errorf("a handover to n2 that n2 and n3 voted for: honoured %s/%d", h, term)
	}
	// Once the honoured claim is stale, a lower term counts again: a zone
	// rebuilt from nothing starts its terms over.
	env.clock.Step(testLeaseDuration*time.Second + time.Second)
	if h, term := honoured(votedLease("n1", 1, env.clock.Now(), "n1", "n3")); h != "n1" || term != 1 {
		t.Errorf("a new zone's first term after the old claim went stale: honoured %s/%d", h, term)
	}
}

// TestSignatureMemoBindsWhatWasSigned: the webhook remembers which signatures
// verified, but a valid signature copied under other words is checked anew,
// and fails.
func TestSignatureMemoBindsWhatWasSigned(t *testing.T) {
	env := newDeciderEnv(t, nil, testNode("n1", "z", "", corev1.ConditionTrue), testNode("n2", "z", "", corev1.ConditionTrue))
	e := env.d.evidence
	a := zone.Attestation{Zone: "z", Signer: "n2", At: testNow, Reach: []string{"n1"}}
	a.Sign(testKey("n2"))
	copied := a
	copied.Reach, copied.Down = nil, []string{"n1"}
	v := zone.LeaderVote{Zone: "z", Term: 7, Leader: "n1", Signer: "n2"}
	v.Sign(testKey("n2"))
	other := v
	other.Leader = "n2"
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.attestationValid("z", &seenAttestation{Attestation: a}) || e.attestationValid("z", &seenAttestation{Attestation: copied}) {
		t.Error("an attestation's signature copied under other words was taken as valid")
	}
	if e.validVotes("z", []zone.LeaderVote{v}) != 1 || e.validVotes("z", []zone.LeaderVote{other}) != 0 {
		t.Error("a vote's signature copied under another leader was taken as valid")
	}
}

// TestDecideKeepsACutZoneProtectedWhileItReconnects: a zone cut off as a
// whole comes back member by member, and its leader's renewal may trail its
// first kubelet by a renew interval. Until it arrives, at most two kubelet
// renew intervals after the cloud first heard a member again, the nodes still
// silent stay protected (the controller manager still taints them); a member
// heard again needs nothing. The instant the zone was heard again does not
// move as its kubelets go on renewing. A zone whose leader alone went silent
// is heard within a renew interval of its Lease going stale: no cut, no
// grace.
func TestDecideKeepsACutZoneProtectedWhileItReconnects(t *testing.T) {
	nodes := func() []runtime.Object {
		objs := []runtime.Object{testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow)}
		for _, n := range []string{"n1", "n2", "n3"} {
			objs = append(objs, testNode(n, "z", zone.Healthy, corev1.ConditionUnknown), testLease(NodeLeaseNamespace, n, testNow))
		}
		return objs
	}
	decide := func(t *testing.T, env *deciderEnv, node string, want Reason) {
		t.Helper()
		n, err := env.d.caches.Nodes.Get(node)
		if err != nil {
			t.Fatal(err)
		}
		got, err := env.d.Decide(n)
		if err != nil || got.Reason != want || got.Vouched != (want == ReasonZoneCutOff) {
			t.Errorf("%s at +%s: %+v, %v; want %s", node, env.clock.Since(testNow), got, err, want)
		}
	}
	t.Run("a zone back from a cut", func(t *testing.T) {
		env := newDeciderEnv(t, nil, nodes()...)
		env.clock.Step(2 * time.Minute)
		decide(t, env, "n1", ReasonZoneCutOff)
		renewLease(t, env, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
		decide(t, env, "n1", ReasonZoneCutOff)
		decide(t, env, "n2", ReasonZoneNotCutOff)
		env.clock.Step(15 * time.Second)
		renewLease(t, env, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
		decide(t, env, "n1", ReasonZoneCutOff)
		env.clock.Step(5 * time.Second) // two renew intervals since n2 was first heard again
		decide(t, env, "n1", ReasonZoneNotCutOff)
		decide(t, env, "n3", ReasonZoneNotCutOff)
	})
	t.Run("a zone whose leader alone went silent", func(t *testing.T) {
		env := newDeciderEnv(t, nil, nodes()...)
		env.clock.Step(testLeaseDuration*time.Second + 5*time.Second)
		decide(t, env, "n1", ReasonZoneCutOff) // dark until a member is heard
		renewLease(t, env, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
		decide(t, env, "n1", ReasonZoneNotCutOff)
	})
	t.Run("a cut longer than the protection", func(t *testing.T) {
		env := newDeciderEnv(t, func(c *Config) { c.MaxCutoffProtection = time.Minute }, nodes()...)
		env.clock.Step(2 * time.Minute)
		renewLease(t, env, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
		decide(t, env, "n1", ReasonZoneNotCutOff)
	})
}

// TestDecideRechecksAttestationsWhenAKeyChanges: the answer of a peer's
// attestation is remembered until a member's key or zone changes; a signer
// whose Node registers a new key no longer vouches with what its old key
// signed, and a node whose peers' word stops counting is no longer vouched.
func TestDecideRechecksAttestationsWhenAKeyChanges(t *testing.T) {
	n1 := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
	env := newDeciderEnv(t, nil, n1, testNode("n2", "z", "", corev1.ConditionTrue), testNode("n3", "z", "", corev1.ConditionTrue),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow),
		testLease(NodeLeaseNamespace, "n1", testNow.Add(-time.Minute)), testLease(NodeLeaseNamespace, "n2", testNow), testLease(NodeLeaseNamespace, "n3", testNow))
	if got, err := env.d.Decide(n1); err != nil || !got.Vouched || got.Reason != ReasonZoneLeaseFresh {
		t.Fatalf("with its peers' word: %+v, %v", got, err)
	}
	ctx := context.Background()
	for _, peer := range []string{"n2", "n3"} {
		n, err := env.client.CoreV1().Nodes().Get(ctx, peer, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations[zone.NodeKeyAnnotation] = zone.EncodeNodeKey(testKey(peer + "-new").Public().(ed25519.PublicKey))
		n.ResourceVersion = "2" // as the apiserver would
		if _, err := env.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.UntilTrue(t, waitTimeout, "the peers' new keys seen", func() bool {
		got, err := env.d.Decide(n1)
		return err == nil && !got.Vouched && got.Reason == ReasonNoQuorumEvidence
	})
}
