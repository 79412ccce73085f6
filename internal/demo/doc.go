// Package demo plays edgequorum's story on a local real control plane: a zone
// of agents and the webhook on a testcluster, a Service with a pod on every
// zone node, then the cloud link drops (pods and endpoints are kept) and a node
// dies (it is judged dead and evicted), with a live table of what Kubernetes
// sees. `edgequorum-dev demo` (and `make demo`) run it.
//
// It only drives the public pieces (testcluster, zonerun, the Kubernetes API)
// and narrates; it decides nothing on the zone's behalf.
package demo
