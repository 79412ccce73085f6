package admission

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/prometheus/client_golang/prometheus"
)

// fleet is zones zones of three nodes each, every node with a verdict its
// zone's leader signed, its kubelet Lease, and every zone its signed zone
// Lease: the objects a webhook of a fleet caches.
func fleet(zones int) []runtime.Object {
	var objs []runtime.Object
	for i := range zones {
		z := fmt.Sprintf("site-%05d", i)
		leader := z + "-1"
		for j := 1; j <= 3; j++ {
			name := z + "-" + strconv.Itoa(j)
			n := testNode(name, z, "", corev1.ConditionTrue)
			a := zone.Annotation{State: zone.Healthy, Zone: z, Term: testTerm, Leader: leader, At: nodeLost, Pros: 2, Members: 3}
			a.Sign(name, leader, testKey(leader))
			raw, err := json.Marshal(a)
			if err != nil {
				panic(err)
			}
			n.Annotations[zone.AnnotationKey] = string(raw)
			objs = append(objs, n, testLease(NodeLeaseNamespace, name, testNow))
		}
		l := testLease(zone.DefaultLeaseNamespace, zone.LeaseName(z), testNow)
		l.Labels = map[string]string{zonek8s.ZoneLabel: z}
		l.Annotations = map[string]string{zone.LeaseTermAnnotation: strconv.Itoa(testTerm)}
		l.Spec.HolderIdentity = ptr.To(leader)
		objs = append(objs, signLease(l))
	}
	return objs
}

// BenchmarkZoneViewPass is one pass of the zone view over a fleet of small
// sites, from warm caches (signatures checked once already): the CPU the
// repair loop's leader spends every --zone-status-period (10 s). Writes are
// not part of it: a steady fleet writes none.
func BenchmarkZoneViewPass(b *testing.B) {
	for _, zones := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("zones=%d", zones), func(b *testing.B) {
			env := newDeciderEnv(b, nil, fleet(zones)...)
			v := &zoneViewer{decider: env.d, nodes: env.d.caches.Nodes, clock: env.clock, metrics: env.d.evidence.metrics,
				written: map[string]*writtenZone{}}
			view, err := v.view(context.Background(), env.clock.Now())
			if err != nil {
				b.Fatal(err)
			}
			connected := 0
			for _, st := range view {
				if st.State == ZoneConnected && st.Protected == 0 && len(st.Members) == 3 && st.Members[0].Vouched {
					connected++
				}
			}
			if connected != zones {
				b.Fatalf("%d of %d zones connected with every member vouched", connected, zones)
			}
			env.clock.Step(time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.view(context.Background(), env.clock.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSignatureCachesHoldAFleet: with more edge nodes than the caches' least
// bound, a signature checked once is not checked again: the cache grows with
// the fleet instead of starting over.
func TestSignatureCachesHoldAFleet(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e := newEvidence(DefaultConfig(), nil, m)
	for i := range verifiedCacheSize {
		e.joined[fmt.Sprintf("n%d", i)] = membership{zone: "z"}
	}
	checks := 0
	verify := func(ed25519.PublicKey) bool { checks++; return true }
	e.mu.Lock()
	defer e.mu.Unlock()
	for round := range 2 {
		for i := range 2 * verifiedCacheSize {
			e.checkOnce("verdict", []byte(strconv.Itoa(i)), nil, nil, verify)
		}
		if want := 2 * verifiedCacheSize; checks != want {
			t.Fatalf("round %d: %d signature checks for %d signatures, want %d: the cache started over", round, checks, want, want)
		}
	}
}
