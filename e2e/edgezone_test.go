package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
)

// edgeZoneColumns are the columns `kubectl get edgezones -o wide` prints, in
// order: what an operator reads at a glance.
var edgeZoneColumns = []string{"NAME", "NODES", "LEADER", "TERM", "STATE", "SINCE", "PROTECTED", "FAILED-OVER", "PROTECTION-LEFT", "PROTECTED-UNTIL", "AGE"}

// kubectl runs the real kubectl from bin/ against c as its admin.
func kubectl(t *testing.T, c *testcluster.Cluster, args ...string) (string, error) {
	t.Helper()
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", c.KubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// edgeZoneRow is zone z's row of `kubectl get edgezones -o wide`, by column.
func edgeZoneRow(t *testing.T, c *testcluster.Cluster, z string) (map[string]string, string, error) {
	t.Helper()
	out, err := kubectl(t, c, "get", "edgezones", "-o", "wide")
	if err != nil {
		return nil, out, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	if strings.Join(header, " ") != strings.Join(edgeZoneColumns, " ") {
		return nil, out, fmt.Errorf("kubectl get edgezones columns %v, want %v", header, edgeZoneColumns)
	}
	// Columns are aligned: cut each row at the header's column starts,
	// since empty cells leave no field.
	starts := make([]int, len(header))
	for i, h := range header {
		starts[i] = strings.Index(lines[0], h)
	}
	for _, l := range lines[1:] {
		row := map[string]string{}
		for i, h := range header {
			end := len(l)
			if i+1 < len(starts) && starts[i+1] < end {
				end = starts[i+1]
			}
			if starts[i] < len(l) {
				row[h] = strings.TrimSpace(l[starts[i]:end])
			}
		}
		if row["NAME"] == z {
			return row, out, nil
		}
	}
	return nil, out, fmt.Errorf("no row for zone %s", z)
}

// edgeZone is zone z's EdgeZone status as stored.
func edgeZone(t *testing.T, c *testcluster.Cluster, z string) (admission.EdgeZoneStatus, error) {
	t.Helper()
	raw, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/apis/edgequorum.io/v1alpha1/edgezones", z).DoRaw(context.Background())
	if err != nil {
		return admission.EdgeZoneStatus{}, err
	}
	var o struct {
		Status admission.EdgeZoneStatus `json:"status"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return admission.EdgeZoneStatus{}, fmt.Errorf("EdgeZone %s: %w", z, err)
	}
	return o.Status, nil
}

// waitEdgeZone polls zone z's EdgeZone until ok holds of its status and of
// its row in `kubectl get edgezones`, and returns that status.
func waitEdgeZone(t *testing.T, c *testcluster.Cluster, z string, timeout time.Duration, what string,
	ok func(st admission.EdgeZoneStatus, row map[string]string) (bool, string)) admission.EdgeZoneStatus {
	t.Helper()
	var st admission.EdgeZoneStatus
	var table string
	took := poll.Until(t, timeout, "EdgeZone "+z+" "+what, func() (bool, string) {
		var err error
		if st, err = edgeZone(t, c, z); err != nil {
			return false, err.Error()
		}
		row, out, err := edgeZoneRow(t, c, z)
		if err != nil {
			return false, err.Error()
		}
		table = out
		return ok(st, row)
	})
	t.Logf("EdgeZone %s %s after %s:\n%s", z, what, took.Round(time.Millisecond), table)
	return st
}

// requireZoneEvent waits for an Event of reason on zone z's EdgeZone, as
// `kubectl describe edgezone` shows it.
func requireZoneEvent(t *testing.T, c *testcluster.Cluster, z, reason string) {
	t.Helper()
	poll.Until(t, time.Minute, "Event "+reason+" on EdgeZone "+z, func() (bool, string) {
		evs, err := c.Client().EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "EdgeZone" && e.Regarding.Name == z {
				if e.Reason == reason {
					return true, ""
				}
				seen = append(seen, eventLine(&e))
			}
		}
		return false, fmt.Sprintf("Events on it: %v", seen)
	})
	if out, err := kubectl(t, c, "describe", "edgezone", z); err == nil {
		t.Logf("kubectl describe edgezone %s:\n%s", z, out)
	} else {
		t.Error(err)
	}
}

func eventLine(e *eventsv1.Event) string { return e.Reason + ": " + e.Note }

// webhookGauges is every series the webhook's /metrics serves, by name and
// labels as printed (`name{a="b"}`).
func webhookGauges(t *testing.T, wh *zonerun.Webhook) map[string]float64 {
	t.Helper()
	text, err := wh.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// waitGauges polls the webhook's metrics until ok holds of them.
func waitGauges(t *testing.T, wh *zonerun.Webhook, what string, ok func(g map[string]float64) (bool, string)) {
	t.Helper()
	poll.Until(t, time.Minute, "webhook gauges: "+what, func() (bool, string) { return ok(webhookGauges(t, wh)) })
}

// zoneStateGauges checks that edgequorum_admission_zones counts the one zone
// in state alone.
func zoneStateGauges(g map[string]float64, state string) (bool, string) {
	for _, s := range []string{"connected", "cut_off", "no_leader", "forming"} {
		want := 0.0
		if s == state {
			want = 1
		}
		if k := `edgequorum_admission_zones{state="` + s + `"}`; g[k] != want {
			return false, fmt.Sprintf("%s = %v, want %v", k, g[k], want)
		}
	}
	return true, ""
}
