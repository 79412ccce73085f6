package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// TestZoneLiveness acts on fresh zones at the moment a user could: right after
// the zone first reports every verdict healthy and names a leader. Each
// scenario gets a zone of its own on one real control plane (controller
// manager grace 20 s).
func TestZoneLiveness(t *testing.T) {
	requireNft(t)
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{AuditPolicy: testcluster.WriteAuditPolicy})
	client := c.Client()
	ctx := context.Background()

	// fresh starts a zone and returns it the moment every verdict first reads
	// healthy, with its leader.
	fresh := func(t *testing.T, name string, n int) (*zonerun.Zone, *zonerun.Agent) {
		t.Helper()
		z := startZoneOn(t, c, zonerun.Options{Zone: name, Nodes: n})
		took := waitStates(t, client, 2*time.Minute, allStates(z, zone.Healthy))
		var l *zonerun.Agent
		poll.Until(t, 30*time.Second, "a leader", func() (bool, string) {
			var err error
			l, err = z.Leader(ctx)
			return err == nil, fmt.Sprint(err)
		})
		st, err := l.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("zone %s of %d reported healthy %s after start; its leader %s has %d of %d voters; third member admitted -> three voters in %s",
			name, n, took.Round(100*time.Millisecond), l.Name, st.Voters, st.WantVoters, threeVotersAfter(t, l.LogPath))
		return z, l
	}

	t.Run("leader killed right after formation", func(t *testing.T) {
		z, l := fresh(t, "edge-lk", 5)
		l.Kill()
		took := poll.Until(t, 30*time.Second, "a new leader", func() (bool, string) {
			nl, err := z.Leader(ctx)
			return err == nil && nl != l, fmt.Sprint(err)
		})
		t.Logf("new leader %s after the leader was killed (target 5 s)", took.Round(100*time.Millisecond))
	})

	t.Run("leader partitioned right after formation", func(t *testing.T) {
		z, l := fresh(t, "edge-lp", 5)
		var rest []string
		for _, a := range z.Agents() {
			if a != l {
				rest = append(rest, a.IP)
			}
		}
		partition(t, []string{l.IP}, rest)
		took := poll.Until(t, 30*time.Second, "a new leader among the rest", func() (bool, string) {
			for _, a := range z.Agents() {
				if a == l {
					continue
				}
				if st, err := a.Status(ctx); err == nil && st.State == "Leader" {
					return true, ""
				}
			}
			return false, "none leads"
		})
		t.Logf("new leader %s after the leader was partitioned (target 10 s)", took.Round(100*time.Millisecond))
		waitStates(t, client, time.Minute, map[string]zone.State{l.Name: zone.Unhealthy})
	})

	t.Run("fresh zone of four split in halves", func(t *testing.T) {
		z, _ := fresh(t, "edge-sp", 4)
		as := z.Agents()
		before := annotations(t, client, z)
		partition(t, []string{as[0].IP, as[1].IP}, []string{as[2].IP, as[3].IP})
		// Long enough for either half to judge the other: probes fail
		// within seconds and a vote timeout is 10 s.
		holdFor(t, 30*time.Second, "verdicts of a split zone", func() (bool, string) {
			now := annotations(t, client, z)
			for n, a := range now {
				if a.State != before[n].State || a.Term != before[n].Term {
					return false, fmt.Sprintf("%s: %s (term %d) became %s (term %d)", n, before[n].State, before[n].Term, a.State, a.Term)
				}
			}
			return true, ""
		})
	})

	t.Run("leader cut from the cloud", func(t *testing.T) {
		z, l := fresh(t, "edge-lc", 4)
		startWebhook(t, c, z)
		all := names(z)
		web := deployApp(t, client, "lc", all)
		taints := watchTaints(t, client, all)
		lease0 := zoneLease(t, client, "edge-lc")

		cutAt := time.Now()
		l.CutCloud()
		took := poll.Until(t, 30*time.Second, "another member renews the zone Lease", func() (bool, string) {
			lease := zoneLease(t, client, "edge-lc")
			holder := ptr.Deref(lease.Spec.HolderIdentity, "")
			return holder != l.Name && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(cutAt), "holder " + holder
		})
		t.Logf("leader cut from the cloud -> new holder renewed the zone Lease after %s (target 10 s; Lease valid for %ds)",
			took.Round(100*time.Millisecond), ptr.Deref(lease0.Spec.LeaseDurationSeconds, 0))
		if took > time.Duration(ptr.Deref(lease0.Spec.LeaseDurationSeconds, 0))*time.Second {
			t.Errorf("the zone Lease lapsed during the handover: renewed after %s, valid for %ds", took, ptr.Deref(lease0.Spec.LeaseDurationSeconds, 0))
		}

		protected := func() (bool, string) {
			if del := web.deletedPods(t, client); len(del) > 0 {
				return false, fmt.Sprintf("pods deleted: %v", del)
			}
			if ready := web.readyEndpoints(t, client); len(ready) != len(all) {
				return false, fmt.Sprintf("only %d of %d endpoints ready", len(ready), len(all))
			}
			if _, tainted := nodeCondition(t, client, l.Name); tainted {
				return false, l.Name + " holds unreachable:NoExecute"
			}
			return true, ""
		}
		poll.Until(t, 2*time.Minute, l.Name+" Ready=Unknown", func() (bool, string) {
			st, _ := nodeCondition(t, client, l.Name)
			return st == corev1.ConditionUnknown, string(st)
		})
		settleProtection(t, protected)
		holdFor(t, 3*tolerationSeconds*time.Second, "protection of the cut leader's node", protected)
		// The zone Lease never lapsed, so the webhook stripped the taint at
		// admission every time: no stored version of any zone node had it.
		if seen := taints.seen(); len(seen) > 0 {
			t.Errorf("unreachable:NoExecute was stored on %v", seen)
		}
	})

	t.Run("three of five voters lost for good, then recovered", func(t *testing.T) {
		z, l := fresh(t, "edge-rc", 5)
		poll.Until(t, 30*time.Second, "five voters", func() (bool, string) {
			st, err := l.Status(ctx)
			return err == nil && st.Voters == 5, fmt.Sprintf("%d voters", st.Voters)
		})
		// The leader and two more voters die; two survive.
		dead := []*zonerun.Agent{l}
		var survivors []*zonerun.Agent
		for _, a := range z.Agents() {
			switch {
			case a == l:
			case len(dead) < 3:
				dead = append(dead, a)
			default:
				survivors = append(survivors, a)
			}
		}
		var deadNames []string
		for _, a := range dead {
			a.Kill()
			a.Kubelet.Kill()
			deadNames = append(deadNames, a.Name)
		}
		poll.Until(t, 30*time.Second, "no leader among the survivors", func() (bool, string) {
			for _, a := range survivors {
				if st, err := a.Status(ctx); err != nil || st.Leader != "" {
					return false, fmt.Sprintf("%s sees leader %q (%v)", a.Name, st.Leader, err)
				}
			}
			return true, ""
		})
		// Recovery runs on one survivor: the command asks its agent, which
		// refuses a request that leaves a quorum standing...
		r := survivors[0]
		recoverCmd := func(dead ...string) (string, error) {
			out, err := exec.Command(z.Binary(), "recover", "--data-dir", r.DataDir, "--address", r.StatusAddress(),
				"--dead", strings.Join(dead, ",")).CombinedOutput()
			return string(out), err
		}
		if out, err := recoverCmd(deadNames[:2]...); err == nil || !strings.Contains(out, "that is a quorum") {
			t.Fatalf("recover naming two of three lost voters: %v\n%s", err, out)
		}
		// ...and writes the real one, acted on when the agent restarts.
		if out, err := recoverCmd(deadNames...); err != nil {
			t.Fatalf("recover: %v\n%s", err, out)
		}
		r.Stop()
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		lease0 := zoneLease(t, client, "edge-rc")
		took := poll.Until(t, time.Minute, "the recovered zone renews its Lease", func() (bool, string) {
			lease := zoneLease(t, client, "edge-rc")
			term, _ := strconv.ParseUint(lease.Annotations[zone.LeaseTermAnnotation], 10, 64)
			old, _ := strconv.ParseUint(lease0.Annotations[zone.LeaseTermAnnotation], 10, 64)
			return ptr.Deref(lease.Spec.HolderIdentity, "") == r.Name && term > old, fmt.Sprintf("holder %s term %d", ptr.Deref(lease.Spec.HolderIdentity, ""), term)
		})
		t.Logf("zone recovered %s after the agent restarted", took.Round(100*time.Millisecond))
		want := map[string]zone.State{}
		for _, n := range deadNames {
			want[n] = zone.Unhealthy
		}
		waitStates(t, client, time.Minute, want)
		poll.Until(t, time.Minute, "the other survivors voting again", func() (bool, string) {
			st, err := r.Status(ctx)
			return err == nil && st.Voters == len(survivors) && !st.Forming, fmt.Sprintf("%d voters", st.Voters)
		})
		// Verdicts continue: a survivor's kubelet dies and the zone judges it.
		victim := survivors[len(survivors)-1]
		victim.Kubelet.Kill()
		waitStates(t, client, time.Minute, map[string]zone.State{victim.Name: zone.Unhealthy})
	})
}

