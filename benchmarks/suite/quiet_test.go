package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// metricsServer serves a member's /metrics: leader or not, and, when it
// leads, whether its last renewal was quiet.
func metricsServer(t *testing.T, leader bool, quiet *atomic.Bool) member {
	return metricsServerCounting(t, leader, quiet, nil)
}

// metricsServerCounting is metricsServer, adding each scrape to served.
func metricsServerCounting(t *testing.T, leader bool, quiet *atomic.Bool, served *atomic.Int32) member {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served != nil {
			defer served.Add(1)
		}
		l, q := 0, 0
		if leader {
			l = 1
		}
		if quiet.Load() {
			q = 1
		}
		fmt.Fprintf(w, "# TYPE %s gauge\n%s %d\n# TYPE %s gauge\n%s %d\n", isLeaderMetric, isLeaderMetric, l, quietMetric, quietMetric, q)
	}))
	t.Cleanup(srv.Close)
	return member{name: strings.TrimPrefix(srv.URL, "http://"), metricsURL: srv.URL + "/metrics"}
}

func TestWaitQuietWaitsForTheLeadersQuietRenewal(t *testing.T) {
	var leaderQuiet, followerQuiet atomic.Bool
	// A follower's gauge says nothing of the zone: only the leader's counts.
	followerQuiet.Store(true)
	follower := metricsServer(t, false, &followerQuiet)
	var served atomic.Int32
	leader := metricsServerCounting(t, true, &leaderQuiet, &served)
	done := make(chan error, 1)
	go func() {
		_, err := waitQuiet(context.Background(), []member{follower, leader}, time.Minute)
		done <- err
	}()
	// A second scrape of the busy leader: waitQuiet saw it busy and went on.
	for served.Load() < 2 {
		select {
		case err := <-done:
			t.Fatalf("waitQuiet returned %v while the leader renewed busily", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	leaderQuiet.Store(true)
	if err := <-done; err != nil {
		t.Fatalf("waitQuiet after the leader's quiet renewal: %v", err)
	}
}

func TestWaitQuietNamesTheBusyLeaderWhenItTimesOut(t *testing.T) {
	var busy atomic.Bool
	m := metricsServer(t, true, &busy)
	_, err := waitQuiet(context.Background(), []member{m}, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "leader "+m.name+" renews busily") {
		t.Fatalf("err = %v, want the busy leader named", err)
	}
	_, err = waitQuiet(context.Background(), []member{metricsServer(t, false, &busy)}, 100*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "no member reported") {
		t.Fatalf("err = %v, want no leader named", err)
	}
}

// TestReportSaysWhetherTheWebhookWasAnnounced checks the settings line, for
// a run of today and for a results.json written before the field existed,
// which wrote no reads Lease and must not be rendered as if it had.
func TestReportSaysWhetherTheWebhookWasAnnounced(t *testing.T) {
	render := func(rep *Report) string {
		t.Helper()
		var b strings.Builder
		if err := WriteMarkdown(&b, rep); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if out := render(&Report{Config: QuickConfig(), WebhookAnnounced: true}); !strings.Contains(out, "calm zones renewed their Lease every 40s") {
		t.Errorf("announced run: settings do not say so:\n%s", out)
	}
	var old Report
	if err := json.Unmarshal([]byte(`{"Config":{"Steady":30000000000}}`), &old); err != nil {
		t.Fatal(err)
	}
	if out := render(&old); !strings.Contains(out, "no webhook was announced") {
		t.Errorf("run from before the field: settings claim a webhook:\n%s", out)
	}
}
