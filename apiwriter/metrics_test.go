package apiwriter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsKeepOldName checks that edgequorum_apiserver_reachable, the name
// v0.2.0 exported, follows the renamed gauge until v0.4.
func TestMetricsKeepOldName(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.reachable.Set(1)
	want := `
# HELP edgequorum_apiserver_reachable Deprecated: use edgequorum_apiwriter_apiserver_reachable; removed in v0.4. 1 while the last apiserver call or health check succeeded.
# TYPE edgequorum_apiserver_reachable gauge
edgequorum_apiserver_reachable 1
# HELP edgequorum_apiwriter_apiserver_reachable 1 while the last apiserver call or health check succeeded.
# TYPE edgequorum_apiwriter_apiserver_reachable gauge
edgequorum_apiwriter_apiserver_reachable 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"edgequorum_apiserver_reachable", "edgequorum_apiwriter_apiserver_reachable"); err != nil {
		t.Fatal(err)
	}
}
