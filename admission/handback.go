package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// handback is the repair loop's controller for pods the webhook kept Ready on
// an Unknown node: once the node's zone no longer vouches for it, it marks
// them not ready, as the node lifecycle controller would have. That
// controller marks pods not ready only when a node goes Unknown, never again
// later, so without this a pod kept Ready would stay Ready on a node nobody
// vouches for. The webhook only ever keeps a pod Ready, so there is nothing
// to re-send through it: this is a write of the loop's own, a patch of the
// pod's Ready condition (see markNotReady).
type handback struct {
	client  kubernetes.Interface
	decider *Decider
	// pods is the pod cache and podsByNode indexes it by node, so a node
	// that is Unknown and no longer vouched finds the pods the webhook kept
	// Ready.
	pods       corelisters.PodLister
	podsByNode cache.Indexer
	clock      clock.PassiveClock
	dryRun     bool
	// events records each hand-back on the pod's Node; nil records
	// nothing.
	events *eventer
	log    *slog.Logger
}

// consider queues the pods of the Unknown node n that are still Ready
// although its zone no longer vouches for it: the webhook kept them Ready
// while it did. Deciding the node once here keeps a scan from deciding it per
// pod.
func (h *handback) consider(q repairQueue, n *corev1.Node) {
	if h.podsByNode == nil {
		return
	}
	if dec, err := h.decider.Decide(n); err != nil || dec.Vouched || !judged(dec) {
		return
	}
	pods, err := h.podsByNode.ByIndex(podNodeIndex, n.Name)
	if err != nil {
		h.log.Error("read the pod index", "node", n.Name, "err", err)
		return
	}
	for _, o := range pods {
		if p, ok := o.(*corev1.Pod); ok && podKeptReady(p) {
			q.AddRateLimited(repairKey{resource: resPodStatus, namespace: p.Namespace, name: p.Name})
		}
	}
}

// sync re-judges the cached pod of key and, if it is due (see due), marks it
// not ready (see syncCached).
func (h *handback) sync(ctx context.Context, key repairKey) (string, error) {
	return syncCached(ctx, key, h.dryRun, h.get, h.due, h.handBack)
}

// get reads the pod of key from the cache.
func (h *handback) get(key repairKey) (*corev1.Pod, error) {
	return h.pods.Pods(key.namespace).Get(key.name)
}

// handBack marks p not ready and returns the result label. A patch that
// applies is a change: it sets Ready to False on a pod judged Ready, at the
// version judged.
func (h *handback) handBack(ctx context.Context, key repairKey, p *corev1.Pod) (string, error) {
	result, err := writeResult(h.markNotReady(ctx, p))
	if result == repairMutated {
		h.log.Info("handed a kept pod back to not ready: its node is no longer vouched", "namespace", key.namespace, "name", key.name)
	}
	return result, err
}

// podKeptReady reports whether p is Ready and not being deleted: on a node that
// is Unknown, a Ready the webhook kept.
func podKeptReady(p *corev1.Pod) bool {
	c := podReadyCondition(p.Status.Conditions)
	return c != nil && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
}

// due reports whether the Ready condition of p must be handed back to the
// node lifecycle controller's judgement: p is Ready on a node that is Unknown
// and not vouched for.
func (h *handback) due(p *corev1.Pod) (bool, error) {
	if !podKeptReady(p) || p.Spec.NodeName == "" {
		return false, nil
	}
	dec, node, err := h.decider.DecideNode(p.Spec.NodeName)
	if err != nil {
		return false, fmt.Errorf("decide node %s of pod %s/%s: %w", p.Spec.NodeName, p.Namespace, p.Name, err)
	}
	if dec.Vouched || !judged(dec) {
		return false, nil
	}
	c := readyCondition(node.Status.Conditions)
	return c != nil && c.Status == corev1.ConditionUnknown, nil
}

// judged reports whether dec is about a node edgequorum judges, one with a
// verdict: pods on any other node are the node lifecycle controller's alone,
// and the webhook never kept them.
func judged(dec Decision) bool {
	return dec.Reason != ReasonNodeNotFound && dec.Reason != ReasonNoVerdict
}

// markNotReady writes what the node lifecycle controller's MarkPodsNotReady
// would have: p's Ready condition False as of now. The cache holds only part
// of a pod, so this patches the one condition (conditions merge by type), and
// only the version judged: a pod changed since fails with a conflict and is
// judged again.
func (h *handback) markNotReady(ctx context.Context, p *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.ResourceVersion},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(h.clock.Now()),
			Reason:             "NodeNotVouched",
			Message:            "edgequorum kept this pod Ready while its node's zone vouched for the node; it no longer does",
		}}},
	})
	if err != nil {
		return fmt.Errorf("pod status patch: %w", err)
	}
	if _, err := h.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}, "status"); err != nil {
		return fmt.Errorf("mark pod %s/%s not ready: %w", p.Namespace, p.Name, err)
	}
	if h.events != nil {
		h.events.record(nodeEvent{node: p.Spec.NodeName, reason: EventPodsHandedBack,
			note: "marked the pods kept Ready on this node not ready: its zone no longer vouches for it"})
	}
	return nil
}
