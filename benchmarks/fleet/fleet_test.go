package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

func TestValidateNamesEveryBadFlag(t *testing.T) {
	cfg := Config{Sites: []int{0}, NodesPerSite: 12, PodsPerNode: -1, NodeBytes: 10, Dilation: 0.5, Windows: 0, OutageAt: 7}
	err := cfg.Validate()
	for _, want := range []string{"-sites: 0", "-nodes-per-site 12", "-pods-per-node -1", "-node-bytes 10",
		"-dilation 0.5", "-windows 0", "-outage-at 7", "-bin is required", "-work is required", "-out is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

func TestDilationKeepsTheFleetWithinTheBudget(t *testing.T) {
	cfg := DefaultConfig()
	for _, sites := range []int{10, 300, 3000, 10000} {
		d := cfg.dilation(sites)
		if d < 1 {
			t.Errorf("%d sites: dilation %g speeds time up", sites, d)
		}
		if rate := cfg.steadyRate(sites) / d; rate > cfg.RequestBudget*1.0001 && d > 1 {
			t.Errorf("%d sites: %g requests/s at dilation %g, over the budget %g", sites, rate, d, cfg.RequestBudget)
		}
	}
	if d := cfg.dilation(10); d != 1 {
		t.Errorf("a fleet well within the budget runs at dilation %g, want real time", d)
	}
	cfg.Dilation = 7
	if d := cfg.dilation(10000); d != 7 {
		t.Errorf("-dilation 7 gave %g", d)
	}
}

func TestClassifyTellsTheSourcesApart(t *testing.T) {
	ev := func(user, impersonated, verb, resource, ns, sub string) *auditEvent {
		e := &auditEvent{Verb: verb, User: testcluster.AuditUser{Username: user},
			ObjectRef: &testcluster.AuditObjectRef{Resource: resource, Namespace: ns, Subresource: sub}}
		if impersonated != "" {
			e.ImpersonatedUser = &testcluster.AuditUser{Username: impersonated}
		}
		return e
	}
	for _, c := range []struct {
		e                   *auditEvent
		who, kind, resource string
	}{
		{ev("edgequorum-admin", "system:node:site-00001-n0", "update", "leases", "kube-node-lease", ""), whoKubelet, kindWrite, "leases (node)"},
		{ev("edgequorum-admin", "system:node:site-00001-n0", "patch", "nodes", "", "status"), whoKubelet, kindWrite, "nodes/status"},
		{ev("edgequorum-admin", agentUser, "update", "leases", "edgequorum-system", ""), whoEdgequorum, kindWrite, "leases"},
		{ev("edgequorum-admin", agentUser, "create", "selfsubjectreviews", "", ""), whoEdgequorum, kindReview, "selfsubjectreviews"},
		{ev("edgequorum-admin", agentUser, "get", "leases", "edgequorum-webhook", ""), whoEdgequorum, kindRead, "leases"},
		{ev("system:serviceaccount:edgequorum-webhook:edgequorum-webhook", "", "patch", "edgezones", "", "status"), whoWebhook, kindWrite, "edgezones/status"},
		{ev("system:serviceaccount:kube-system:node-controller", "", "patch", "nodes", "", ""), whoKCM, kindWrite, "nodes"},
		{ev("edgequorum-admin", "", "create", "nodes", "", ""), whoOther, kindWrite, "nodes"},
	} {
		who, kind, res := classify(c.e)
		if who != c.who || kind != c.kind || res != c.resource {
			t.Errorf("%+v: got %s %s %s, want %s %s %s", c.e, who, kind, res, c.who, c.kind, c.resource)
		}
	}
}

// TestPacerRunsEveryJobAtItsOwnCadence: each job runs about once per its
// period, a slow job holds up only its own worker, and a stopped job stops.
func TestPacerRunsEveryJobAtItsOwnCadence(t *testing.T) {
	p := newPacer()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.run(ctx, 2) })
	defer func() { cancel(); wg.Wait() }()
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(name string) func(context.Context) {
		return func(context.Context) { mu.Lock(); runs[name]++; mu.Unlock() }
	}
	now := time.Now()
	p.every(now, 10*time.Millisecond, count("fast"), nil)
	block := make(chan struct{})
	p.every(now, 10*time.Millisecond, func(ctx context.Context) {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}, func() bool { return true })
	p.every(now, time.Millisecond, count("once"), func() bool { return true })
	poll.UntilTrue(t, 10*time.Second, "the fast job running ten times while the slow one blocks a worker", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return runs["fast"] >= 10
	})
	close(block)
	mu.Lock()
	defer mu.Unlock()
	if runs["once"] != 1 {
		t.Errorf("a job that stops after its first run ran %d times", runs["once"])
	}
}

