package apiwriter

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	writes    *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	restored  prometheus.Counter
	forged    *prometheus.CounterVec
	pending   prometheus.Gauge
	reachable prometheus.Gauge
	events    *prometheus.CounterVec
	evidence  prometheus.Gauge
	// leaderVotes is how many members' votes the last Lease carried.
	leaderVotes prometheus.Gauge
	// leaseQuiet is 1 while the last Lease written was a quiet renewal.
	leaseQuiet prometheus.Gauge
	// formatLevel and webhookReads: format.go.
	formatLevel  prometheus.Gauge
	webhookReads *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_writes_total",
			Help: "Kubernetes API writes by object kind and result.",
		}, []string{"kind", "result"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_skipped_total",
			Help: "Writes not made, by reason (unchanged, superseded: a verdict the zone has since replaced, fenced: a zone Lease of a newer term, not_leader, unconfirmed: retried later, gone).",
		}, []string{"reason"}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_verdicts_restored_total",
			Help: "Committed verdicts written again because their Node did not carry them (re-registered Node, annotation or condition removed or edited); a check that found the Node holding its verdict after all is not counted.",
		}),
		forged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_forged_terms_total",
			Help: "Verdicts (kind node) and zone Leases (kind lease) found under a term above the one this leader holds after a quorum confirmed it again: terms the zone never had, overwritten.",
		}, []string{"kind"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_pending_verdicts",
			Help: "Verdicts waiting to be written (coalesced per node).",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_events_total",
			Help: "Events the leader recorded (a verdict that changed a node's state, a new leader of the zone), by reason and result.",
		}, []string{"reason", "result"}),
		evidence: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_evidence_nodes",
			Help: "Members the leader's last zone Lease carried the quorum's evidence for: members whose reports say they do not reach the apiserver, so the webhook protects them only on their peers' signed word.",
		}),
		leaderVotes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_leader_votes",
			Help: "Members whose signed vote that this member leads in its term the leader's last zone Lease carried; the webhook honours the Lease only on a majority of the zone's members.",
		}),
		leaseQuiet: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_zone_lease_quiet",
			Help: "1 while the leader's last zone Lease renewal was a quiet one (no member needed the cloud's attention; renewed every --zone-lease-quiet-renew), 0 while it renews every --zone-lease-renew.",
		}),
		formatLevel: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_format_level",
			Help: "The protocol level of the verdict and zone Lease formats this member last wrote or would write as leader: the lowest level the zone's members and every webhook replica read.",
		}),
		webhookReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_apiwriter_webhook_level_reads_total",
			Help: "Reads of the webhook's Lease saying what its replicas read, by result (ok, missing, error); made only while the zone's members read a format newer than the oldest this build writes.",
		}, []string{"result"}),
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_apiwriter_apiserver_reachable",
			Help: "1 while the last apiserver call or health check succeeded.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.writes, m.skipped, m.restored, m.forged, m.pending, m.reachable, m.events, m.evidence, m.leaderVotes, m.leaseQuiet, m.formatLevel, m.webhookReads)
	}
	return m
}
