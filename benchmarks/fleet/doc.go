// Package fleet measures what a fleet of small edgequorum sites costs the
// cloud: thousands of zones of a few nodes on one real control plane (etcd,
// kube-apiserver, kube-controller-manager) with the real webhook as shipped,
// the apiserver's requests counted by who made them from its audit log.
//
// A site's members are stand-ins: its leader is the agent's own zone Lease
// and verdict writer (apiwriter.Writer) with a fence that always holds term 1
// and signed votes of every member, so it renews, signs and goes busy or
// quiet exactly as the agent does, through the agent's own credentials
// (impersonated, node-name claim included, so the shipped admission policies
// judge every write); its other members only make the apiserver reachability
// check the agent makes. Kubelets are simulated: each node renews its node
// Lease and posts its status at the kubelet's defaults, as system:node:<name>.
// Every period is stretched by the run's time dilation, so that two cores can
// play a fleet that would need many; rates are reported per real second of
// the fleet they stand for (measured rate × dilation).
//
// It owns nothing the product ships and must never be imported by it: it is a
// benchmark harness (benchmarks/cmd/fleet).
package fleet
