// Package admission is edgequorum's cloud side: a mutating admission webhook that
// lets the zone's judgement of a node override the node lifecycle controller's,
// and a repair loop for the admissions it missed.
//
// It owns:
//   - the vouching rule (Decider): a node is vouched when its zone's leader wrote
//     a healthy verdict on it and the zone either still renews its zone Lease or
//     looks cut off as a whole, for a bounded time;
//   - the mutations: stripping node.kubernetes.io/unreachable:NoExecute from
//     vouched nodes, and marking ready again the EndpointSlice endpoints and
//     Endpoints addresses of pods on vouched nodes that were Ready until their
//     node went Unknown;
//   - the HTTPS server that answers admission.k8s.io/v1 AdmissionReviews, with
//     health, readiness and Prometheus metrics on the same port, and a serving
//     certificate reloaded from disk when it is rotated;
//   - the repair loop, leader-elected among webhook replicas, that re-sends
//     objects an admission missed through the webhook with a no-op update;
//   - generating a CA and serving certificate for installations without
//     cert-manager.
//
// It must not deny a request: every answer is allowed, and any internal error
// lets the object through unchanged, with a warning and a counted error. The
// apiserver calls it with failurePolicy Ignore and a short timeout, so a slow
// answer is the same as no answer. For the same reason the admission path makes
// no API call and reads only informer caches; only the repair loop writes, and it
// only re-sends objects unchanged so that the webhook stays the one place the
// mutation rules live. It never touches a node that carries no verdict
// annotation (cloud nodes, nodes in no zone), never removes the
// node.kubernetes.io/not-ready taint (that one is the kubelet's own word), and
// never vouches for a node its zone found unhealthy or could not judge.
//
// Metrics, all on the Registerer given in Config:
//
//	edgequorum_admission_requests_total{resource,decision}
//	edgequorum_admission_taints_stripped_total
//	edgequorum_admission_endpoints_rewritten_total{resource}
//	edgequorum_admission_errors_total{resource,reason}
//	edgequorum_admission_duration_seconds{resource}
//	edgequorum_admission_repairs_total{resource,result}
//	edgequorum_admission_repair_leader
//	edgequorum_admission_zone_rechecks_total
//	edgequorum_admission_tls_reloads_total{result}
package admission
