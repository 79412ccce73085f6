package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// TestRollingUpgradeFromTheLastRelease upgrades a zone of five agent
// processes from the last release (built from the commit
// hack/release/last-release pins) to this tree one member at a time, as the
// DaemonSet's rolling update would, followers first and the leader last if it
// still leads by then (after the cut, a leader that has not heard the
// apiserver again yet hands leadership to a voter that has, which may be an
// upgraded one), under this tree's webhook (the
// policy: webhook first). Mid-roll the whole zone is cut from the cloud;
// after the roll a node dies; then the leader is rolled back. No verdict of a
// live node changes during the roll, no node is tainted unreachable nor loses
// a pod, the dead node is judged on the usual schedule, and every stop of a
// leader hands leadership over first.
func TestRollingUpgradeFromTheLastRelease(t *testing.T) {
	last, lastVersion := lastReleaseBinary(t)
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	head := filepath.Join(bin, "edgequorum")
	headVersion := treeVersion(t)
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-u", Nodes: 5, Binary: last})
	ctx := context.Background()
	client := c.Client()
	all := names(z)
	waitHealthy(t, client, 2*time.Minute, all)
	requireReleases(t, z, map[string]string{"edge-u-1": lastVersion, "edge-u-2": lastVersion, "edge-u-3": lastVersion, "edge-u-4": lastVersion, "edge-u-5": lastVersion})

	// This tree's webhook: the policy upgrades it first.
	startWebhookBinary(t, c, head, zonerun.WebhookInstall)
	web := deployApp(t, client, "web", all)
	web.waitPodsReady(t, client, all...)
	taints := watchTaints(t, client, all)
	flips := watchVerdicts(t, client, all)

	releases := map[string]string{}
	for _, n := range all {
		releases[n] = lastVersion
	}
	handovers := 0
	var order []*zonerun.Agent
	for i := range all {
		if i == 2 {
			// A whole-zone cut in the middle of the roll: two members run
			// this tree, three the last release.
			z.CutCloud()
			took := waitAllUnknown(t, client, all, 2*time.Minute)
			t.Logf("mixed zone cut off: every node Unknown %s after the cut", took.Round(time.Second))
			holdZoneProtected(t, client, web, taints, all, (tolerationSeconds+10)*time.Second)
			if err := z.ReconnectCloud(ctx); err != nil {
				t.Fatal(err)
			}
			waitNodesReady(t, client, "the reconnected zone", all)
		}
		// The leader last: a member that follows, while one is left.
		a := nextToRoll(t, z, releases, lastVersion)
		order = append(order, a)
		if upgrade(t, z, a, head) {
			handovers++
		}
		releases[a.Name] = headVersion
		requireReleases(t, z, releases)
	}
	if seen := flips.seen(); len(seen) > 0 {
		t.Errorf("verdicts of live nodes changed during the roll: %v", seen)
	}
	if seen := taints.seen(); len(seen) > 0 {
		t.Errorf("unreachable:NoExecute was stored during the roll on %v", seen)
	}
	if del := web.deletedPods(t, client); len(del) > 0 {
		t.Errorf("pods deleted during the roll: %v", del)
	}
	flips.stop()

	// A node dies after the roll: judged on the usual schedule.
	victim := order[0]
	killed := time.Now()
	victim.Kill()
	victim.Kubelet.Kill()
	waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Unhealthy})
	t.Logf("dead node %s judged unhealthy %s after it died", victim.Name, time.Since(killed).Round(100*time.Millisecond))
	if err := victim.Kubelet.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	waitStates(t, client, 2*time.Minute, map[string]zone.State{victim.Name: zone.Healthy})

	// A rollback of the leader to the last release: it hands over, rejoins
	// with its data dir and identity, and the zone judges on.
	back, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if upgrade(t, z, back, last) {
		handovers++
	}
	releases[back.Name] = lastVersion
	requireReleases(t, z, releases)
	waitHealthy(t, client, 2*time.Minute, all)
	if handovers == 0 {
		t.Error("no leader was stopped during the roll or the rollback")
	}
}

// nextToRoll picks a member still on release old, a follower while one is
// left: a rolling update that leaves the leader for last.
func nextToRoll(t *testing.T, z *zonerun.Zone, releases map[string]string, old string) *zonerun.Agent {
	t.Helper()
	leader, err := z.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pick *zonerun.Agent
	for _, a := range z.Agents() {
		if releases[a.Name] != old {
			continue
		}
		if a != leader {
			return a
		}
		pick = a
	}
	return pick
}

