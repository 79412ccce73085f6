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
//   - the repair loop, leader-elected among webhook replicas: it re-sends
//     objects an admission missed through the webhook with a no-op update,
//     hands pods back to not ready once their node is no longer vouched,
//     optionally fails over nodes their zone confirms dead (the out-of-service
//     taint, behind a brake, and the force-deletion of their terminating
//     pods), and writes the webhook's memory of the verdicts it honoured;
//   - generating a CA and serving certificate for installations without
//     cert-manager.
//
// It must not deny a request of the cluster's own components: any internal
// error lets the object through unchanged, with a counted error. The one
// route that denies is nodestatus, for the agents' writes (failurePolicy
// Fail). The apiserver calls the other routes with failurePolicy Ignore and a
// short timeout, so a slow answer is the same as no answer; the admission path
// therefore makes no API call and reads only informer caches. It never
// touches a node that carries no verdict (cloud nodes, nodes in no zone),
// never removes the node.kubernetes.io/not-ready taint (the kubelet's own
// word), never removes an out-of-service taint it did not apply, and never
// vouches for a node its zone found unhealthy or could not judge.
//
// Metrics, all on the Registerer given in Config:
//
//	edgequorum_admission_requests_total{resource,decision}
//	edgequorum_admission_taints_stripped_total
//	edgequorum_admission_pods_kept_ready_total
//	edgequorum_admission_events_total{reason,result}
//	edgequorum_admission_endpoints_rewritten_total{resource}
//	edgequorum_admission_errors_total{resource,reason}
//	edgequorum_admission_duration_seconds{resource}
//	edgequorum_admission_repairs_total{resource,result}
//	edgequorum_admission_repair_leader
//	edgequorum_admission_zone_rechecks_total
//	edgequorum_admission_verdicts_refused_total{reason}
//	edgequorum_admission_zone_leases_refused_total{reason}
//	edgequorum_admission_failover_held_total{limit}
//	edgequorum_admission_failover_held_nodes
//	edgequorum_admission_memory_writes_total{result}
//	edgequorum_admission_evidence_refused_total{reason}
//	edgequorum_admission_tls_reloads_total{result}
package admission
