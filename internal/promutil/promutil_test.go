package promutil

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterReusesExisting(t *testing.T) {
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "x"}
	a, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg, prometheus.NewCounter(opts))
	if err != nil || a != b {
		t.Fatalf("second Register = %v, %v; want the first counter", b, err)
	}
	// Same name, different type: a real conflict is reported.
	if _, err := Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "x"})); err == nil {
		t.Fatal("conflicting collector registered")
	}
}
