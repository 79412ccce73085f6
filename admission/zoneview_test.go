package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
)

// zoneViewEnv is a zone viewer over a deciderEnv, writing EdgeZones to a fake
// dynamic client.
type zoneViewEnv struct {
	*deciderEnv
	dyn *dynamicfake.FakeDynamicClient
}

func newZoneViewEnv(t *testing.T, objs ...runtime.Object) *zoneViewEnv {
	t.Helper()
	return &zoneViewEnv{
		deciderEnv: newDeciderEnv(t, nil, objs...),
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{EdgeZoneResource: "EdgeZoneList"}),
	}
}

// viewer is a new leader's zone viewer, as run starts it.
func (env *zoneViewEnv) viewer(t *testing.T) *zoneViewer {
	t.Helper()
	v := &zoneViewer{
		decider: env.d, nodes: env.d.caches.Nodes, client: env.dyn.Resource(EdgeZoneResource),
		clock: env.clock, period: time.Second, limiter: rate.NewLimiter(rate.Inf, 1),
		metrics: env.d.evidence.metrics, log: slog.New(slog.DiscardHandler), written: map[string]*writtenZone{},
	}
	v.readStored(context.Background())
	env.d.evidence.metrics.zones.add(v)
	return v
}

// status is the stored EdgeZone of zone z.
func (env *zoneViewEnv) status(t *testing.T, z string) EdgeZoneStatus {
	t.Helper()
	o, err := env.dyn.Resource(EdgeZoneResource).Get(context.Background(), edgeZoneName(z), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("EdgeZone %s: %v", z, err)
	}
	if o.GetLabels()[EdgeZoneZoneLabel] != z {
		t.Errorf("EdgeZone %s labels %v, want %s=%s", o.GetName(), o.GetLabels(), EdgeZoneZoneLabel, z)
	}
	b, err := json.Marshal(o.Object["status"])
	if err != nil {
		t.Fatal(err)
	}
	var st EdgeZoneStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// setReady sets every named node's Ready condition to s, as the node
// lifecycle controller would, and waits for the cache to hold it.
func (env *zoneViewEnv) setReady(t *testing.T, s corev1.ConditionStatus, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		n, err := env.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions[0].Status = s
		if _, err := env.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.UntilTrue(t, waitTimeout, name+" "+string(s)+" in the cache", func() bool {
			c, err := env.d.caches.Nodes.Get(name)
			return err == nil && c.Status.Conditions[0].Status == s
		})
	}
}