// upgrade replaces a's agent with binary as a rolling update does: stop,
// swap, start; then waits until it is back in its zone with its server ID. A
// leader must hand leadership over before it stops; upgrade says whether a
// led.
func upgrade(t *testing.T, z *zonerun.Zone, a *zonerun.Agent, binary string) (led bool) {
	t.Helper()
	ctx := context.Background()
	before, err := a.Status(ctx)
	if err != nil {
		t.Fatalf("%s: %v", a.Name, err)
	}
	leading := before.State == "Leader"
	t.Logf("%s (%s, %s) stops for %s", a.Name, before.State, before.Release, filepath.Base(filepath.Dir(binary)))
	stopped := time.Now()
	a.Stop()
	if leading {
		poll.Until(t, 15*time.Second, "a new leader after "+a.Name+" stopped", func() (bool, string) {
			l, err := z.Leader(ctx)
			if err != nil {
				return false, err.Error()
			}
			return l != a, "still " + l.Name
		})
		log, _ := os.ReadFile(a.LogPath)
		if !strings.Contains(string(log), "stopping as leader; handing leadership over") {
			t.Errorf("leader %s stopped without handing leadership over", a.Name)
		}
		t.Logf("leader %s handed over; a new leader %s after it stopped", a.Name, time.Since(stopped).Round(100*time.Millisecond))
	}
	a.SetBinary(binary)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, a.Name+" back in its zone", func() (bool, string) {
		st, err := a.Status(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Ready && st.ServerID == before.ServerID, fmt.Sprintf("state %s ready %v server %s", st.State, st.Ready, st.ServerID)
	})
	return leading
}

// requireReleases waits until the zone's leader has committed every member's
// announcement of the release it runs, and its zone stays at a level every
// member reads.
func requireReleases(t *testing.T, z *zonerun.Zone, want map[string]string) {
	t.Helper()
	var st raftzone.Status
	poll.Until(t, time.Minute, fmt.Sprintf("releases %v announced", want), func() (bool, string) {
		l, err := z.Leader(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if st, err = l.Status(context.Background()); err != nil {
			return false, err.Error()
		}
		for _, m := range st.Members {
			if w, ok := want[m.Node]; ok && m.Release != w {
				return false, fmt.Sprintf("%s announces %q", m.Node, m.Release)
			}
		}
		return true, ""
	})
	lowest := st.Level
	for _, m := range st.Members {
		lowest = min(lowest, m.Level)
	}
	if st.ZoneLevel != lowest {
		t.Errorf("the leader keeps its zone at %v; its members announce down to %v", st.ZoneLevel, lowest)
	}
}

// treeVersion is the release `make build` stamps this tree's binary with.
func treeVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// lastReleaseBinary builds the agent of the release hack/release/last-release
// pins, from that commit checked out in a git worktree, once per commit into
// the bin directory; it returns the binary and the release.
func lastReleaseBinary(t *testing.T) (binary, version string) {
	t.Helper()
	raw, err := os.ReadFile("../hack/release/last-release")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		t.Fatalf("hack/release/last-release: want \"<version> <commit>\", got %q", raw)
	}
	version, commit := f[0], f[1]
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	binary = filepath.Join(bin, "last-release", version+"-"+commit[:12], "edgequorum")
	if _, err := os.Stat(binary); err == nil {
		return binary, version
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "src")
	run := func(dir string, env []string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	run(root, nil, "git", "worktree", "add", "--detach", src, commit)
	t.Cleanup(func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", src).Run() })
	const bi = "github.com/edgequorum/edgequorum/internal/buildinfo"
	started := time.Now()
	run(src, []string{"CGO_ENABLED=0"}, "go", "build", "-trimpath",
		"-ldflags", "-X "+bi+".version="+version+" -X "+bi+".revision="+commit[:12],
		"-o", binary, "./cmd/edgequorum")
	t.Logf("built %s (%s) in %s", version, commit[:12], time.Since(started).Round(time.Second))
	return binary, version
}

// verdictWatch records every verdict of watched nodes that is not healthy.
type verdictWatch struct {
	mu    sync.Mutex
	flips map[string][]string
	stop  func()
}

func watchVerdicts(t *testing.T, c kubernetes.Interface, nodes []string) *verdictWatch {
	t.Helper()
	vw := &verdictWatch{flips: map[string][]string{}}
	vw.stop = watchNodes(t, c, nodes, func(n *corev1.Node) {
		a, err := zone.ParseAnnotation(n.Annotations[zone.AnnotationKey])
		if err != nil || a.State == zone.Healthy {
			return
		}
		vw.mu.Lock()
		vw.flips[n.Name] = append(vw.flips[n.Name], fmt.Sprintf("%s by %s in term %d", a.State, a.Leader, a.Term))
		vw.mu.Unlock()
	})
	return vw
}

func (vw *verdictWatch) seen() map[string][]string {
	vw.mu.Lock()
	defer vw.mu.Unlock()
	out := make(map[string][]string, len(vw.flips))
	for k, v := range vw.flips {
		out[k] = v
	}
	return out
}
