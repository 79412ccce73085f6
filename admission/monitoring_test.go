package admission

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// describing is a Registerer that keeps the name of every metric registered.
type describing struct {
	prometheus.Registerer
	names map[string]bool
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return d.Registerer.Register(c)
}

// TestShippedMonitoringReadsExportedMetrics: every webhook metric the shipped
// alerts and dashboard (deploy/webhook/components/monitoring) query is one the
// webhook exports, so a renamed metric cannot leave an alert silent forever.
func TestShippedMonitoringReadsExportedMetrics(t *testing.T) {
	reg := &describing{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`edgequorum_admission_[a-z_]+`)
	for _, f := range []string{"prometheusrule.yaml", "dashboard/edgequorum.json"} {
		b, err := os.ReadFile("../deploy/webhook/components/monitoring/" + f)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range used.FindAllString(string(b), -1) {
			// A histogram's series are its name with a suffix.
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				if h, ok := strings.CutSuffix(n, s); ok && reg.names[h] {
					n = h
				}
			}
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			if !reg.names[n] {
				t.Errorf("%s queries %s, which the webhook does not export", f, n)
			}
		}
		if len(names) == 0 {
			t.Errorf("%s queries no webhook metric", f)
		}
	}
}
