package admission

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// zoneCollector exports the zone view's last pass while its replica leads the
// repair loop, and nothing otherwise, so two replicas never count a zone
// twice; webhooks sharing a registry (tests) share one collector, which
// exports the view of whichever leads. Its cardinality is bounded: the state counts and the protected nodes
// are single series or one per state, and the per-zone gauges name only the
// zoneViewLimit most urgent zones of each kind (see zoneSeries).
type zoneCollector struct {
	mu    sync.Mutex
	views []*zoneViewer

	zones, protected, cutOff, left, noLeader *prometheus.Desc
}

func newZoneCollector() *zoneCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("edgequorum", "admission", name), help, labels, nil)
	}
	return &zoneCollector{
		zones:     desc("zones", "Zones (values of the zone label on some node) by state: connected, cut_off (the whole zone lost the cloud; its vouched nodes are protected), no_leader (the cloud hears its kubelets but no zone Lease is renewed: its quorum is lost), forming (no zone Lease honoured yet). Exported by the replica leading the repair loop only.", "state"),
		protected: desc("protected_nodes", "Nodes the cloud cannot hear from that the webhook vouches for now: their unreachable taints are kept off and their pods Ready. Exported by the replica leading the repair loop only."),
		cutOff:    desc("zone_cut_off_seconds", "How long each zone cut off from the cloud has been dark, for the 100 zones cut off longest. Exported by the replica leading the repair loop only.", "zone"),
		left:      desc("zone_protection_left_seconds", "For each zone cut off from the cloud, how long its vouched nodes stay protected (--max-cutoff-protection after it went dark), for the 100 zones with the least left. Exported by the replica leading the repair loop only.", "zone"),
		noLeader:  desc("zone_no_leader_seconds", "How long each zone whose kubelets the cloud hears has had no valid zone Lease (its quorum is lost and nothing in it is protected), for the 100 zones without one longest. Exported by the replica leading the repair loop only.", "zone"),
	}
}

// add exports v's view while v leads.
func (c *zoneCollector) add(v *zoneViewer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.views = append(c.views, v)
}

// latest is the view of the viewer that leads, nil if none does.
func (c *zoneCollector) latest() *zoneSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.views {
		if s := v.latest.Load(); s != nil {
			return s
		}
	}
	return nil
}

// Describe sends the descriptors.
func (c *zoneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.zones, c.protected, c.cutOff, c.left, c.noLeader} {
		ch <- d
	}
}

// Collect sends the last pass's view, aged to now.
func (c *zoneCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.latest()
	if snap == nil {
		return
	}
	now := snap.clock.Now()
	counts := map[ZoneState]int{}
	protected := 0
	var cut, dark []zoneSeries
	for z, st := range snap.zones {
		counts[st.State]++
		protected += st.Protected
		switch {
		case st.State == ZoneCutOff && st.Since != nil && st.ProtectedUntil != nil:
			cut = append(cut, zoneSeries{z, now.Sub(st.Since.Time), max(st.ProtectedUntil.Sub(now), 0)})
		case st.State == ZoneNoLeader && st.Since != nil:
			dark = append(dark, zoneSeries{zone: z, age: now.Sub(st.Since.Time)})
		}
	}
	for _, s := range zoneStates {
		ch <- prometheus.MustNewConstMetric(c.zones, prometheus.GaugeValue, float64(counts[s]), s.metricLabel())
	}
	ch <- prometheus.MustNewConstMetric(c.protected, prometheus.GaugeValue, float64(protected))
	for _, s := range mostUrgent(cut, func(a, b zoneSeries) int { return cmp.Compare(a.left, b.left) }) {
		ch <- prometheus.MustNewConstMetric(c.left, prometheus.GaugeValue, s.left.Seconds(), s.zone)
	}
	for _, s := range mostUrgent(cut, func(a, b zoneSeries) int { return cmp.Compare(b.age, a.age) }) {
		ch <- prometheus.MustNewConstMetric(c.cutOff, prometheus.GaugeValue, s.age.Seconds(), s.zone)
	}
	for _, s := range mostUrgent(dark, func(a, b zoneSeries) int { return cmp.Compare(b.age, a.age) }) {
		ch <- prometheus.MustNewConstMetric(c.noLeader, prometheus.GaugeValue, s.age.Seconds(), s.zone)
	}
}

// zoneSeries is one zone's per-zone gauges.
type zoneSeries struct {
	zone      string
	age, left time.Duration
}

// mostUrgent is the zoneViewLimit first of s by urgency, ties by zone name.
func mostUrgent(s []zoneSeries, urgency func(a, b zoneSeries) int) []zoneSeries {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b zoneSeries) int {
		return cmp.Or(urgency(a, b), cmp.Compare(a.zone, b.zone))
	})
	return s[:min(len(s), zoneViewLimit)]
}
