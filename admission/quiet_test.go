package admission

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
)

// quietLease is zone z's test Lease renewed quietly at renew, lasting
// duration.
func quietLease(renew time.Time, duration time.Duration) *coordinationv1.Lease {
	l := testLease(zone.DefaultLeaseNamespace, zone.LeaseName("z"), renew)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(duration / time.Second))
	l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(zone.LeaseQuietFormat)
	return signLease(l)
}

// TestQuietZoneLease follows a zone whose leader renews its Lease quietly
// (every 40 s, valid 60 s) through what a quiet
// renewal must and must not say, by the webhook's clock. Kubelets renew
// every 5 s here (their Leases last 20 s).
func TestQuietZoneLease(t *testing.T) {
	const quietFor = 60 * time.Second
	setup := func(t *testing.T) (*deciderEnv, *corev1.Node) {
		n1 := testNode("n1", "z", zone.Healthy, corev1.ConditionUnknown)
		env := newDeciderEnv(t, func(c *Config) { c.MaxZoneLeaseDuration = 2 * quietFor }, n1,
			testNode("n2", "z", zone.Healthy, corev1.ConditionTrue), testNode("n3", "z", zone.Healthy, corev1.ConditionTrue),
			quietLease(testNow, quietFor),
			testLease(NodeLeaseNamespace, "n1", testNow), testLease(NodeLeaseNamespace, "n2", testNow),
			testLease(NodeLeaseNamespace, "n3", testNow))
		return env, n1
	}
	kubelets := func(t *testing.T, env *deciderEnv, nodes ...string) {
		t.Helper()
		for _, n := range nodes {
			renewLease(t, env, NodeLeaseNamespace, n, func(l *coordinationv1.Lease) *coordinationv1.Lease { return l })
		}
	}
	decide := func(t *testing.T, env *deciderEnv, n *corev1.Node, want Reason, why string) {
		t.Helper()
		got, err := env.d.Decide(n)
		if err != nil || got.Reason != want || got.Vouched != (want == ReasonZoneLeaseFresh || want == ReasonZoneCutOff) {
			t.Errorf("%s: %+v, %v; want %s", why, got, err, want)
		}
	}
	dark := func(t *testing.T, env *deciderEnv) bool {
		t.Helper()
		z, err := env.d.darkness("z", env.d.evidence.zoneClaim(zone.LeaseName("z"), nil), env.clock.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return z.dark
	}

	t.Run("the whole zone cut long after the last quiet renewal", func(t *testing.T) {
		env, n1 := setup(t)
		env.clock.Step(30 * time.Second)
		kubelets(t, env, "n1", "n2", "n3")
		decide(t, env, n1, ReasonZoneLeaseFresh, "every kubelet heard")
		if dark(t, env) {
			t.Error("a zone whose kubelets renew is dark")
		}
		// No kubelet for six fifths of an interval: the zone went dark,
		// 30 s before its quiet renewal would have lapsed.
		env.clock.Step(6*time.Second + time.Millisecond)
		decide(t, env, n1, ReasonZoneCutOff, "every kubelet silent, no renewal since")
		if !dark(t, env) {
			t.Error("the zone view does not call the cut zone dark")
		}
		if j, err := env.d.judgement(n1); err != nil || j.leaderReachesCloud {
			t.Errorf("judgement in the cut: %+v, %v; want its leader not reaching the cloud", j, err)
		}
		env.clock.Step(24 * time.Hour)
		decide(t, env, n1, ReasonCutOffExpired, "a day later")
	})

	t.Run("one member silent while the others are heard", func(t *testing.T) {
		env, n1 := setup(t)
		env.clock.Step(30 * time.Second)
		kubelets(t, env, "n1", "n2", "n3")
		env.clock.Step(9 * time.Second)
		kubelets(t, env, "n2", "n3")
		// The zone Lease carries every member's word that it reaches n1:
		// a quiet renewal vouches on it for no node the cloud cannot hear
		// (an honest one carries none).
		decide(t, env, n1, ReasonNoQuorumEvidence, "n1 silent 9 s, the others heard")
	})

	t.Run("a quiet renewal after every kubelet fell silent", func(t *testing.T) {
		env, n1 := setup(t)
		env.clock.Step(30 * time.Second)
		kubelets(t, env, "n1", "n2", "n3")
		env.clock.Step(10 * time.Second)
		renewLease(t, env, zone.DefaultLeaseNamespace, zone.LeaseName("z"), func(*coordinationv1.Lease) *coordinationv1.Lease {
			return quietLease(env.clock.Now(), quietFor)
		})
		// The leader reaches the cloud and says nothing is wrong: not a
		// cut, and no node the cloud cannot hear is vouched for on it.
		decide(t, env, n1, ReasonNoQuorumEvidence, "renewed quietly 10 s after the last kubelet")
		if dark(t, env) {
			t.Error("a zone renewed after its kubelets fell silent is dark")
		}
	})

	t.Run("a member silent before the zone went dark", func(t *testing.T) {
		env, _ := setup(t)
		n3, _ := env.d.caches.Nodes.Get("n3")
		env.clock.Step(30 * time.Second)
		kubelets(t, env, "n1", "n2")
		env.clock.Step(6*time.Second + time.Millisecond)
		// n3 fell silent 36 s ago; the zone's leader still called it
		// healthy. The cloud saw n1 and n2 alive when the zone went dark,
		// not n3.
		decide(t, env, n3, ReasonSilentBeforeCut, "n3, silent since 30 s before the cut")
		n1, _ := env.d.caches.Nodes.Get("n1")
		decide(t, env, n1, ReasonZoneCutOff, "n1, heard until the cut")
	})

	t.Run("the quiet renewal lapses while the kubelets renew", func(t *testing.T) {
		env, n1 := setup(t)
		for range 14 {
			env.clock.Step(5 * time.Second)
			kubelets(t, env, "n1", "n2", "n3")
		}
		// 70 s: the leader did not renew within the quiet Lease's 60 s,
		// while the cloud hears the kubelets: the zone's quorum is gone.
		decide(t, env, n1, ReasonZoneNotCutOff, "the quiet Lease lapsed, kubelets heard")
		env.clock.Step(7 * time.Second)
		decide(t, env, n1, ReasonZoneNotCutOff, "then every kubelet silent too")
	})
}