// TestZoneViewFollowsAZone follows one zone of three through what an operator
// watches for: connected, cut off as a whole, its quorum lost while the cloud
// hears its kubelets, a new leader of the webhook, and the zone's nodes
// removed. Each pass writes the EdgeZone only when its status changed, and
// the gauges follow the view.
func TestZoneViewFollowsAZone(t *testing.T) {
	ctx := context.Background()
	env := newZoneViewEnv(t,
		testNode("n1", "z", zone.Healthy, corev1.ConditionTrue),
		testNode("n2", "z", zone.Healthy, corev1.ConditionTrue),
		testNode("n3", "z", zone.Healthy, corev1.ConditionTrue),
		testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), testNow),
		testLease(NodeLeaseNamespace, "n1", testNow), testLease(NodeLeaseNamespace, "n2", testNow), testLease(NodeLeaseNamespace, "n3", testNow))
	m := env.d.evidence.metrics
	writes := func() float64 { return testutil.ToFloat64(m.zoneStatusWrites.WithLabelValues("ok")) }
	v := env.viewer(t)

	if got := testutil.CollectAndCount(m.zones); got != 0 {
		t.Errorf("before its first pass the viewer exports %d zone series, want none", got)
	}
	v.pass(ctx)
	st := env.status(t, "z")
	if st.State != ZoneConnected || st.Leader != "n1" || st.Term != testTerm || st.Nodes != 3 || st.Protected != 0 ||
		st.ProtectionLeft != "" || !st.Since.Equal(ptrTime(testNow)) {
		t.Errorf("connected zone: %+v", st)
	}
	if len(st.Members) != 3 || st.Members[0].Name != "n1" || !st.Members[0].Vouched || st.Members[0].Verdict != "healthy" ||
		strings.Join(st.Members[0].ReachedBy, ",") != "n2,n3" || len(st.Members[0].DownBy) != 0 || st.Members[0].Ready != "True" {
		t.Errorf("connected zone's members: %+v", st.Members)
	}
	wantGauges(t, m.zones, `
		edgequorum_admission_zones{state="connected"} 1
		edgequorum_admission_zones{state="cut_off"} 0
		edgequorum_admission_zones{state="no_leader"} 0
		edgequorum_admission_zones{state="forming"} 0
		edgequorum_admission_protected_nodes 0
	`)
	env.clock.Step(5 * time.Second)
	v.pass(ctx)
	if writes() != 1 {
		t.Errorf("%v writes after two passes over an unchanged zone, want 1", writes())
	}

	// The whole zone goes dark; the node lifecycle controller marks its
	// nodes Unknown, which the webhook keeps protected.
	env.setReady(t, corev1.ConditionUnknown, "n1", "n2", "n3")
	env.clock.Step(testLeaseDuration * time.Second)
	v.pass(ctx)
	st = env.status(t, "z")
	if st.State != ZoneCutOff || !st.Since.Equal(ptrTime(testNow)) || !st.ProtectedUntil.Equal(ptrTime(testNow.Add(24*time.Hour))) ||
		st.ProtectionLeft != "23h" || st.Protected != 3 || st.Leader != "n1" {
		t.Errorf("cut-off zone: %+v", st)
	}
	if !st.Members[1].Vouched || st.Members[1].Reason != string(ReasonZoneCutOff) || strings.Join(st.Members[1].ReachedBy, ",") != "n1,n3" {
		t.Errorf("cut-off zone's n2: %+v (its peers' word as of the zone's last renewal)", st.Members[1])
	}
	left := (24*time.Hour - 25*time.Second).Seconds()
	wantGauges(t, m.zones, `
		edgequorum_admission_zones{state="connected"} 0
		edgequorum_admission_zones{state="cut_off"} 1
		edgequorum_admission_zones{state="no_leader"} 0
		edgequorum_admission_zones{state="forming"} 0
		edgequorum_admission_protected_nodes 3
		edgequorum_admission_zone_cut_off_seconds{zone="z"} 25
		edgequorum_admission_zone_protection_left_seconds{zone="z"} `+ftoa(left)+`
	`)
	// The gauges age between passes.
	env.clock.Step(time.Minute)
	wantGauges(t, m.zones, `
		edgequorum_admission_zones{state="connected"} 0
		edgequorum_admission_zones{state="cut_off"} 1
		edgequorum_admission_zones{state="no_leader"} 0
		edgequorum_admission_zones{state="forming"} 0
		edgequorum_admission_protected_nodes 3
		edgequorum_admission_zone_cut_off_seconds{zone="z"} 85
		edgequorum_admission_zone_protection_left_seconds{zone="z"} `+ftoa(left-60)+`
	`)

	// n2's kubelet reaches the cloud again: the zone may be coming back
	// from its cut, its leader's renewal a renew interval behind, so the
	// nodes still silent stay protected for two kubelet renew intervals;
	// n2, heard, needs nothing.
	renewLease(t, env.deciderEnv, NodeLeaseNamespace, "n2", func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
	v.pass(ctx)
	st = env.status(t, "z")
	if st.State != ZoneCutOff || st.Protected != 2 || st.Members[1].Vouched || st.Members[1].Reason != string(ReasonZoneNotCutOff) {
		t.Errorf("zone heard again a moment ago: %+v", st)
	}
	// No renewal of the zone Lease followed: not a cut but a lost quorum,
	// and nothing is protected.
	env.clock.Step(2 * defaultKubeletRenewInterval)
	v.pass(ctx)
	st = env.status(t, "z")
	staleAt := testNow.Add(testLeaseDuration * time.Second)
	if st.State != ZoneNoLeader || !st.Since.Equal(ptrTime(staleAt)) || st.Protected != 0 || st.ProtectedUntil != nil || st.ProtectionLeft != "" {
		t.Errorf("zone without a leader: %+v", st)
	}
	wantGauges(t, m.zones, `
		edgequorum_admission_zones{state="connected"} 0
		edgequorum_admission_zones{state="cut_off"} 0
		edgequorum_admission_zones{state="no_leader"} 1
		edgequorum_admission_zones{state="forming"} 0
		edgequorum_admission_protected_nodes 0
		edgequorum_admission_zone_no_leader_seconds{zone="z"} 85
	`)

	// Another replica takes over: it reads what is stored and writes
	// nothing for a zone that did not change.
	v.latest.Store(nil)
	before := writes()
	v2 := env.viewer(t)
	v2.pass(ctx)
	if writes() != before {
		t.Errorf("a new leader rewrote an unchanged zone (%v writes, want %v)", writes(), before)
	}

	// The zone's nodes go: so does its EdgeZone.
	for _, n := range []string{"n1", "n2", "n3"} {
		if err := env.client.CoreV1().Nodes().Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	poll.UntilTrue(t, waitTimeout, "the nodes gone from the cache", func() bool {
		_, err := env.d.caches.Nodes.Get("n3")
		return apierrors.IsNotFound(err)
	})
	v2.pass(ctx)
	if _, err := env.dyn.Resource(EdgeZoneResource).Get(ctx, "z", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("EdgeZone of a zone without nodes: %v, want not found", err)
	}
}

// TestZoneViewPacesItsWrites: with more changed zones than its bucket holds, a
// pass writes what the bucket allows, state changes first, and defers the
// rest to later passes.
func TestZoneViewPacesItsWrites(t *testing.T) {
	ctx := context.Background()
	env := newZoneViewEnv(t,
		testNode("edge-a1", "zone-a", zone.Healthy, corev1.ConditionTrue),
		testNode("edge-b1", "zone-b", zone.Healthy, corev1.ConditionTrue),
		testNode("edge-c1", "zone-c", zone.Healthy, corev1.ConditionTrue),
		cloudNode("cloud-1", "us-east-1a"))
	m := env.d.evidence.metrics
	v := env.viewer(t)
	v.limiter = rate.NewLimiter(0, 2)
	v.pass(ctx)
	if ok, deferred := testutil.ToFloat64(m.zoneStatusWrites.WithLabelValues("ok")), testutil.ToFloat64(m.zoneStatusWrites.WithLabelValues("deferred")); ok != 2 || deferred != 1 {
		t.Errorf("a pass with a bucket of 2 over 3 new zones: %v written, %v deferred; want 2 and 1", ok, deferred)
	}
	list, err := env.dyn.Resource(EdgeZoneResource).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("EdgeZones after the first pass: %v, %v", list, err)
	}
	v.limiter = rate.NewLimiter(rate.Inf, 1)
	v.pass(ctx)
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		if st := env.status(t, z); st.State != ZoneForming || st.Nodes != 1 {
			t.Errorf("%s: %+v, want forming with one node (no zone Lease)", z, st)
		}
	}
	// The cloud's own nodes carry topology.kubernetes.io/zone too: their
	// zones are no edge zones.
	if _, err := env.dyn.Resource(EdgeZoneResource).Get(ctx, "us-east-1a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("EdgeZone of a cloud zone (no node key, verdict or zone Lease): %v, want none", err)
	}
}

