package admission

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
)

// newTestDecider returns a Decider over a fake clientset holding objs, with
// synced informers and a fake clock at testNow.
func newTestDecider(t *testing.T, mod func(*Config), objs ...runtime.Object) *Decider {
	t.Helper()
	client := fake.NewClientset(objs...)
	cfg := DefaultConfig()
	cfg.Clock = clocktesting.NewFakeClock(testNow)
	if mod != nil {
		mod(&cfg)
	}
	all := informers.NewSharedInformerFactory(client, 0)
	nodeLeases := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(NodeLeaseNamespace))
	zoneLeases := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(cfg.LeaseNamespace))
	caches := Caches{
		Nodes:      all.Core().V1().Nodes().Lister(),
		Pods:       all.Core().V1().Pods().Lister(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Lister().Leases(NodeLeaseNamespace),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Lister().Leases(cfg.LeaseNamespace),
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
		zoneLeases.Coordination().V1().Leases().Informer().HasSynced) {
		t.Fatal("caches did not sync")
	}
	return NewDecider(cfg, caches)
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
		return l
	}
	acquiredOnly := func(age time.Duration) *coordinationv1.Lease {
		l := zoneLease(0)
		l.Spec.AcquireTime, l.Spec.RenewTime = &metav1.MicroTime{Time: testNow.Add(-age)}, nil
		return l
	}
	// A member renewing its kubelet Lease: the zone is not cut off, so only
	// the zone Lease can vouch.
	reachable := []runtime.Object{healthy("n2"), kubeletLease("n2", time.Second)}

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
			objs: []runtime.Object{zoneLease(19 * time.Second)}, want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease acquired but never renewed", node: healthy("n1"),
			objs: []runtime.Object{acquiredOnly(time.Second)}, want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease acquired longer than its duration ago", node: healthy("n1"),
			objs: append([]runtime.Object{acquiredOnly(testLeaseDuration * time.Second)}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "zone lease exactly its duration old is stale; a member renews", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(20 * time.Second), healthy("n2"), kubeletLease("n2", 39*time.Second)},
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "zone lease within the agents' 15 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(14*time.Second, ptr.To[int32](15))}, reachable...),
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease past the agents' 15 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(15*time.Second+time.Millisecond, ptr.To[int32](15))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "a long zone lease duration holds past 20 s", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(50*time.Second, ptr.To[int32](60))}, reachable...),
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
		{name: "zone lease without a duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, nil)}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneLeaseNoDuration}},
		{name: "zone lease with a zero duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, ptr.To[int32](0))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneLeaseNoDuration}},
		{name: "zone lease with a negative duration", node: healthy("n1"),
			objs: append([]runtime.Object{lasting(0, ptr.To[int32](-15))}, reachable...),
			want: Decision{Zone: "z", Reason: ReasonZoneLeaseNoDuration}},
		{name: "zone lease without a duration in a cut-off zone falls through as a stale one", node: healthy("n1"),
			objs: []runtime.Object{lasting(time.Hour, nil), kubeletLease("n1", time.Hour)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
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
			objs: []runtime.Object{zoneLease(30 * time.Hour), healthy("n2"), kubeletLease("n1", 30*time.Hour), kubeletLease("n2", 2*time.Hour)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "cut off, zone lease never seen", node: healthy("n1"),
			objs: []runtime.Object{kubeletLease("n1", time.Hour)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "no lease at all", node: healthy("n1"),
			want: Decision{Zone: "z", Reason: ReasonNoLeases}},
		{name: "zero protection never keeps a cut-off zone", node: healthy("n1"),
			mod:  func(c *Config) { c.MaxCutoffProtection = 0 },
			objs: []runtime.Object{zoneLease(time.Minute), kubeletLease("n1", time.Minute)},
			want: Decision{Zone: "z", Reason: ReasonCutOffExpired}},
		{name: "node lease max age is a flag", node: healthy("n1"),
			mod:  func(c *Config) { c.NodeLeaseMaxAge = 2 * time.Minute },
			objs: []runtime.Object{zoneLease(time.Hour), kubeletLease("n1", time.Minute)},
			want: Decision{Zone: "z", Reason: ReasonZoneNotCutOff}},
		{name: "members of other zones do not count", node: healthy("n1"),
			objs: []runtime.Object{zoneLease(time.Hour), kubeletLease("n1", time.Hour),
				testNode("other", "y", zone.Healthy, corev1.ConditionTrue), kubeletLease("other", time.Second)},
			want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneCutOff}},
		{name: "custom zone label", node: func() *corev1.Node {
			n := healthy("n1")
			n.Labels = map[string]string{"example.com/site": "z"}
			return n
		}(), mod: func(c *Config) { c.ZoneLabel = "example.com/site" },
			objs: []runtime.Object{zoneLease(time.Second)}, want: Decision{Vouched: true, Zone: "z", Reason: ReasonZoneLeaseFresh}},
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
		{20 * time.Second, ReasonZoneNotCutOff}, // kubelet lease still fresh
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
