package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollectorLabelsTheBuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	want := `# HELP edgequorum_build_info Always 1; the labels say which build of edgequorum is running.
# TYPE edgequorum_build_info gauge
edgequorum_build_info{goversion="` + GoVersion() + `",revision="` + Revision() + `",version="` + Version() + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgequorum_build_info"); err != nil {
		t.Fatal(err)
	}
}