// threeVotersAfter reads a founder's log: the time from the third member's
// admission (the founder is the first) to the promotion that made three
// voters.
func threeVotersAfter(t *testing.T, logPath string) string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err.Error()
	}
	stamp := func(line string) time.Time {
		f, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, _ := time.Parse(time.RFC3339Nano, f)
		return at
	}
	admitted, voters := 1, 1
	var third time.Time
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, `msg="admitted member as nonvoter"`):
			if admitted++; admitted == 3 {
				third = stamp(line)
			}
		case strings.Contains(line, `msg="promoted member to voter"`):
			if voters++; voters == 3 && !third.IsZero() {
				return stamp(line).Sub(third).Round(time.Millisecond).String()
			}
		}
	}
	return "not seen (this member did not found the zone)"
}

func allStates(z *zonerun.Zone, st zone.State) map[string]zone.State {
	out := map[string]zone.State{}
	for _, n := range names(z) {
		out[n] = st
	}
	return out
}

func annotations(t *testing.T, c kubernetes.Interface, z *zonerun.Zone) map[string]zone.Annotation {
	t.Helper()
	out := map[string]zone.Annotation{}
	for _, n := range names(z) {
		a, _ := annotation(t, c, n)
		out[n] = a
	}
	return out
}

func zoneLease(t *testing.T, c kubernetes.Interface, zoneName string) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases("edgequorum-system").Get(context.Background(), zone.LeaseName(zoneName), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
