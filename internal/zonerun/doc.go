// Package zonerun runs a zone of real `edgequorum agent` processes against a
// testcluster control plane: one agent per fake kubelet, on the kubelet's
// loopback IP, authenticated as the agent ServiceAccount with exactly the RBAC
// deploy/agent grants. Integration tests, benchmarks and `edgequorum demo` use it
// so that all three exercise what an operator installs.
//
// It drives processes and reads their status; it must not reach into their
// state any other way.
package zonerun
