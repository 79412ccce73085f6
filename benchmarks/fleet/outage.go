package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
	"github.com/edgequorum/edgequorum/zone"
)

// cutTransport is a site's link to the cloud: while cut, every request fails
// as a dead link's would, before it leaves the site.
type cutTransport struct {
	cut  *atomic.Bool
	next http.RoundTripper
}

func (t cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.cut.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("the site is cut from the cloud")}
	}
	return t.next.RoundTrip(r)
}

// Outage is a regional outage: a tenth of the sites cut from the cloud at
// once for longer than their pods tolerate an unreachable node, then
// restored. Rates are per second of the fleet's own time.
type Outage struct {
	CutSites int `json:"cutSites"`
	CutNodes int `json:"cutNodes"`
	CutPods  int `json:"cutPods"`
	// Seconds is how long the sites were cut, in the fleet's own time;
	// TolerationSeconds how long their pods tolerate an unreachable node.
	Seconds           float64 `json:"seconds"`
	TolerationSeconds int64   `json:"tolerationSeconds"`
	// Evictions are pods on the cut (live) nodes the controller manager
	// deleted; the target is none.
	Evictions int `json:"evictions"`
	// Tainted is the most cut nodes that carried the unreachable NoExecute
	// taint at once, as sampled.
	Tainted int `json:"tainted"`
	// PeakWritesPerSecond is the most writes of any 10 s (fleet time) bin
	// from the cut until quiet; SteadyWritesPerSecond the steady state's.
	PeakWritesPerSecond   float64 `json:"peakWritesPerSecond"`
	SteadyWritesPerSecond float64 `json:"steadyWritesPerSecond"`
	// ExtraWrites is the writes from the cut until quiet beyond the
	// steady rate, by who made them.
	ExtraWrites map[string]float64 `json:"extraWrites"`
	// QuietAfterSeconds is how long after the restore every zone Lease was
	// quiet again, no node tainted and every EdgeZone Connected.
	QuietAfterSeconds float64 `json:"quietAfterSeconds"`
	// WebhookLatency is by route during the outage, in milliseconds.
	WebhookLatency map[string]Latency `json:"webhookLatencyMs"`
}

// outage runs the regional outage on a fleet in steady state whose steady
// result is steady.
func (f *fleet) outage(ctx context.Context, steady Result, progress func(string, ...any)) (*Outage, error) {
	var cut []*site
	for i, s := range f.sites {
		if i%10 == 5 || len(f.sites) < 10 && i == 0 {
			cut = append(cut, s)
		}
	}
	o := &Outage{CutSites: len(cut), TolerationSeconds: int64(outageToleration.Seconds()), ExtraWrites: map[string]float64{}}
	cutNodes := map[string]bool{}
	for _, s := range cut {
		o.CutNodes += len(s.nodes)
		for _, n := range s.nodes {
			cutNodes[n.name] = true
		}
	}
	o.CutPods = o.CutNodes * f.cfg.PodsPerNode
	length := f.d(nodeGrace + outageToleration + 30*time.Second)
	before, err := f.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	progress("regional outage: cutting %d sites (%d nodes, %d pods) for %s, past their pods' toleration of %s",
		len(cut), o.CutNodes, o.CutPods, length.Round(time.Second), f.d(outageToleration))
	for _, s := range cut {
		s.link.Store(true)
		for _, n := range s.nodes {
			n.cut.Store(true)
		}
	}
	deadline := time.Now().Add(length)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(time.Until(deadline), 15*time.Second)):
		}
		tainted := f.taintedOf(ctx, cutNodes)
		o.Tainted = max(o.Tainted, tainted)
		progress("outage: %s left; %d cut nodes tainted unreachable:NoExecute", time.Until(deadline).Round(time.Second), tainted)
	}
	during, err := f.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	o.Seconds = during.at.Sub(before.at).Seconds() / f.dilation
	o.WebhookLatency = latencies(before, during)
	restored := time.Now()
	progress("restoring the %d sites", len(cut))
	for _, s := range cut {
		for _, n := range s.nodes {
			n.cut.Store(false)
		}
		s.link.Store(false)
	}
	if err := f.waitSteady(ctx, cutNodes, progress); err != nil {
		return nil, err
	}
	quiet := time.Now()
	o.QuietAfterSeconds = quiet.Sub(restored).Seconds() / f.dilation
	time.Sleep(3 * time.Second) // the audit backend's batch
	bins, evictions, err := auditOutage(f.cluster.AuditLogPath(), before.auditSize, before.at, quiet, f.d(10*time.Second), cutNodes)
	if err != nil {
		return nil, err
	}
	o.Evictions = evictions
	steadyByWho := map[string]float64{}
	for key, m := range steady.Requests {
		who, kind, _ := strings.Cut(key, " ")
		if kind == kindWrite {
			for _, v := range m {
				steadyByWho[who] += v
				o.SteadyWritesPerSecond += v
			}
		}
	}
	binSecs := 10.0 // fleet time
	total := map[string]float64{}
	for _, b := range bins {
		sum := 0
		for who, c := range b {
			sum += c
			total[who] += float64(c)
		}
		o.PeakWritesPerSecond = max(o.PeakWritesPerSecond, float64(sum)/binSecs)
	}
	span := quiet.Sub(before.at).Seconds() / f.dilation
	for who, c := range total {
		if extra := c - steadyByWho[who]*span; extra > 0 {
			o.ExtraWrites[who] = extra
		}
	}
	progress("outage: %d evictions of live pods, peak %.0f writes/s (steady %.0f), quiet %.0f s after the restore",
		o.Evictions, o.PeakWritesPerSecond, o.SteadyWritesPerSecond, o.QuietAfterSeconds)
	return o, nil
}

