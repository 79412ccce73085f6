package admission

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// Values of the resource label.
const (
	resNode          = "node"
	resEndpointSlice = "endpointslice"
	resEndpoints     = "endpoints"
	resPodStatus     = "podstatus"
	// resOutOfService is the failover's writes in repairs_total: the
	// out-of-service taint applied or removed.
	resOutOfService = "outofservice"
	// resForceDelete is the failover's force-deletes of terminating pods on
	// a node it tainted, one per pod.
	resForceDelete = "forcedelete"
)

// Values of the decision label of edgequorum_admission_requests_total.
const (
	decisionMutated   = "mutated"
	decisionUnchanged = "unchanged"
	decisionDryRun    = "dry_run"
	decisionError     = "error"
)

// metrics are the webhook's Prometheus collectors. Two webhooks on one registry
// (as in tests) share the registered collectors instead of failing.
type metrics struct {
	requests       *prometheus.CounterVec
	taintsStripped prometheus.Counter
	podsKeptReady  prometheus.Counter
	events         *prometheus.CounterVec
	endpoints      *prometheus.CounterVec
	errors         *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	repairs        *prometheus.CounterVec
	repairLeader   prometheus.Gauge
	memoryWrites   *prometheus.CounterVec
	// failoverUnconfirmed counts nodes due for the out-of-service taint
	// that waited for their peers' word.
	failoverUnconfirmed prometheus.Counter
	// evidenceRefused counts attestations of the quorum's evidence not
	// counted, once per attestation.
	evidenceRefused *prometheus.CounterVec
	zoneRechecks    prometheus.Counter
	tlsReloads      *prometheus.CounterVec
	certExpiry      prometheus.Gauge
	// readsWrites counts this replica's writes of its entry in the
	// webhook's reads Lease (announce.go).
	readsWrites *prometheus.CounterVec
	// zoneStatusWrites counts the zone view's EdgeZone status writes;
	// failovers counts nodes given the out-of-service taint.
	zoneStatusWrites *prometheus.CounterVec
	failovers        prometheus.Counter
	// zones exports the zone view of the replica leading the repair loop.
	zones *zoneCollector
	// certRotations counts what the certificate keeper did (certs.go).
	certRotations *prometheus.CounterVec
	// verdictsRefused and leasesRefused count what the zone did not sign
	// (or someone else did), once per distinct annotation or renewal.
	verdictsRefused *prometheus.CounterVec
	leasesRefused   *prometheus.CounterVec
	// failoverHeld and failoverHeldNodes are the failover's brake.
	failoverHeld      *prometheus.CounterVec
	failoverHeldNodes prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "requests_total",
			Help: "AdmissionReviews answered, by resource and decision (mutated, unchanged, dry_run: would have mutated, error: allowed unchanged after an internal error, or refused on the guarded nodestatus route; denied: refused, a write the webhook checks and found wrong). Malformed bodies are not reviews; see errors_total.",
		}, []string{"resource", "decision"}),
		taintsStripped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "taints_stripped_total",
			Help: "node.kubernetes.io/unreachable:NoExecute taints removed from vouched nodes by a returned patch (not counted in dry-run).",
		}),
		podsKeptReady: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "pods_kept_ready_total",
			Help: "Pods the node lifecycle controller marked not ready on a vouched node whose Ready condition a returned patch kept as it was (not counted in dry-run).",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "events_total",
			Help: "Events the webhook recorded on Nodes for what it changed, by reason and result (recorded: handed to the events broadcaster, which folds repeats into one Event; rate_limited: dropped).",
		}, []string{"reason", "result"}),
		endpoints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "endpoints_rewritten_total",
			Help: "Endpoints (EndpointSlice) or addresses (Endpoints) marked ready again by a returned patch (not counted in dry-run).",
		}, []string{"resource"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "errors_total",
			Help: "Requests the webhook could not judge, by resource and reason; each was allowed unchanged (denied on the guarded nodestatus route) or, for a malformed body, answered 4xx.",
		}, []string{"resource", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "duration_seconds",
			Help:    "Time to answer one admission request, by resource.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"resource"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "repairs_total",
			Help: "Repair loop writes, by resource and result: re-sends of nodes, EndpointSlices and Endpoints whose admission was missed (mutated: the webhook changed it on the way; unchanged: it came back as sent), pods handed back to not ready once their node is no longer vouched (resource podstatus, mutated), the out-of-service taint applied to or removed from a node its zone confirms dead (resource outofservice, mutated), and terminating pods force-deleted from a node so tainted (resource forcedelete, one per pod; conflict: the pod was replaced); dry_run: not sent; conflict; forbidden: the webhook lacks the right (forcedelete: `delete pods`, from deploy/webhook/components/failover); error.",
		}, []string{"resource", "result"}),
		repairLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "repair_leader",
			Help: "1 while this replica leads the repair loop.",
		}),
		zoneRechecks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "zone_rechecks_total",
			Help: "Times the repair loop re-checked every node of a zone (and their not-ready endpoints) at once because its zone Lease was created, turned valid again or changed holder or term, instead of waiting for the next rescan.",
		}),
		tlsReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "tls_reloads_total",
			Help: "Serving certificate reloads after the files changed, by result (ok, error: the previous pair stays in use).",
		}, []string{"result"}),
		certExpiry: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "certificate_expiry_timestamp_seconds",
			Help: "When the serving certificate this replica presents expires, in seconds since the epoch. After it the apiserver cannot call the webhook: the Ignore hooks stop protecting every zone and the nodestatus hook refuses every leader's verdict write.",
		}),
		readsWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "reads_lease_writes_total",
			Help: "Writes of this replica's entry in the Lease edgequorum-webhook-reads, which tells zone leaders the formats the webhook reads, by result (ok, error).",
		}, []string{"result"}),
		zoneStatusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "zone_status_writes_total",
			Help: "EdgeZone status writes by the repair loop's leader, by result (ok; error: retried next pass; deferred: held back by the zone view's token bucket, --zone-status-qps, to a later pass). A zone is written only when its status changed.",
		}, []string{"result"}),
		certRotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "certificate_rotations_total",
			Help: "What the repair loop's leader did to the webhook's own certificates (--manage-certs), by step: created (the Secret, first CA and serving pair), ca-rotated (a new CA beside the old in the trust bundle), bundle-updated (an expired CA dropped), ca_bundle_published (the webhook configuration's caBundle set to the bundle), cert-issued (a new serving pair, once the apiserver trusts its CA), error (retried next period).",
		}, []string{"step"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "edgequorum", Subsystem: "admission", Name: "failovers_total",
			Help: "Nodes the failover gave the out-of-service taint: their zone confirmed them dead, and their pods were deleted and volumes detached.",
		}),
	}
	m.verdictsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "verdicts_refused_total",
		Help: "Verdict annotations not honoured, once per distinct annotation, by reason (bad-verdict, zone-mismatch, unsigned, signer-not-member, signer-no-key, bad-signature, no-zone-lease, signer-not-leader, term-ahead-of-lease, leader-mismatch, superseded; no-verdict: a verdict removed); the node is judged by the last verdict honoured for it, if it still stands.",
	}, []string{"reason"})
	m.leasesRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "zone_leases_refused_total",
		Help: "Zone Lease writes not honoured, once per distinct write, by reason (unsigned, zone-mismatch, no-duration, bad-endorsements, holder-not-member, holder-no-key, bad-signature); the last honoured renewal stays in force.",
	}, []string{"reason"})
	m.failoverHeld = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "failover_held_total",
		Help: "Nodes the failover's brake kept from the out-of-service taint although their zone confirms them dead, once per node and stretch, by limit (zone: --failover-max-per-zone or a minority of the zone; cluster: --failover-max-unhealthy; mass_outage: --failover-mass-outage-threshold of the edge nodes Unknown).",
	}, []string{"limit"})
	m.memoryWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "memory_writes_total",
		Help: "Writes of the webhook's memory (one ConfigMap per zone in the webhook's namespace: the last verdict honoured per node, read by every replica at start), by result (ok, error: retried next second). Only the repair loop's leader writes.",
	}, []string{"result"})
	m.evidenceRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "evidence_refused_total",
		Help: "Zone Lease evidence not counted, by reason (malformed: the annotation does not parse, once per write; signer-not-member, bad-signature: one attestation, once each). A node the cloud cannot hear from while its zone reaches the cloud is protected only on the signed word of a majority of its peers.",
	}, []string{"reason"})
	m.failoverUnconfirmed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "failover_unconfirmed_total",
		Help: "Nodes their zone judges dead, due for the out-of-service taint, that waited because no majority of their peers attested (in the zone Lease's evidence) that every probe fails on them, kubelet port and agent alike; once per node and stretch. The failover acts only on that word.",
	})
	m.failoverHeldNodes = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "edgequorum", Subsystem: "admission", Name: "failover_held_nodes",
		Help: "Nodes the failover's brake holds now: confirmed dead, due for the out-of-service taint, and left to upstream eviction.",
	})
	var err error
	if m.evidenceRefused, err = register(reg, m.evidenceRefused); err != nil {
		return nil, err
	}
	if m.failoverUnconfirmed, err = register(reg, m.failoverUnconfirmed); err != nil {
		return nil, err
	}
	if m.memoryWrites, err = register(reg, m.memoryWrites); err != nil {
		return nil, err
	}
	if m.failoverHeld, err = register(reg, m.failoverHeld); err != nil {
		return nil, err
	}
	if m.failoverHeldNodes, err = register(reg, m.failoverHeldNodes); err != nil {
		return nil, err
	}
	if m.verdictsRefused, err = register(reg, m.verdictsRefused); err != nil {
		return nil, err
	}
	if m.leasesRefused, err = register(reg, m.leasesRefused); err != nil {
		return nil, err
	}
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.taintsStripped, err = register(reg, m.taintsStripped); err != nil {
		return nil, err
	}
	if m.podsKeptReady, err = register(reg, m.podsKeptReady); err != nil {
		return nil, err
	}
	if m.events, err = register(reg, m.events); err != nil {
		return nil, err
	}
	if m.endpoints, err = register(reg, m.endpoints); err != nil {
		return nil, err
	}
	if m.errors, err = register(reg, m.errors); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.repairs, err = register(reg, m.repairs); err != nil {
		return nil, err
	}
	if m.repairLeader, err = register(reg, m.repairLeader); err != nil {
		return nil, err
	}
	if m.zoneRechecks, err = register(reg, m.zoneRechecks); err != nil {
		return nil, err
	}
	if m.tlsReloads, err = register(reg, m.tlsReloads); err != nil {
		return nil, err
	}
	if m.certExpiry, err = register(reg, m.certExpiry); err != nil {
		return nil, err
	}
	if m.readsWrites, err = register(reg, m.readsWrites); err != nil {
		return nil, err
	}
	if m.zoneStatusWrites, err = register(reg, m.zoneStatusWrites); err != nil {
		return nil, err
	}
	if m.zones, err = register(reg, newZoneCollector()); err != nil {
		return nil, err
	}
	if m.certRotations, err = register(reg, m.certRotations); err != nil {
		return nil, err
	}
	for _, st := range []string{"created", "ca-rotated", "bundle-updated", certStepCABundle, "cert-issued", repairError} {
		m.certRotations.WithLabelValues(st)
	}
	if m.failovers, err = register(reg, m.failovers); err != nil {
		return nil, err
	}
	for _, r := range []string{"ok", repairError, "deferred"} {
		m.zoneStatusWrites.WithLabelValues(r)
	}
	m.readsWrites.WithLabelValues("ok")
	m.readsWrites.WithLabelValues("error")
	// Zero series up front, so a dashboard shows "no errors" rather than
	// "no data".
	m.repairs.WithLabelValues(resOutOfService, repairMutated)
	m.repairs.WithLabelValues(resForceDelete, repairMutated)
	m.repairs.WithLabelValues(resForceDelete, repairForbidden)
	for _, l := range []string{brakeZone, brakeCluster, brakeMassOutage} {
		m.failoverHeld.WithLabelValues(l)
	}
	m.requests.WithLabelValues(resNodeStatus, decisionDenied)
	m.memoryWrites.WithLabelValues(memoryWritten)
	for _, r := range []string{evidenceMalformed, evidenceNotMember, evidenceBadSignature} {
		m.evidenceRefused.WithLabelValues(r)
	}
	m.memoryWrites.WithLabelValues(repairError)
	for _, r := range []string{resNode, resEndpointSlice, resEndpoints, resPodStatus, resNodeStatus} {
		m.repairs.WithLabelValues(r, repairMutated)
		for _, d := range []string{decisionMutated, decisionUnchanged, decisionDryRun, decisionError} {
			m.requests.WithLabelValues(r, d)
		}
		m.duration.WithLabelValues(r)
		for _, reason := range []string{"bad_review", "too_large", "wrong_kind", "not_synced", "decode_object", "cache"} {
			m.errors.WithLabelValues(r, reason)
		}
		if r == resEndpointSlice || r == resEndpoints {
			m.endpoints.WithLabelValues(r)
		}
	}
	return m, nil
}

// register is promutil.Register with the package named in the error.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	c, err := promutil.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("register admission metrics: %w", err)
	}
	return c, nil
}
