package probe

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metricValue returns the counter value or histogram sample count of the series
// of family name whose labels include want.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v != lp.GetValue() {
					continue series
				}
			}
			if f.GetType() == dto.MetricType_HISTOGRAM {
				return float64(m.GetHistogram().GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// TestMetricsSharedRegistry builds two Managers on one registry, as tests and a
// process with two agents would, and checks that both count into it.
func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Registerer: reg, Specs: []Spec{mustParse(t, "kubelet:failure-threshold=1")}}
	first := startHarness(t, cfg, true)
	second := startHarness(t, cfg, true)

	success := map[string]string{"kind": "kubelet", "outcome": "success"}
	failure := map[string]string{"kind": "kubelet", "outcome": "failure"}
	if v := metricValue(t, reg, "edgequorum_probe_results_total", failure); v != 0 {
		t.Fatalf("failures before any probe = %v, want a zero series", v)
	}

	first.scripts[0].set("10.0.0.1", Success)
	first.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	first.round(0, 1, 1)
	second.scripts[0].set("10.0.0.1", Failure)
	second.m.AddTarget("peer", Target{Host: "10.0.0.1"})
	second.round(0, 1, 1)

	if v := metricValue(t, reg, "edgequorum_probe_results_total", success); v != 1 {
		t.Errorf("successes = %v, want 1", v)
	}
	if v := metricValue(t, reg, "edgequorum_probe_results_total", failure); v != 1 {
		t.Errorf("failures = %v, want 1", v)
	}
	if v := metricValue(t, reg, "edgequorum_probe_duration_seconds", map[string]string{"kind": "kubelet"}); v != 2 {
		t.Errorf("duration samples = %v, want 2", v)
	}
}

func TestMetricsConflictingCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, different labels: not something we can adopt.
	reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgequorum_probe_results_total", Help: "someone else's"}, []string{"peer"}))
	_, err := New(Config{Registerer: reg})
	if err == nil || !strings.Contains(err.Error(), "Config.Registerer") {
		t.Fatalf("New() = %v, want an error naming Config.Registerer", err)
	}
}
