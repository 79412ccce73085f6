package raftzone

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/store"
)

// metrics are one Member's collectors. Each Member owns its own so that several
// in one process (tests, benchmarks) never collide in a registry.
type metrics struct {
	rpcs               *prometheus.CounterVec
	peerRequests       *prometheus.CounterVec
	reportsRejected    *prometheus.CounterVec
	reportsAccepted    prometheus.Counter
	reportsSent        *prometheus.CounterVec
	reportsFull        prometheus.Counter
	applyDuration      *prometheus.HistogramVec
	verdictChanges     *prometheus.CounterVec
	transfers          *prometheus.CounterVec
	recoveries         *prometheus.CounterVec
	membershipChanges  *prometheus.CounterVec
	isLeader           prometheus.Gauge
	term               prometheus.Gauge
	members            prometheus.Gauge
	callerRefused      *prometheus.CounterVec
	raftRefused        *prometheus.CounterVec
	viewsServed        prometheus.Counter
	viewSyncs          *prometheus.CounterVec
	isSpare            prometheus.Gauge
	forcedElections    *prometheus.CounterVec
	leaderStalls       prometheus.Counter
	reportsUncommitted prometheus.Gauge
	zoneLevel          prometheus.Gauge
	// replica is the store the refused-report counters read; set once Run
	// opened it.
	replica atomic.Pointer[store.Store]
}

// unreadable counts the committed entries the replica skipped because it
// could not decode them: newer_release for a format of a release newer than
// this one (the zone was switched on before this member was upgraded, or a
// leader broke the skew policy), other for the rest.
func (m *metrics) unreadable(reason string) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "edgequorum_store_entries_unreadable_total",
		Help:        "Committed log entries this replica skipped whole because it could not decode them, by reason: newer_release (a format of a newer release: upgrade this member) or other.",
		ConstLabels: prometheus.Labels{"reason": reason},
	}, func() float64 {
		st := m.replica.Load()
		if st == nil {
			return 0
		}
		total, tooNew, _ := st.Unreadable()
		if reason == "newer_release" {
			return float64(tooNew)
		}
		return float64(total - tooNew)
	})
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_rpcs_sent_total",
			Help: "Raft RPCs this member sent, by type.",
		}, []string{"type"}),
		peerRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_transport_peer_requests_total",
			Help: "Peer-API requests this member sent (out) and served (in).",
		}, []string{"direction"}),
		reportsRejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_intake_reports_rejected_total",
			Help: "Reports the leader refused, by reason.",
		}, []string{"reason"}),
		reportsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_intake_reports_accepted_total",
			Help: "Reports the leader verified and committed.",
		}),
		reportsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_zone_reports_sent_total",
			Help: "Reports this member sent to its leader, by result.",
		}, []string{"result"}),
		reportsFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_zone_reports_full_total",
			Help: "Reports this member built with every result, not only what the leader lacks: its first, one every 10 minutes, and one every 30 s while its leader is of a release that does not say what its replica lacks.",
		}),
		applyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgequorum_raft_apply_duration_seconds",
			Help:    "Time from raft.Apply to commit, by command.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"command"}),
		verdictChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_zone_verdict_changes_total",
			Help: "Verdict changes this member committed as leader, by new state.",
		}, []string{"state"}),
		transfers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_leadership_transfers_total",
			Help: "Leadership transfers the leader started, by result: ok, failed and no_target when it lost the apiserver, backoff when it held one back because its last handover did not stick; stop_ok and stop_failed when it was told to stop.",
		}, []string{"result"}),
		recoveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_recoveries_total",
			Help: "Recovery requests (edgequorum recover) this member acted on at start, by result: recovered or refused.",
		}, []string{"result"}),
		membershipChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_membership_changes_total",
			Help: "Raft configuration changes the leader made, by kind.",
		}, []string{"kind"}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_raft_is_leader",
			Help: "1 while this member leads its zone.",
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_raft_term",
			Help: "Current Raft term.",
		}),
		zoneLevel: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_zone_protocol_level",
			Help: "The protocol level this member last found its zone at: the lowest any member announces, which the leader's formats keep to. Below edgequorum_build_info's release level while the zone is mixed.",
		}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_zone_members",
			Help: "Members in the replicated member list.",
		}),
		callerRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_transport_caller_refused_total",
			Help: "Peer-API requests refused because they spoke for another node than the one their connection proved, by endpoint.",
		}, []string{"endpoint"}),
		raftRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_rpcs_refused_total",
			Help: "Raft RPCs, their answers or connections dropped before hashicorp/raft saw them, by reason.",
		}, []string{"reason"}),
		viewsServed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_zone_views_served_total",
			Help: "Zone views this Raft server copied to spares.",
		}),
		viewSyncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_zone_view_syncs_total",
			Help: "This spare's attempts to copy the zone view from a server, by result: ok, failed (no server answered) or refused (an answer that is no consistent view).",
		}, []string{"result"}),
		isSpare: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_zone_is_spare",
			Help: "1 while this member is a spare: outside the Raft configuration, reading the view a server copies to it.",
		}),
		forcedElections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_raft_forced_elections_total",
			Help: "Vote requests asking this member for a leadership transfer (the one way to win a vote while the leader is alive), by candidate node (voters only) and result: allowed, or refused over the candidate's budget. A voter that keeps forcing elections is a stolen or broken box.",
		}, []string{"candidate", "result"}),
		leaderStalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_raft_leader_stalls_total",
			Help: "Leaders this member stopped following because they committed none of its reports for the stall timeout.",
		}),
		reportsUncommitted: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgequorum_zone_reports_uncommitted_seconds",
			Help: "How long this member's reports have gone uncommitted by the leader it follows; 0 while they commit.",
		}),
	}
	// What the replica refused, read from the store when scraped.
	replicaRefused := func(name, help, reason string) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: name, Help: help, ConstLabels: prometheus.Labels{"reason": reason},
		}, func() float64 {
			if st := m.replica.Load(); st != nil {
				return float64(st.Refused(reason))
			}
			return 0
		})
	}
	refused := func(reason string) prometheus.Collector {
		return replicaRefused("edgequorum_store_reports_refused_total",
			"Reports in committed batches this replica refused to apply, by reason: bad_signature (not signed by the sender's pinned node key) or seq_jump.", reason)
	}
	held := func(reason string) prometheus.Collector {
		return replicaRefused("edgequorum_store_commands_refused_total",
			"Parts of committed commands this replica refused or held back, by reason: member-list changes its own view of the cluster does not confirm (unregistered, key_of_another_member, still_in_zone) and verdicts the committed evidence does not support (verdict_unsupported, verdict_stale, verdict_term, verdict_unchecked). verdict_stale alone is a race an honest leader repeats; the others on a follower mean a leader committed what it should not have.", reason)
	}
	if reg != nil {
		for _, reason := range store.RefusalReasons {
			if reason != store.RefuseSignature && reason != store.RefuseSeqJump {
				reg.MustRegister(held(reason))
			}
		}
		reg.MustRegister(m.rpcs, m.peerRequests, m.reportsRejected, m.reportsAccepted, m.reportsSent, m.reportsFull,
			m.applyDuration, m.verdictChanges, m.transfers, m.recoveries, m.membershipChanges,
			m.isLeader, m.term, m.members, m.callerRefused, m.raftRefused, m.viewsServed, m.viewSyncs, m.isSpare,
			m.forcedElections, m.leaderStalls, m.reportsUncommitted, m.zoneLevel, m.unreadable("newer_release"), m.unreadable("other"),
			refused(store.RefuseSignature), refused(store.RefuseSeqJump))
	}
	return m
}
