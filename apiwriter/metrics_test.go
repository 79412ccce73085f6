package apiwriter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsDropOldName checks that the apiserver's reachability is exported
// as edgequorum_apiwriter_apiserver_reachable alone: the name v0.2.0 used,
// edgequorum_apiserver_reachable, was removed in v0.4 (CHANGELOG).
func TestMetricsDropOldName(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.reachable.Set(1)
	want := `
# HELP edgequorum_apiwriter_apiserver_reachable 1 while the last apiserver call or health check succeeded.
# TYPE edgequorum_apiwriter_apiserver_reachable gauge
edgequorum_apiwriter_apiserver_reachable 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"edgequorum_apiserver_reachable", "edgequorum_apiwriter_apiserver_reachable"); err != nil {
		t.Fatal(err)
	}
}
