package raftzone

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsKeepOldNames checks that the names v0.2.0 exported follow the
// renamed metrics until v0.4.
func TestMetricsKeepOldNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	m.reportsRejected.WithLabelValues(RejectBadMAC).Add(2)
	m.reportsAccepted.Inc()
	m.reportsSent.WithLabelValues("ok").Inc()
	m.peerRequests.WithLabelValues("out").Inc()
	m.verdictChanges.WithLabelValues("healthy").Inc()
	m.transfers.WithLabelValues("ok").Inc()
	m.membershipChanges.WithLabelValues("promote").Inc()
	for old, cur := range map[string]string{
		"edgequorum_reports_rejected_total":     "edgequorum_intake_reports_rejected_total",
		"edgequorum_reports_accepted_total":     "edgequorum_intake_reports_accepted_total",
		"edgequorum_reports_sent_total":         "edgequorum_zone_reports_sent_total",
		"edgequorum_peer_requests_total":        "edgequorum_transport_peer_requests_total",
		"edgequorum_verdict_changes_total":      "edgequorum_zone_verdict_changes_total",
		"edgequorum_leadership_transfers_total": "edgequorum_raft_leadership_transfers_total",
		"edgequorum_membership_changes_total":   "edgequorum_raft_membership_changes_total",
	} {
		if n, err := testutil.GatherAndCount(reg, old, cur); err != nil || n != 2 {
			t.Errorf("%s and %s: %d series, %v; want one each", old, cur, n, err)
		}
	}
	want := `
# HELP edgequorum_reports_rejected_total Deprecated: use edgequorum_intake_reports_rejected_total; removed in v0.4. Reports the leader refused, by reason.
# TYPE edgequorum_reports_rejected_total counter
edgequorum_reports_rejected_total{reason="bad_mac"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgequorum_reports_rejected_total"); err != nil {
		t.Error(err)
	}
}
