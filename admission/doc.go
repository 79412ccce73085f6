// Package admission is edgequorum's cloud side: a mutating admission webhook that
// lets the zone's judgement of a node override the node lifecycle controller's,
// and a repair loop for what admission alone cannot do.
//
// It owns:
//   - the vouching rule (Decider): a node is vouched when its zone signed a
//     healthy verdict for it (checked against the keys the signers' Nodes
//     register and the zone Lease) and the zone either still renews its zone
//     Lease (and, for a node whose kubelet the cloud cannot hear, a majority
//     of the node's peers attest in it, each with its own key, that they
//     reach the node) or looks cut off as a whole, for a bounded time; a verdict the zone
//     did not sign changes nothing, the node being judged by the last verdict
//     honoured;
//   - the mutations: stripping node.kubernetes.io/unreachable:NoExecute from
//     vouched nodes, keeping Ready the pods of vouched nodes that the node
//     lifecycle controller marks not ready, and marking ready again the
//     EndpointSlice endpoints and Endpoints addresses of such pods;
//   - the guarded nodestatus route: the agents' nodes/status writes may change
//     only the EdgeQuorum condition, to the one that shows a verdict the zone
//     signed;
//   - the HTTPS server that answers admission.k8s.io/v1 AdmissionReviews, with
//     health, readiness and Prometheus metrics on the same port, and a serving
//     certificate reloaded from disk when it is rotated;
//   - the repair loop (repair.go), leader-elected among webhook replicas, and
//     its three controllers on one rate-limited queue: resend (resend.go)
//     re-sends, unchanged, the nodes, EndpointSlices and Endpoints whose
//     admission was missed, so the webhook mutates them on the way; handback
//     (handback.go) itself patches Ready to False on the pods the webhook kept
//     Ready on an Unknown node once the node is no longer vouched; and, with
//     --dead-node-action=out-of-service, failover (failover.go, brake.go)
//     applies and removes the out-of-service taint on nodes their zone
//     confirms dead and force-deletes the terminating pods on the nodes it
//     tainted. The leader also writes the webhook's memory of the verdicts it
//     honoured (memory.go), and keeps the zone view (zoneview.go,
//     zonemetrics.go): an EdgeZone per zone with what the webhook makes of
//     it, written only when it changed, and the zone gauges;
//   - keeping its own certificate (certs.go, --manage-certs): the repair
//     loop's leader creates the TLS Secret every replica serves from,
//     renews its CA and serving pair, and keeps the webhook configuration's
//     caBundle in step, in the order webhookcerts.Policy gives;
//   - generating a CA and serving certificate for installations that keep
//     their own (`edgequorum certs`).
//
// What it must not do:
//   - deny the cluster's own components. The node, endpointslice, endpoints
//     and podstatus routes always allow: an internal error lets the object
//     through unchanged, with a counted error and a warning. The apiserver
//     calls them with failurePolicy Ignore and a short timeout, so a slow
//     answer is the same as no answer; answering therefore makes no API call
//     and reads only informer caches (Events are written later, by a
//     broadcaster). The nodestatus route alone denies. Its webhook
//     configuration sends it only the agents' nodes/status writes
//     (AgentUser), with failurePolicy Fail, and it denies one that changes
//     status beyond the EdgeQuorum condition, writes a verdict the zone did
//     not sign (unsigned, forged, replayed) or a condition with no verdict to
//     show, or that it cannot check (caches not synced, an internal error).
//     In a dry run it logs and counts such a denial and allows the write;
//   - touch a node that carries no verdict (cloud nodes, nodes in no zone), or
//     the pods on one; remove the node.kubernetes.io/not-ready taint (the
//     kubelet's own word); remove an out-of-service taint it did not apply;
//     force-delete a pod that is not already terminating, or one on a node it
//     did not taint; vouch for a node its zone found unhealthy or could not
//     judge;
//   - write a zone Lease (it only reads them), or, in a dry run, anything but
//     the repair loop's election Lease and its own certificate;
//   - put into an EdgeZone anything an agent says of its zone's state: the
//     view is the webhook's judgement of the evidence it verified;
//   - serve a certificate signed by a CA before every caBundle of its
//     configuration has trusted that CA for a while, or write any Secret or
//     webhook configuration but its own (by name).
//
// Metrics, all on the Registerer given in Config (metrics.go), each
// edgequorum_admission_…:
//   - requests_total{resource,decision}: reviews answered per route, by
//     decision: mutated, unchanged, dry_run, error, denied (nodestatus only).
//   - taints_stripped_total: unreachable:NoExecute taints a returned patch
//     removed from vouched nodes.
//   - pods_kept_ready_total: pods a returned patch kept Ready on a vouched
//     node after the node lifecycle controller marked them not ready.
//   - endpoints_rewritten_total{resource}: EndpointSlice endpoints or
//     Endpoints addresses a returned patch marked ready again.
//   - errors_total{resource,reason}: requests the webhook could not judge,
//     allowed unchanged (denied on nodestatus) or, if malformed, answered 4xx.
//   - duration_seconds{resource}: time to answer one review.
//   - events_total{reason,result}: Events on Nodes, recorded or rate_limited.
//   - repairs_total{resource,result}: the repair loop's writes, by controller
//     (node, endpointslice, endpoints: resend; podstatus: handback;
//     outofservice, forcedelete: failover) and result.
//   - repair_leader: 1 while this replica leads the repair loop.
//   - zone_rechecks_total: zones whose nodes the repair loop re-checked at
//     once because their zone Lease came back valid or changed hands.
//   - verdicts_refused_total{reason}: verdict annotations not honoured, once
//     per distinct annotation.
//   - zone_leases_refused_total{reason}: zone Lease writes not honoured, once
//     per distinct write.
//   - evidence_refused_total{reason}: peers' attestations in a zone Lease's
//     evidence not counted.
//   - failover_unconfirmed_total: nodes due for the out-of-service taint that
//     waited for a majority of their peers to confirm them down.
//   - failover_held_total{limit}: nodes the failover's brake kept from the
//     taint, once per node and stretch.
//   - failover_held_nodes: nodes the brake holds now.
//   - memory_writes_total{result}: the leader's writes of the webhook's
//     memory ConfigMaps.
//   - tls_reloads_total{result}: serving certificate reloads.
//   - certificate_expiry_timestamp_seconds: when the served certificate
//     expires; certificate_rotations_total{step}: what the leader did to the
//     certificates it keeps.
//   - reads_lease_writes_total{result}: this replica's entry in the reads
//     Lease.
//   - failovers_total: nodes given the out-of-service taint.
//   - zone_status_writes_total{result}: EdgeZone writes; and, from the
//     leader only, the zone gauges zones{state}, protected_nodes and, per
//     zone in trouble, zone_cut_off_seconds, zone_protection_left_seconds,
//     zone_no_leader_seconds (zonemetrics.go).
package admission