// cloudNode is a node of the cloud in zone z: no agent runs on it.
func cloudNode(name, z string) *corev1.Node {
	n := testNode(name, z, "", corev1.ConditionTrue)
	delete(n.Annotations, zone.NodeKeyAnnotation)
	return n
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// gatherText is every series c exports as `name{labels} value`, sorted.
func gatherText(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			out = append(out, name+" "+ftoa(m.GetGauge().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

// wantGauges checks every series c exports against want, in the text format
// without HELP and TYPE lines.
func wantGauges(t *testing.T, c *zoneCollector, want string) {
	t.Helper()
	var lines []string
	for l := range strings.SplitSeq(want, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	got := gatherText(t, c)
	if strings.Join(got, "\n") != strings.Join(sortedCopy(lines), "\n") {
		t.Errorf("gauges:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sortedCopy(lines), "\n"))
	}
}

// TestZoneViewPacing: a pass over many nodes spreads its judging over the
// spread it is given, in pauses no shorter than minPause; a pass over few
// nodes, or one not spread, does not pause.
func TestZoneViewPacing(t *testing.T) {
	v := &zoneViewer{spread: 5 * time.Second}
	for _, zones := range []int{20, 100, 1000, 3000, 10000, 100000} {
		batch, pause := v.pacing(zones, max(pacedNodes, 3*zones))
		total := time.Duration(zones/batch) * pause
		if pause < minPause || total > v.spread || total < v.spread*9/10 {
			t.Errorf("%d zones: a pause of %s every %d zones, %s in all; want at least %s each and about %s in all", zones, pause, batch, total, minPause, v.spread)
		}
	}
	if _, pause := v.pacing(300, pacedNodes-1); pause != 0 {
		t.Errorf("a pass over %d nodes pauses %s", pacedNodes-1, pause)
	}
	if _, pause := (&zoneViewer{}).pacing(10000, 30000); pause != 0 {
		t.Errorf("a pass not spread pauses %s", pause)
	}
}

// TestPacerStopsWithItsContext: a paced pass ends at once when its context
// does, rather than after its pauses.
func TestPacerStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := pacer{batch: 1, pause: time.Hour}
	cancel()
	if p.next(ctx) {
		t.Error("a pacer went on after its context ended")
	}
	unpaced := pacer{}
	if !unpaced.next(context.Background()) || unpaced.next(ctx) {
		t.Error("an unpaced pacer does not follow its context")
	}
}
