package fleet

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Result is one fleet size's steady state. Rates are per second of the
// fleet's own time (measured × dilation); CPU is per second of this
// machine's, so it is dilated.
type Result struct {
	Sites     int `json:"sites"`
	Nodes     int `json:"nodes"`
	Pods      int `json:"pods"`
	NodeBytes int `json:"nodeBytes"`
	// Dilation is the time dilation the size ran at.
	Dilation      float64 `json:"dilation"`
	WindowSeconds float64 `json:"windowSeconds"`
	// MaxLatenessSeconds is the most a simulated kubelet or member ran
	// after it was due: well under its period, or the fleet was not played
	// at the rate it claims.
	MaxLatenessSeconds float64 `json:"maxLatenessSeconds"`
	SimErrors          int64   `json:"simErrors"`
	LastSimError       string  `json:"lastSimError,omitempty"`
	// ControllerManagerSettled: before the window the controller manager's
	// writes fell below one per node per ten minutes of fleet time
	// (waitControllerManager); false when they did not in time.
	ControllerManagerSettled bool `json:"controllerManagerSettled"`
	// Requests is "who kind" → resource → requests per second.
	Requests            map[string]map[string]float64 `json:"requests"`
	EtcdPutsPerSecond   float64                       `json:"etcdPutsPerSecond"`
	EtcdDBBytes         float64                       `json:"etcdDBBytes"`
	EtcdDBInUseBytes    float64                       `json:"etcdDBInUseBytes"`
	CPU                 map[string]float64            `json:"cpuCoresDilated"`
	WebhookPeakRSSBytes uint64                        `json:"webhookPeakRSSBytes"`
	// WebhookLatency is by route, in milliseconds.
	WebhookLatency map[string]Latency `json:"webhookLatencyMs"`
	// Outage is the regional outage, when it ran.
	Outage *Outage `json:"outage,omitempty"`
}

// Latency is one route's answers in the window.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// rate is the requests per second of who's kind, of resources (all when
// none given).
func (r Result) rate(who, kind string, resources ...string) float64 {
	sum := 0.0
	for res, v := range r.Requests[who+" "+kind] {
		if len(resources) == 0 || slices.Contains(resources, res) {
			sum += v
		}
	}
	return sum
}

// Shares the steady-state targets are stated in.
func (r Result) kubeletLeaseWrites() float64 { return r.rate(whoKubelet, kindWrite, "leases (node)") }
func (r Result) edgequorumWrites() float64   { return r.rate(whoEdgequorum, kindWrite) }
func (r Result) edgequorumReads() float64    { return r.rate(whoEdgequorum, kindRead) }
func (r Result) edgequorumReviews() float64  { return r.rate(whoEdgequorum, kindReview) }

// webhookWrites are the webhook's: its EdgeZones, Events, verdict records
// and Leases. They are edgequorum's cost as much as the agents' are.
func (r Result) webhookWrites() float64 { return r.rate(whoWebhook, kindWrite) }

// writeShare is edgequorum's writes, the agents' and the webhook's, over the
// kubelets' node-Lease writes.
func (r Result) writeShare() float64 {
	if k := r.kubeletLeaseWrites(); k > 0 {
		return (r.edgequorumWrites() + r.webhookWrites()) / k
	}
	return 0
}

// Summary is one progress line.
func (r Result) Summary() string {
	return fmt.Sprintf("kubelet node-Lease writes %.1f/s, edgequorum writes %.2f/s by agents and %.2f/s by the webhook (%.1f %%), agents' reads %.2f/s, reviews %.1f/s; etcd puts %.1f/s; %d simulator errors, lateness %.1fs",
		r.kubeletLeaseWrites(), r.edgequorumWrites(), r.webhookWrites(), 100*r.writeShare(), r.edgequorumReads(), r.edgequorumReviews(),
		r.EtcdPutsPerSecond, r.SimErrors, r.MaxLatenessSeconds)
}

