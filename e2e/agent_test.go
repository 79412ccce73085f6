package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// TestAgentZone runs a zone of five agents (default timings) next to a cloud
// node on the real control plane: one leader, five healthy annotations written
// once each; a dead node judged unhealthy; a dead leader replaced without any
// survivor's annotation flipping; and the apiserver writes counted from the
// audit log.
func TestAgentZone(t *testing.T) {
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-a", Nodes: 5})
	ctx := context.Background()
	client := c.Client()
	all := names(z)

	took := waitHealthy(t, client, 2*time.Minute, all)
	t.Logf("zone of 5 formed and wrote five healthy verdicts in %s", took.Round(100*time.Millisecond))

	var leader *zonerun.Agent
	poll.Until(t, 30*time.Second, "one leader", func() (bool, string) {
		l, err := z.Leader(ctx)
		if err != nil {
			return false, err.Error()
		}
		leader = l
		return true, ""
	})
	poll.Until(t, 30*time.Second, "zone lease held by the leader", func() (bool, string) {
		l, err := client.CoordinationV1().Leases("edgequorum-system").Get(ctx, zone.LeaseName("edge-a"), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ptr.Deref(l.Spec.HolderIdentity, "") == leader.Name, "holder " + ptr.Deref(l.Spec.HolderIdentity, "")
	})

	// `edgequorum status` shows the live zone.
	status := runStatus(t, z, leader)
	for _, n := range all {
		if !strings.Contains(status, n) {
			t.Errorf("status table lacks %s:\n%s", n, status)
		}
	}
	if !strings.Contains(status, "Leader") || strings.Count(status, "healthy") < 5 {
		t.Errorf("status table does not show a led, healthy zone:\n%s", status)
	}

	// A node dies: agent and kubelet listener.
	var victim *zonerun.Agent
	for _, a := range z.Agents() {
		if a != leader {
			victim = a
			break
		}
	}
	vst, err := victim.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victimID := vst.ServerID
	killedAt := time.Now()
	victim.Kill()
	victim.Kubelet.Kill()
	waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Unhealthy})
	t.Logf("dead node %s judged unhealthy %s after it died (KCM's default grace is 50s)", victim.Name, time.Since(killedAt).Round(100*time.Millisecond))
	// The leader records a verdict's Event right after its write (best
	// effort: a leader killed between the two loses it); kill it only once
	// the Event is there, so that the count below is exact.
	requireLeaderEvent(t, client, victim.Name, apiwriter.EventJudgedUnhealthy)

	// The leader dies: a new one renews the zone Lease; no survivor flips.
	before, err := client.CoordinationV1().Leases("edgequorum-system").Get(ctx, zone.LeaseName("edge-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaderKilled := time.Now()
	leader.Kill()
	leader.Kubelet.Kill()
	var newHolder string
	took = poll.Until(t, time.Minute, "a new leader renews the zone lease", func() (bool, string) {
		l, err := client.CoordinationV1().Leases("edgequorum-system").Get(ctx, zone.LeaseName("edge-a"), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		newHolder = ptr.Deref(l.Spec.HolderIdentity, "")
		return newHolder != leader.Name && l.Spec.RenewTime.After(before.Spec.RenewTime.Time), "holder " + newHolder
	})
	t.Logf("new leader %s renewed the zone lease %s after the old leader died", newHolder, took.Round(100*time.Millisecond))
	waitStates(t, client, 2*time.Minute, map[string]zone.State{leader.Name: zone.Unhealthy})
	t.Logf("dead leader judged unhealthy %s after it died", time.Since(leaderKilled).Round(100*time.Millisecond))
	requireLeaderEvent(t, client, leader.Name, apiwriter.EventJudgedUnhealthy)

	// Writes: one node-key registration per node when its agent first
	// starts, then exactly one node patch per verdict change (5 healthy, 2
	// unhealthy), and nothing else on nodes: the new leader leaves its
	// predecessor's signed verdicts standing and vouches for them in the
	// zone Lease. Leases only the zone's.
	// Each verdict change is one nodes/status write carrying the verdict and
	// the EdgeQuorum condition that shows it.
	writes := agentWrites(t, c)
	perNode, verdictWrites := map[string]int{}, map[string]int{}
	for _, e := range writes["nodes"] {
		if e.Verb != "patch" {
			t.Errorf("agent %s node %s", e.Verb, e.ObjectRef.Name)
		}
		perNode[e.ObjectRef.Name]++
		if e.ObjectRef.Subresource == "status" {
			verdictWrites[e.ObjectRef.Name]++
		}
	}
	for _, n := range all {
		want := 1
		if n == victim.Name || n == leader.Name {
			want = 2
		}
		if perNode[n] != 1+want || verdictWrites[n] != want {
			t.Errorf("node %s: %d writes, %d of them verdicts; want %d (its key registration and one per verdict change), %d",
				n, perNode[n], verdictWrites[n], 1+want, want)
		}
		requireConditionShowsVerdict(t, client, n)
	}
	for _, n := range all {
		if n == victim.Name || n == leader.Name {
			continue
		}
		if a, _ := annotation(t, client, n); a.State != zone.Healthy {
			t.Errorf("survivor %s flipped to %s", n, a.State)
		}
	}
	leaseWrites := 0
	for _, e := range writes["leases"] {
		if e.ObjectRef.Name != zone.LeaseName("edge-a") && e.ObjectRef.Name != zone.GenesisLeaseName("edge-a") {
			t.Errorf("agent wrote lease %s", e.ObjectRef.Name)
		}
		leaseWrites++
	}
	// Events: one on the Node per verdict change, one on the zone Lease
	// per new leader (the founder, then the one that took over).
	nodeEvents, leaseEvents := 0, 0
	for _, e := range writes["events"] {
		switch e.ObjectRef.Namespace {
		case "default":
			nodeEvents++
		case "edgequorum-system":
			leaseEvents++
		default:
			t.Errorf("agent recorded Event %s/%s", e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
	}
	if nodeEvents != 7 || leaseEvents < 2 {
		t.Errorf("agents recorded %d Events on Nodes for 7 verdict changes and %d on the zone Lease for at least 2 leaders", nodeEvents, leaseEvents)
	}
	for res := range writes {
		if res != "nodes" && res != "leases" && res != "events" {
			t.Errorf("agents wrote %s", res)
		}
	}
	t.Logf("agent writes: %d node patches for 5 key registrations and 7 verdict changes, %d lease writes, %d Events on Nodes, %d on the zone Lease",
		len(writes["nodes"]), leaseWrites, nodeEvents, leaseEvents)

	// kill -9 lost nothing: the dead node comes back with its data dir, keeps
	// its server ID and is judged healthy again.
	if err := victim.Kubelet.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	var st raftzone.Status
	poll.Until(t, time.Minute, victim.Name+" rejoined", func() (bool, string) {
		var err error
		st, err = victim.Status(ctx)
		return err == nil && st.Ready, fmt.Sprintf("%+v %v", st.State, err)
	})
	if st.ServerID != victimID {
		t.Errorf("%s came back as server %s, was %s", victim.Name, st.ServerID, victimID)
	}
	took = waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Healthy})
	t.Logf("restarted node %s judged healthy again %s after it was ready", victim.Name, took.Round(100*time.Millisecond))

	// A verdict the API lost comes back without any change of verdict: the
	// leader sees the Node without it and writes it again.
	var survivor string
	for _, n := range all {
		if n != victim.Name && n != leader.Name && n != newHolder {
			survivor = n
			break
		}
	}
	kept, ok := annotation(t, client, survivor)
	if !ok {
		t.Fatalf("%s has no verdict", survivor)
	}
	remove := []byte(`[{"op":"remove","path":"/metadata/annotations/edgequorum.io~1verdict"}]`)
	if _, err := client.CoreV1().Nodes().Patch(ctx, survivor, types.JSONPatchType, remove, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	took = poll.Until(t, time.Minute, survivor+" verdict restored", func() (bool, string) {
		a, ok := annotation(t, client, survivor)
		return ok && a.State == kept.State && a.Term == kept.Term && a.At.Equal(kept.At), fmt.Sprintf("%+v present=%v", a, ok)
	})
	t.Logf("verdict removed from %s was written back %s later", survivor, took.Round(time.Millisecond))
}

func runStatus(t *testing.T, z *zonerun.Zone, a *zonerun.Agent) string {
	t.Helper()
	bin := z.Binary()
	out, err := exec.Command(bin, "status", "--address", a.StatusAddress()).CombinedOutput()
	if err != nil {
		t.Fatalf("edgequorum status: %v\n%s", err, out)
	}
	t.Logf("edgequorum status:\n%s", out)
	return string(out)
}
