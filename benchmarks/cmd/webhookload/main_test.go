package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestMain lets the test binary stand in for the webhook child: drive
// re-executes its own binary with -serve.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], "-serve") {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestDriveSmall runs the whole measurement small and checks what it
// reports, not how fast: every review of every kind answered, and every one
// changed by the webhook, so the figures are those of its most expensive path.
func TestDriveSmall(t *testing.T) {
	out := t.TempDir()
	o := options{nodes: 100, pods: 1000, zoneSize: 50, rate: 100, duration: time.Second, out: out,
		memLimit: 512 << 20, driverCPU: -1, webhookCPU: -1}
	if err := drive(o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "webhook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, k := range rep.Kinds {
		kinds = append(kinds, k.Kind)
		if k.Reviews != 100 || k.Errors != 0 || k.Mutated != k.Reviews {
			t.Errorf("%s: %d reviews, %d errors, %d mutated; want 100, none, all", k.Kind, k.Reviews, k.Errors, k.Mutated)
		}
		if k.P99ms <= 0 || k.CPUShare <= 0 {
			t.Errorf("%s: p99 %v ms, CPU %v: not measured", k.Kind, k.P99ms, k.CPUShare)
		}
	}
	if !slices.Equal(kinds, []string{"node", "podstatus", "endpointslice"}) {
		t.Errorf("kinds %v", kinds)
	}
	if rep.PeakRSSMiB <= 0 || rep.IdleRSSMiB <= 0 || rep.LiveHeapMiB <= 0 {
		t.Errorf("RSS after sync %v MiB, peak %v MiB, live heap %v MiB: not measured", rep.IdleRSSMiB, rep.PeakRSSMiB, rep.LiveHeapMiB)
	}
	// The cluster is the state after the webhook's work: the repair loop
	// leads and finds nothing to write to nodes, pods or endpoints.
	if !rep.Repair.RepairLeader {
		t.Error("the repair loop did not lead")
	}
	for w := range rep.Repair.Writes {
		if !strings.HasSuffix(w, " leases") && !strings.HasSuffix(w, " configmaps") && !strings.HasSuffix(w, " events") {
			t.Errorf("the repair loop wrote: %s", w)
		}
	}
	if rep.Repair.Warnings+rep.Repair.Errors > 0 {
		t.Errorf("%d warnings and %d errors logged: %q", rep.Repair.Warnings, rep.Repair.Errors, rep.Repair.Problems)
	}
	if _, err := os.Stat(filepath.Join(out, "webhook.md")); err != nil {
		t.Error(err)
	}
}

// TestDueAt checks that reviews are due on the open-loop schedule, each
// 1/rate after the one before, from the start and not from the last send.
func TestDueAt(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		i, rate int
		want    time.Duration
	}{
		{0, 500, 0}, {1, 500, 2 * time.Millisecond}, {500, 500, time.Second}, {1, 3, 333333333}, {29_999, 500, 59998 * time.Millisecond},
	} {
		if got := dueAt(start, c.i, c.rate).Sub(start); got != c.want {
			t.Errorf("review %d at %d/s due after %v, want %v", c.i, c.rate, got, c.want)
		}
	}
}

// TestNodeSize checks that the Nodes are the size real ones are, 10-20 KB
// as JSON, and carry what a kubelet reports.
func TestNodeSize(t *testing.T) {
	c, err := buildCluster(30, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range c.nodes {
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
		if len(n.Status.Images) < 40 || len(n.Status.Images) > 50 || len(n.Status.Conditions) < 5 || n.Status.NodeInfo.KubeletVersion == "" {
			t.Errorf("%s: %d images, %d conditions, node info %+v", n.Name, len(n.Status.Images), len(n.Status.Conditions), n.Status.NodeInfo)
		}
	}
	if mean := total / len(c.nodes); mean < 10_000 || mean > 20_000 {
		t.Errorf("mean Node JSON %d bytes, want 10-20 KB", mean)
	}
}

// TestMemoryLimitAsDeployed keeps -memory-limit's default the webhook
// container's memory limit as shipped.
func TestMemoryLimitAsDeployed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "webhook", "base", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "webhook" {
			if got := c.Resources.Limits[corev1.ResourceMemory]; got.String() != deployedMemoryLimit {
				t.Errorf("the webhook container's memory limit is %s, -memory-limit defaults to %s", got.String(), deployedMemoryLimit)
			}
			return
		}
	}
	t.Error("no webhook container in the Deployment")
}