func mark(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

// Markdown is the results page of a run of build (a commit) on machine,
// started at at, with a note on the run (none when empty).
func Markdown(rs []Result, machine, build, note string, at time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Fleet benchmark\n\n`make bench-fleet` at commit %s on %s, started %s. Each size ran on a fresh control plane "+
		"(etcd, kube-apiserver, kube-controller-manager from bin/) with the webhook as deploy/webhook ships it (one replica), "+
		"simulated kubelets and stand-in site leaders (the agent's own zone Lease and verdict writer); see benchmarks/fleet. "+
		"Rates are per second of the fleet's own time: each size ran with its time dilation (every kubelet, agent and "+
		"controller-manager period that many times longer) and its measured rates are multiplied back. CPU is measured, so dilated.\n\n",
		build, machine, at.UTC().Format("2006-01-02 15:04 UTC"))
	if note != "" {
		fmt.Fprintf(&b, "**Note on this run:** %s\n\n", note)
	}
	b.WriteString("## Steady state: requests per second, by who made them\n\n")
	b.WriteString("| sites | nodes | dilation | kubelets: node Leases | kubelets: status | agents: writes | agents: reads | agents: reviews | webhook: writes | webhook: reads | controller-manager | etcd puts | edgequorum's writes (agents + webhook) / node-Lease writes (≤ 10 %) | agents' reads ≤ their writes |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rs {
		kcm := fmt.Sprintf("%.2f", r.rate(whoKCM, kindWrite)+r.rate(whoKCM, kindRead))
		if !r.ControllerManagerSettled {
			kcm += " (not settled)"
		}
		fmt.Fprintf(&b, "| %d | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.1f | %.2f | %.2f | %s | %.1f | %.1f %% %s | %s |\n",
			r.Sites, r.Nodes, r.Dilation, r.kubeletLeaseWrites(), r.rate(whoKubelet, kindWrite, "nodes/status"),
			r.edgequorumWrites(), r.edgequorumReads(), r.edgequorumReviews(),
			r.webhookWrites(), r.rate(whoWebhook, kindRead), kcm,
			r.EtcdPutsPerSecond, 100*r.writeShare(), mark(r.writeShare() <= 0.10), mark(r.edgequorumReads() <= r.edgequorumWrites()))
	}
	fmt.Fprintf(&b, "\n![steady writes by source](%s)\n", PlotWrites)
	b.WriteString("\nReviews are the agents' apiserver reachability check (a SelfSubjectReview every 2 s per member): a create that stores nothing, counted apart from writes and reads. " +
		"The controller manager's column is its reads and writes; the window starts once its writes fall below one per node per ten minutes after the fleet's registration (\"not settled\": they had not within three quiet renewal periods).\n\n")
	b.WriteString("## Steady state: edgequorum's requests by resource\n\n| sites | who | kind | resource | per second | per site per minute |\n|---:|---|---|---|---:|---:|\n")
	for _, r := range rs {
		for _, who := range []string{whoEdgequorum, whoWebhook} {
			for _, kind := range []string{kindWrite, kindRead, kindReview} {
				m := r.Requests[who+" "+kind]
				for _, res := range slices.Sorted(maps.Keys(m)) {
					fmt.Fprintf(&b, "| %d | %s | %s | %s | %.2f | %.2f |\n", r.Sites, who, kind, res, m[res], m[res]*60/float64(r.Sites))
				}
			}
		}
	}
	b.WriteString("\n## The control plane and the webhook\n\n| sites | etcd db | apiserver CPU | etcd CPU | controller-manager CPU | webhook CPU | webhook peak RSS | webhook routes: answers, p50 / p99 ms | simulator: errors, max lateness |\n|---:|---:|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rs {
		var routes []string
		for _, route := range slices.Sorted(maps.Keys(r.WebhookLatency)) {
			l := r.WebhookLatency[route]
			routes = append(routes, fmt.Sprintf("%s: %d, %.2f / %.2f", route, l.Count, l.P50, l.P99))
		}
		if len(routes) == 0 {
			routes = []string{"none called"}
		}
		fmt.Fprintf(&b, "| %d | %.0f MiB | %.0f %% | %.0f %% | %.0f %% | %.1f %% | %.0f MiB | %s | %d, %.1f s |\n",
			r.Sites, r.EtcdDBBytes/(1<<20), 100*r.CPU["kube-apiserver"], 100*r.CPU["etcd"], 100*r.CPU["kube-controller-manager"],
			100*r.CPU["webhook"], float64(r.WebhookPeakRSSBytes)/(1<<20), strings.Join(routes, "; "), r.SimErrors, r.MaxLatenessSeconds)
	}
	b.WriteString(outageMarkdown(rs))
	return b.String()
}

// outageMarkdown is the regional outage's table, empty when none ran.
func outageMarkdown(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		o := r.Outage
		if o == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n## Regional outage\n\nA tenth of the sites cut from the cloud at once (their kubelets, leaders and members reach nothing; they stay up) " +
				"for longer than their pods tolerate an unreachable node, then restored. Times are in the fleet's own time. " +
				"Extra writes are those beyond the steady rate from the cut until everything is quiet again (every zone Lease quiet, no node tainted, every EdgeZone Connected).\n\n" +
				"| sites | cut: sites / nodes / pods | cut for | pods tolerate | evictions of live pods (target 0) | most cut nodes tainted at once | peak writes/s (steady) | extra writes by source | webhook during the outage: answers, p50 / p99 ms (p99 ≤ 5 ms) | quiet after the restore |\n" +
				"|---:|---|---:|---:|---|---:|---|---|---|---:|\n")
		}
		var extra []string
		for _, who := range slices.Sorted(maps.Keys(o.ExtraWrites)) {
			extra = append(extra, fmt.Sprintf("%s %.0f", who, o.ExtraWrites[who]))
		}
		var routes []string
		fast := true
		for _, route := range slices.Sorted(maps.Keys(o.WebhookLatency)) {
			l := o.WebhookLatency[route]
			routes = append(routes, fmt.Sprintf("%s: %d, %.2f / %.2f", route, l.Count, l.P50, l.P99))
			fast = fast && l.P99 <= 5
		}
		if len(routes) == 0 {
			routes = []string{"none called"}
		}
		fmt.Fprintf(&b, "| %d | %d / %d / %d | %.0f s | %d s | %d %s | %d | %.0f (%.0f) | %s | %s %s | %.0f s |\n",
			r.Sites, o.CutSites, o.CutNodes, o.CutPods, o.Seconds, o.TolerationSeconds, o.Evictions, mark(o.Evictions == 0),
			o.Tainted, o.PeakWritesPerSecond, o.SteadyWritesPerSecond, strings.Join(extra, ", "),
			strings.Join(routes, "; "), mark(fast), o.QuietAfterSeconds)
	}
	return b.String()
}

// Write writes fleet.md, fleet.json and the plot into dir.
func Write(dir string, rs []Result, machine, build, note string, at time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	j, err := json.MarshalIndent(map[string]any{"machine": machine, "commit": build, "note": note, "date": at.UTC().Format(time.RFC3339), "results": rs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), append(j, '\n'), 0o644); err != nil {
		return fmt.Errorf("write fleet.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.md"), []byte(Markdown(rs, machine, build, note, at)), 0o644); err != nil {
		return fmt.Errorf("write fleet.md: %w", err)
	}
	return WritePlot(filepath.Join(dir, PlotWrites), rs)
}
