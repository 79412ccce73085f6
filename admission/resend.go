package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// resender is the repair loop's controller for admissions the webhook missed
// (it was down, timed out, or restarting): a vouched node that still carries
// unreachable:NoExecute, an EndpointSlice or Endpoints object with endpoints
// the webhook would mark ready. It re-sends each one unchanged, as read from
// the cache, so the update passes through the webhook, which applies the
// mutation: the rules live in one place (mutator), and a write the webhook
// does not change is a no-op the apiserver drops. An object that comes back
// unchanged is retried with backoff (see repairer.processNext).
type resender struct {
	client    kubernetes.Interface
	mut       *mutator
	nodes     corelisters.NodeLister
	slices    discoverylisters.EndpointSliceLister
	endpoints corelisters.EndpointsLister
	// byNode index the EndpointSlice and Endpoints caches by the nodes of
	// their not-ready endpoints (see notReadyNodes), so a node that turns
	// revivable brings its objects along without waiting for a rescan.
	byNode []cache.Indexer
	dryRun bool
	log    *slog.Logger
}

// consider queues obj, a node, EndpointSlice or Endpoints object, if the
// webhook would change it now.
func (rs *resender) consider(q repairQueue, obj any) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	if need, err := rs.needsRepair(obj); err == nil && need {
		q.AddRateLimited(key)
	}
}

// considerNotReadyOn considers the EndpointSlices and Endpoints objects with
// not-ready endpoints on node n, which went Unknown.
func (rs *resender) considerNotReadyOn(q repairQueue, n *corev1.Node) {
	for _, idx := range rs.byNode {
		objs, err := idx.ByIndex(notReadyNodeIndex, n.Name)
		if err != nil {
			rs.log.Error("read the node index", "node", n.Name, "err", err)
			continue
		}
		for _, o := range objs {
			rs.consider(q, o)
		}
	}
}

// keyOf is the repair key of a node, EndpointSlice or Endpoints object; false
// for anything else.
func keyOf(obj any) (repairKey, bool) {
	switch o := obj.(type) {
	case *corev1.Node:
		return repairKey{resource: resNode, name: o.Name}, true
	case *discoveryv1.EndpointSlice:
		return repairKey{resource: resEndpointSlice, namespace: o.Namespace, name: o.Name}, true
	case *corev1.Endpoints:
		return repairKey{resource: resEndpoints, namespace: o.Namespace, name: o.Name}, true
	}
	return repairKey{}, false
}

// needsRepair applies the webhook's own rules to a copy of obj.
func (rs *resender) needsRepair(obj any) (bool, error) {
	var n int
	var err error
	switch o := obj.(type) {
	case *corev1.Node:
		n, _, err = rs.mut.node(o.DeepCopy())
	case *discoveryv1.EndpointSlice:
		n, err = rs.mut.endpointSlice(o.DeepCopy(), rs.mut.newQualifier())
	case *corev1.Endpoints:
		n, err = rs.mut.endpoints(o.DeepCopy(), rs.mut.newQualifier())
	}
	return n > 0, err
}

// sync re-judges the cached object of key and, if the webhook would change
// it, re-sends it unchanged (see syncCached).
func (rs *resender) sync(ctx context.Context, key repairKey) (string, error) {
	return syncCached(ctx, key, rs.dryRun, rs.get, rs.needsRepair, rs.resend)
}

// get reads the object of key from its cache.
func (rs *resender) get(key repairKey) (any, error) {
	switch key.resource {
	case resNode:
		return rs.nodes.Get(key.name)
	case resEndpointSlice:
		return rs.slices.EndpointSlices(key.namespace).Get(key.name)
	case resEndpoints:
		return rs.endpoints.Endpoints(key.namespace).Get(key.name)
	}
	return nil, fmt.Errorf("unknown repair resource %q", key.resource)
}

// resend sends obj back as it is, to pass through the webhook, and returns
// the result label: unchanged if the apiserver stored nothing, the webhook
// not called or leaving the object alone.
func (rs *resender) resend(ctx context.Context, key repairKey, obj any) (string, error) {
	opts := metav1.UpdateOptions{FieldManager: fieldManager}
	var out metav1.Object
	var err error
	switch o := obj.(type) {
	case *corev1.Node:
		out, err = rs.client.CoreV1().Nodes().Update(ctx, o.DeepCopy(), opts)
	case *discoveryv1.EndpointSlice:
		out, err = rs.client.DiscoveryV1().EndpointSlices(o.Namespace).Update(ctx, o.DeepCopy(), opts)
	case *corev1.Endpoints:
		out, err = rs.client.CoreV1().Endpoints(o.Namespace).Update(ctx, o.DeepCopy(), opts)
	default:
		return repairError, fmt.Errorf("unknown repair resource %q", key.resource)
	}
	if err != nil {
		return writeResult(fmt.Errorf("re-send %s %s: %w", key.resource, cache.NewObjectName(key.namespace, key.name), err))
	}
	if out.GetResourceVersion() == obj.(metav1.Object).GetResourceVersion() {
		return repairUnchanged, nil
	}
	rs.log.Info("repaired a missed admission", "resource", key.resource, "namespace", key.namespace, "name", key.name)
	return repairMutated, nil
}

// notReadyNodeIndex names the index notReadyNodes builds.
const notReadyNodeIndex = "notReadyNode"

// notReadyNodes indexes an EndpointSlice or Endpoints object by the nodes of its
// not-ready endpoints, the only ones the webhook may change.
func notReadyNodes(obj any) ([]string, error) {
	var out []string
	add := func(node *string) {
		if node != nil && *node != "" && !slices.Contains(out, *node) {
			out = append(out, *node)
		}
	}
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		for _, ep := range o.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				add(ep.NodeName)
			}
		}
	case *corev1.Endpoints:
		for _, sub := range o.Subsets {
			for _, a := range sub.NotReadyAddresses {
				add(a.NodeName)
			}
		}
	}
	return out, nil
}
