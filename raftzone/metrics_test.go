package raftzone

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsDropOldNames checks that v0.4 exports the metrics v0.2.0 named
// outside the edgequorum_<subsystem>_ shape under their new names only: the
// deprecated aliases were removed in v0.4 (CHANGELOG).
func TestMetricsDropOldNames(t *testing.T) {
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
		if n, err := testutil.GatherAndCount(reg, cur); err != nil || n != 1 {
			t.Errorf("%s: %d series, %v; want one", cur, n, err)
		}
		if n, err := testutil.GatherAndCount(reg, old); err != nil || n != 0 {
			t.Errorf("%s, the name v0.2.0 used: %d series, %v; want none", old, n, err)
		}
	}
}