// outageToleration is how long the fleet's pods tolerate an unreachable
// node (undilated): shorter than the 300 s default, so that the outage
// outlasts it in minutes.
const outageToleration = time.Minute

// taintedOf counts the nodes of names that carry the unreachable NoExecute
// taint.
func (f *fleet) taintedOf(ctx context.Context, names map[string]bool) int {
	list, err := f.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0
	}
	n := 0
	for _, node := range list.Items {
		if names[node.Name] && unreachableTainted(&node) {
			n++
		}
	}
	return n
}

func unreachableTainted(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable && t.Effect == corev1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

// waitSteady waits until, after a restore, every zone Lease is quiet again,
// none of names is tainted and every EdgeZone is Connected.
func (f *fleet) waitSteady(ctx context.Context, names map[string]bool, progress func(string, ...any)) error {
	deadline := time.Now().Add(f.d(10 * time.Minute))
	for {
		quiet, connected := f.quietLeases(ctx), f.connectedZones(ctx)
		tainted := f.taintedOf(ctx, names)
		if quiet == len(f.sites) && connected >= len(f.sites) && tainted == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not quiet %s after the restore: %d zone Leases quiet, %d EdgeZones Connected, %d nodes tainted",
				f.d(10*time.Minute), quiet, connected, tainted)
		}
		progress("after the restore: %d of %d zone Leases quiet, %d EdgeZones Connected, %d cut nodes tainted", quiet, len(f.sites), connected, tainted)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(f.d(2 * time.Second)):
		}
	}
}

// quietLeases counts the sites' zone Leases that are quiet renewals.
func (f *fleet) quietLeases(ctx context.Context) int {
	list, err := f.admin.CoordinationV1().Leases(zone.DefaultLeaseNamespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range list.Items {
		if strings.HasPrefix(l.Name, "edgequorum-site-") && l.Annotations[zone.LeaseFormatAnnotation] == zone.FormatLevel(zone.LeaseQuietFormat) {
			n++
		}
	}
	return n
}

// latencies is the webhook's answers by route between two snapshots.
func latencies(before, after snapshot) map[string]Latency {
	out := map[string]Latency{}
	for _, route := range []string{"node", "nodestatus", "endpointslice", "endpoints", "podstatus", "pod"} {
		match := map[string]string{"resource": route}
		b := stats.SubBuckets(after.webhook.Buckets("edgequorum_admission_duration_seconds", match),
			before.webhook.Buckets("edgequorum_admission_duration_seconds", match))
		// The scrape keeps a histogram's buckets only: its count is the
		// +Inf bucket's.
		count := 0.0
		if len(b) > 0 {
			count = b[len(b)-1].Count
		}
		if count == 0 {
			continue
		}
		out[route] = Latency{Count: int(count), P50: stats.HistogramQuantile(0.5, b) * 1000, P99: stats.HistogramQuantile(0.99, b) * 1000}
	}
	return out
}

// auditOutage reads the audit log from offset: the writes received in
// [from, to) in bins of bin by who made them, and the deletions of pods on
// the nodes of cut by the controller manager (evictions).
func auditOutage(path string, offset int64, from, to time.Time, bin time.Duration, cut map[string]bool) ([]map[string]int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("seek audit log: %w", err)
	}
	bins := make([]map[string]int, int(to.Sub(from)/bin)+1)
	for i := range bins {
		bins[i] = map[string]int{}
	}
	evictions := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if e.Received.Before(from) || !e.Received.Before(to) {
			continue
		}
		who, kind, res := classify(&e)
		if kind != kindWrite {
			continue
		}
		bins[int(e.Received.Sub(from)/bin)][who]++
		if who == whoKCM && e.Verb == "delete" && res == "pods" && e.ObjectRef != nil && e.ObjectRef.Namespace == fleetNamespace {
			// The fleet's pods are named after their node.
			if node, _, ok := strings.Cut(e.ObjectRef.Name, "-app-"); ok && cut[node] {
				evictions++
			}
		}
	}
	return bins, evictions, sc.Err()
}
