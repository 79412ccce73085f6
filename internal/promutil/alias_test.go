package promutil

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestAliasFollowsNewCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "new_total",
		Help:        "Things, by reason.",
		ConstLabels: prometheus.Labels{"zone": "a"},
	}, []string{"reason"})
	reg.MustRegister(c, Alias(c, "old_total", "new_total"))

	c.WithLabelValues("replay").Add(2)
	c.WithLabelValues("bad_mac").Inc()
	want := `
# HELP new_total Things, by reason.
# TYPE new_total counter
new_total{reason="bad_mac",zone="a"} 1
new_total{reason="replay",zone="a"} 2
# HELP old_total Deprecated: use new_total; removed in v0.4. Things, by reason.
# TYPE old_total counter
old_total{reason="bad_mac",zone="a"} 1
old_total{reason="replay",zone="a"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "new_total", "old_total"); err != nil {
		t.Fatal(err)
	}

	// Every scrape reads the new metric afresh.
	c.WithLabelValues("replay").Add(3)
	want = `
# HELP old_total Deprecated: use new_total; removed in v0.4. Things, by reason.
# TYPE old_total counter
old_total{reason="bad_mac",zone="a"} 1
old_total{reason="replay",zone="a"} 5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "old_total"); err != nil {
		t.Fatal(err)
	}
}

func TestAliasGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "new_up", Help: "1 while up."})
	reg.MustRegister(g, Alias(g, "old_up", "new_up"))
	g.Set(1)
	want := `
# HELP old_up Deprecated: use new_up; removed in v0.4. 1 while up.
# TYPE old_up gauge
old_up 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "old_up"); err != nil {
		t.Fatal(err)
	}
	g.Set(0)
	if n, err := testutil.GatherAndCount(reg, "old_up"); err != nil || n != 1 {
		t.Fatalf("old_up series = %d, %v; want 1", n, err)
	}
	want = strings.Replace(want, "old_up 1", "old_up 0", 1)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "old_up"); err != nil {
		t.Fatal(err)
	}
}

func TestAliasHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "new_seconds", Help: "Time.", Buckets: []float64{0.1, 1},
	}, []string{"op"})
	reg.MustRegister(h, Alias(h, "old_seconds", "new_seconds"))
	h.WithLabelValues("get").Observe(0.05)
	h.WithLabelValues("get").Observe(0.5)
	h.WithLabelValues("get").Observe(5)
	want := `
# HELP old_seconds Deprecated: use new_seconds; removed in v0.4. Time.
# TYPE old_seconds histogram
old_seconds_bucket{op="get",le="0.1"} 1
old_seconds_bucket{op="get",le="1"} 2
old_seconds_bucket{op="get",le="+Inf"} 3
old_seconds_sum{op="get"} 5.55
old_seconds_count{op="get"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "old_seconds"); err != nil {
		t.Fatal(err)
	}
}

func TestAliasRefusesNativeHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "new_seconds", Help: "Time.", NativeHistogramBucketFactor: 1.1,
	})
	reg.MustRegister(h, Alias(h, "old_seconds", "new_seconds"))
	h.Observe(1)
	_, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "native histogram") {
		t.Fatalf("Gather error = %v; want one naming the native histogram", err)
	}
}

func TestAliasEmptyVecExportsNothing(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "new_total", Help: "x"}, []string{"l"})
	reg.MustRegister(c, Alias(c, "old_total", "new_total"))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("series = %d, %v; want none", n, err)
	}
}

func TestAliasRefusesBadNames(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "new_total", Help: "x"})
	for _, tc := range []struct{ old, new string }{
		{"old_total", "nwe_total"}, // typo: c does not describe it
		{"new_total", "new_total"},
		{"", "new_total"}, // not a metric name
	} {
		reg := prometheus.NewRegistry()
		if err := reg.Register(Alias(c, tc.old, tc.new)); err == nil {
			t.Errorf("Alias(%s, %s) registered", tc.old, tc.new)
		}
	}
}