func TestMarkdownMarksTheTargets(t *testing.T) {
	r := Result{Sites: 100, Nodes: 300, Dilation: 1, Requests: map[string]map[string]float64{
		"kubelets write": {"leases (node)": 30},
		"agents write":   {"leases": 2.5},
		"agents read":    {"leases": 3},
	}}
	r.Outage = &Outage{CutSites: 10, CutNodes: 30, CutPods: 30, Evictions: 2, WebhookLatency: map[string]Latency{"node": {Count: 9, P50: 1, P99: 3}}}
	md := Markdown([]Result{r}, "test machine", "abc1234", "a note", time.Unix(0, 0))
	for _, want := range []string{"| 100 | 300 | 1.0 | 30.0 |", "8.3 % met", "**missed**", "test machine", "abc1234", "a note",
		"| 10 / 30 / 30 |", "| 2 **missed** |", "node: 9, 1.00 / 3.00 met"} {
		if !strings.Contains(md, want) {
			t.Errorf("the results page lacks %q:\n%s", want, md)
		}
	}
}

func TestWriteDrawsThePlot(t *testing.T) {
	dir := t.TempDir()
	r := Result{Sites: 300, Nodes: 900, Dilation: 1, Requests: map[string]map[string]float64{
		"kubelets write": {"leases (node)": 90, "nodes/status": 3},
		"agents write":   {"leases": 7.5},
		"webhook write":  {"edgezones/status": 0.8},
	}}
	if err := Write(dir, []Result{r, {Sites: 1000, Nodes: 3000, Dilation: 5}}, "m", "c", "", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fleet.md", "fleet.json", PlotWrites} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", name, err)
		}
	}
}

// TestLatenciesCountTheAnswersBetweenTwoScrapes: the webhook's answers per
// route between two scrapes of its histogram, with their quantiles.
func TestLatenciesCountTheAnswersBetweenTwoScrapes(t *testing.T) {
	sample := func(fast, slow int) scrape.Sample {
		text := fmt.Sprintf(`# TYPE edgequorum_admission_duration_seconds histogram
edgequorum_admission_duration_seconds_bucket{resource="node",le="0.001"} %d
edgequorum_admission_duration_seconds_bucket{resource="node",le="0.01"} %d
edgequorum_admission_duration_seconds_bucket{resource="node",le="+Inf"} %d
edgequorum_admission_duration_seconds_sum{resource="node"} 1
edgequorum_admission_duration_seconds_count{resource="node"} %d
`, fast, fast+slow, fast+slow, fast+slow)
		s, err := scrape.Parse(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	got := latencies(snapshot{webhook: sample(10, 0)}, snapshot{webhook: sample(108, 2)})
	l, ok := got["node"]
	if !ok || l.Count != 100 {
		t.Fatalf("latencies = %+v, want 100 answers on the node route", got)
	}
	if l.P50 > 1 || l.P99 <= 1 {
		t.Errorf("p50 %.2f ms, p99 %.2f ms: want p50 within the first bucket and p99 in the second", l.P50, l.P99)
	}
	if _, ok := got["podstatus"]; ok {
		t.Error("a route with no answers is listed")
	}
}
