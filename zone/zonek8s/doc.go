// Package zonek8s holds the zone's word in the shapes Kubernetes stores it in:
// the EdgeQuorum Node condition that shows a verdict, and the zone Lease's
// label and the claim a zone Lease states. The zone leader's writer and the
// cloud webhook both import it, so that what one writes and the other checks
// are computed by the same code, without either importing the other; the
// agent imports it for the Lease label and the condition's type.
//
// The condition is computed on a type of its own, NodeCondition, the same
// JSON as core/v1's: the agent must not link k8s.io/api/core/v1. Package
// corecond converts for the webhook and the tests, which hold core/v1 Nodes.
//
// It keeps package zone a leaf with no Kubernetes in it, and must itself hold
// nothing but these conversions: no clients, no informers, no network.
package zonek8s
