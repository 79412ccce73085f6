package admission

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
)

// outOfServiceAnnotation marks a node the failover tainted, with when: only
// such a node's out-of-service taint is ever removed, never one an admin set.
// It lies outside edgequorum.io/, so the agents' tokens cannot write it.
const outOfServiceAnnotation = zone.OutOfServiceAnnotation

// outOfServiceValue is the taint's value, the one the Kubernetes
// documentation of non-graceful node shutdown uses.
const outOfServiceValue = "nodeshutdown"

// Events the failover records on the node. The values are stable: operators
// filter on them.
const (
	// EventOutOfServiceApplied marks when the failover began evicting a
	// node's pods and detaching its volumes: the answer to why a
	// StatefulSet's pod moved.
	EventOutOfServiceApplied = "OutOfServiceTaintApplied"
	// EventOutOfServiceRemoved says why a node takes pods again: its zone
	// judged it healthy, so the failover took back the taint it applied.
	EventOutOfServiceRemoved = "OutOfServiceTaintRemoved"
	// EventForceDeletedPods says how many terminating pods the failover
	// force-deleted from a node it tainted: the one write that lets a
	// StatefulSet start its pod elsewhere, so the one worth seeing in
	// `kubectl describe node`.
	EventForceDeletedPods = "ForceDeletedPods"
)

// failover applies the out-of-service taint to nodes their zone confirms
// dead, and removes it once the zone judges them healthy again. The taint is
// Kubernetes' non-graceful node shutdown: the taint evicts the node's pods at
// once, the pod garbage collector force-deletes them on its 20 s cycle, and
// the attach-detach controller detaches their volumes, so a StatefulSet's
// pods start elsewhere without waiting for a human. It is a controller of the
// repair loop and runs in its leader: its keys (resource outofservice for the
// taint, forcedelete for the force-deletes, both named by the node) share the
// loop's queue and token bucket.
//
// The taint is applied when the verdict the node is judged by (its own
// annotation if the zone signed it, else the last one the zone signed, so a
// forged or replayed annotation neither starts nor stalls a failover) says
// unhealthy, a majority of its peers having failed to reach
// it; the zone Lease vouching for that verdict is fresh, so the zone's leader
// reaches the cloud and the verdict is the zone's current word (never for a
// cut-off zone); both have held for the dwell time by the webhook's clock, so
// a verdict that flaps does not act; and the cloud sees the node's Ready
// condition Unknown, its kubelet silent too; and the brake (brake.go) lets
// it: no more nodes out of service at once, per zone and cluster-wide, than
// the operator allows, and none during a mass outage. The dwell runs from the zone's
// judgement, not from Unknown: the zone knows within seconds, the controller
// manager only after its grace period, so failover takes the longer of the
// two rather than their sum.
//
// Once the taint evicted a node's pods (the taint manager sets their
// deletionTimestamp at once), the failover also force-deletes them, as the pod
// garbage collector would on its next 20 s cycle: a StatefulSet creates its
// pod again only once the old pod object is gone, and those seconds are most
// of what a StatefulSet pod waits otherwise. It does so only on a node it
// tainted itself (see forceDeleteDue), and only for pods that are already
// terminating: a pod that tolerates the taint stays.
//
// A node cut off from both its peers and the cloud is treated as dead: that is
// the operator's trade when turning this on.
type failover struct {
	client  kubernetes.Interface
	decider *Decider
	nodes   corelisters.NodeLister
	// podsByNode indexes the pod cache by node, so a tainted node finds its
	// terminating pods.
	podsByNode cache.Indexer
	clock      clock.PassiveClock
	dwell      time.Duration
	dryRun     bool
	log        *slog.Logger
	events     *eventer
	metrics    *metrics
	brake      *brake

	// forbiddenLogged: the missing `delete pods` right was logged once.
	forbiddenLogged atomic.Bool

	mu sync.Mutex
	// deadSince is when each node was first seen judged unhealthy by its
	// zone's leader reaching the cloud, in the current stretch.
	deadSince map[string]time.Time
	// waitingWord are the nodes due for the taint whose peers have not
	// confirmed them down, logged once per stretch.
	waitingWord map[string]bool
}

// evidenceRecheck is how soon a node due for the taint but not yet confirmed
// down by its peers is judged again: about a zone Lease renewal.
const evidenceRecheck = 5 * time.Second

// unconfirmed logs, once per stretch, that node waits for its peers' word.
func (f *failover) unconfirmed(node string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.waitingWord[node] {
		return
	}
	f.waitingWord[node] = true
	f.metrics.failoverUnconfirmed.Inc()
	f.log.Info("the zone judges the node dead, but no majority of its peers attests that its kubelet and agent are both unreachable; not failed over until they do",
		"node", node)
}

// newFailover returns the failover cfg asks for, reading nodes and pods from
// the caches, or nil when --dead-node-action is none: the repair loop then
// neither taints nor force-deletes anything.
func newFailover(cfg Config, client kubernetes.Interface, d *Decider, nodes corelisters.NodeLister, podsByNode cache.Indexer,
	events *eventer, m *metrics) *failover {
	if cfg.DeadNodeAction != DeadNodeActionOutOfService {
		return nil
	}
	f := &failover{client: client, decider: d, nodes: nodes, podsByNode: podsByNode, clock: cfg.Clock, dwell: cfg.DeadNodeDwell, dryRun: cfg.DryRun,
		log: cfg.Logger.With("component", "failover"), events: events, metrics: m, deadSince: map[string]time.Time{},
		waitingWord: map[string]bool{}}
	f.brake = newBrake(f, cfg)
	return f
}

// failoverStep is what the failover would do to a node now.
type failoverStep int

const (
	failoverNone failoverStep = iota
	// failoverWait: judged unhealthy, not yet for the dwell time.
	failoverWait
	failoverTaint
	failoverUntaint
	// failoverHeld: due for the taint, but the brake holds it (see brake).
	failoverHeld
)

// judge judges n and says what to do, for failoverWait how long until the
// dwell time is up, and for failoverHeld (a node due for the taint that the
// brake holds) the brake's limit and why it holds; hold records it.
func (f *failover) judge(n *corev1.Node) (s failoverStep, wait time.Duration, limit, note string, err error) {
	s, wait, err = f.plainStep(n)
	if err != nil || s != failoverTaint {
		if err == nil && s != failoverWait {
			f.brake.release(n.Name)
		}
		return s, wait, "", "", err
	}
	limit, note, err = f.brake.check(n, n.Labels[f.decider.zoneLabel])
	if err != nil {
		return s, 0, "", "", err
	}
	if limit == "" {
		f.brake.release(n.Name) // let go: tainted next, or only counted in a dry run
		return s, 0, "", "", nil
	}
	return failoverHeld, 0, limit, note, nil
}

// plainStep is judge without the brake.
func (f *failover) plainStep(n *corev1.Node) (failoverStep, time.Duration, error) {
	j, err := f.decider.judgement(n)
	if err != nil {
		return failoverNone, 0, err
	}
	dead := j.state == zone.Unhealthy && j.leaderReachesCloud
	now := f.clock.Now()
	f.mu.Lock()
	since, seen := f.deadSince[n.Name]
	switch {
	case !dead:
		delete(f.deadSince, n.Name)
		delete(f.waitingWord, n.Name)
	case !seen:
		since = now
		f.deadSince[n.Name] = now
	}
	f.mu.Unlock()
	ready := readyCondition(n.Status.Conditions)
	unknown := ready != nil && ready.Status == corev1.ConditionUnknown
	_, ours := n.Annotations[outOfServiceAnnotation]
	switch {
	case dead && hasOutOfService(n):
		return failoverNone, 0, nil
	case dead && now.Sub(since) < f.dwell:
		return failoverWait, since.Add(f.dwell).Sub(now), nil
	case dead && unknown && !f.decider.evidence.confirmedDown(n.Name, n.Labels[f.decider.zoneLabel], j.evidenceTerm):
		// The leader's word is not enough to delete pods and detach
		// volumes: a majority of the node's peers must find every probe
		// of theirs failing on it. Their attestations come with the
		// zone Lease's renewals; look again shortly.
		f.unconfirmed(n.Name)
		return failoverWait, evidenceRecheck, nil
	case dead && unknown:
		return failoverTaint, 0, nil
	case !dead && ours && j.state == zone.Healthy:
		return failoverUntaint, 0, nil
	}
	// Dead long enough but not yet Unknown: the controller manager's write
	// brings the node back here.
	return failoverNone, 0, nil
}

// consider queues n's taint key if the failover would apply or remove the
// taint now, or wait for it, and n's force-delete key if it is due to
// force-delete there and terminating pods wait.
func (f *failover) consider(q repairQueue, n *corev1.Node) {
	if step, _, _, _, err := f.judge(n); err == nil && step != failoverNone {
		q.AddRateLimited(repairKey{resource: resOutOfService, name: n.Name})
	}
	if due, err := f.forceDeleteDue(n); err == nil && due && f.terminatingPods(n.Name) > 0 {
		q.AddRateLimited(repairKey{resource: resForceDelete, name: n.Name})
	}
}

// podChanged queues the force-delete key of the node of obj, a pod just added
// or updated, if the pod is terminating and the failover is due to
// force-delete there: the taint manager evicts a node's pods the moment the
// failover's taint lands, and each eviction is an update here. Plain Add, not
// rate-limited: the queue folds a node's many evictions into one sync, and
// the backoff of one key must not grow with the number of its pods. The node's
// own events cover the other order (pod cache first, node cache second): see
// consider.
func (f *failover) podChanged(q repairQueue, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !podTerminating(p) || p.Spec.NodeName == "" {
		return
	}
	n, err := f.nodes.Get(p.Spec.NodeName)
	if err != nil {
		return
	}
	if due, err := f.forceDeleteDue(n); err == nil && due {
		q.Add(repairKey{resource: resForceDelete, name: n.Name})
	}
}

// terminatingPods counts the cached pods on node that are being deleted.
func (f *failover) terminatingPods(node string) int {
	if f.podsByNode == nil {
		return 0
	}
	pods, err := f.podsByNode.ByIndex(podNodeIndex, node)
	if err != nil {
		f.log.Error("read the pod index", "node", node, "err", err)
		return 0
	}
	count := 0
	for _, o := range pods {
		if p, ok := o.(*corev1.Pod); ok && podTerminating(p) {
			count++
		}
	}
	return count
}

// syncTaint judges the cached node of key again and applies or removes the
// out-of-service taint if the failover says so; a node confirmed dead for
// less than the dwell time comes back when it is up, and one the brake holds
// once the brake may have let go.
func (f *failover) syncTaint(ctx context.Context, q repairQueue, key repairKey) (string, error) {
	n, err := f.nodes.Get(key.name)
	if apierrors.IsNotFound(err) {
		f.forget(key.name)
		return "", nil
	}
	if err != nil {
		return repairError, fmt.Errorf("read node %s from the cache: %w", key.name, err)
	}
	step, wait, limit, note, err := f.judge(n)
	switch {
	case err != nil:
		return repairError, err
	case step == failoverWait:
		q.AddAfter(key, wait)
		return "", nil
	case step == failoverHeld:
		// Judged again once the brake may have let go: another node
		// back, or the outage over. Rescans bring it back too.
		f.hold(n, limit, note)
		q.AddAfter(key, f.dwell)
		return "", nil
	case step == failoverNone:
		return "", nil
	case f.dryRun:
		return repairDryRun, nil
	}
	return writeResult(f.write(ctx, n, step == failoverTaint))
}

// syncForceDelete force-deletes the terminating pods on the node named by key
// if the failover is due to (see forceDeleteDue), counting each pod's write
// in repairs_total{resource="forcedelete"}. It returns repairError (retried,
// with backoff) if a delete failed for a reason that may pass, and
// repairForbidden, not retried, if the webhook may not delete pods: the pod
// garbage collector still deletes them on its cycle, and the next pod or node
// event tries again.
func (f *failover) syncForceDelete(ctx context.Context, key repairKey) (string, error) {
	if f.podsByNode == nil {
		return "", nil
	}
	n, err := f.nodes.Get(key.name)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return repairError, fmt.Errorf("read node %s from the cache: %w", key.name, err)
	}
	due, err := f.forceDeleteDue(n)
	if err != nil {
		return repairError, err
	}
	if !due {
		return "", nil
	}
	objs, err := f.podsByNode.ByIndex(podNodeIndex, n.Name)
	if err != nil {
		return repairError, fmt.Errorf("read the pod index for node %s: %w", n.Name, err)
	}
	count := func(result string) { f.metrics.repairs.WithLabelValues(resForceDelete, result).Inc() }
	deleted := 0
	var failed error
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || !podTerminating(p) {
			continue
		}
		if f.dryRun {
			count(repairDryRun)
			continue
		}
		err := f.forceDelete(ctx, p)
		switch {
		case err == nil:
			count(repairMutated)
			deleted++
		case apierrors.IsNotFound(err):
			// Gone already: the pod garbage collector, or a kubelet
			// that came back, was first.
		case apierrors.IsConflict(err):
			// The UID precondition: a new pod of that name replaced
			// the one judged; it is judged when the cache has it.
			count(repairConflict)
		case apierrors.IsForbidden(err):
			count(repairForbidden)
			f.logForbidden(n.Name, err)
			if deleted > 0 {
				f.forceDeleted(n, deleted)
			}
			return repairForbidden, err
		default:
			count(repairError)
			failed = err
		}
	}
	if deleted > 0 {
		f.forceDeleted(n, deleted)
	}
	if failed != nil {
		return repairError, failed
	}
	return "", nil
}

// forceDeleteDue reports whether the terminating pods on n are the failover's
// to force-delete now: n carries the out-of-service taint the failover applied
// itself (its annotation and the taint: never a node an admin tainted), its
// zone, reaching the cloud, still judges it unhealthy, and the cloud still sees
// it Unknown. The pod garbage collector deletes the same pods on its cycle;
// this only takes its wait out of the failover.
func (f *failover) forceDeleteDue(n *corev1.Node) (bool, error) {
	if _, ours := n.Annotations[outOfServiceAnnotation]; !ours || !hasOutOfService(n) {
		return false, nil
	}
	if c := readyCondition(n.Status.Conditions); c == nil || c.Status != corev1.ConditionUnknown {
		return false, nil
	}
	j, err := f.decider.judgement(n)
	if err != nil {
		return false, fmt.Errorf("judge node %s: %w", n.Name, err)
	}
	return j.state == zone.Unhealthy && j.leaderReachesCloud, nil
}

// podTerminating reports whether p is being deleted: on a node tainted out of
// service, a pod the taint evicted and that no kubelet will ever finish.
func podTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// forceDelete deletes p at once (grace period 0), as the pod garbage collector
// does for terminating pods on out-of-service nodes, but only the pod judged:
// the UID precondition fails with a conflict if a pod of the same name
// replaced it since (a StatefulSet reuses names).
func (f *failover) forceDelete(ctx context.Context, p *corev1.Pod) error {
	uid := p.UID
	err := f.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return fmt.Errorf("force-delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// forceDeleted logs and records on node n that the failover force-deleted
// count of its pods.
func (f *failover) forceDeleted(n *corev1.Node, count int) {
	note := fmt.Sprintf("force-deleted %d terminating pod(s): the node is tainted out of service and its zone, reaching the cloud, judges it dead, so their controllers may start them elsewhere now", count)
	f.log.Info(note, "node", n.Name)
	if f.events != nil {
		f.events.record(nodeEvent{node: n.Name, uid: n.UID, reason: EventForceDeletedPods, typ: corev1.EventTypeWarning,
			action: "Failover", note: note})
	}
}

// logForbidden logs, once per process and as an error naming the missing
// right and what grants it, that the apiserver refused a force-delete; later
// refusals are logged at debug level, so a misconfiguration is loud once
// rather than on every pod.
func (f *failover) logForbidden(node string, err error) {
	if f.forbiddenLogged.CompareAndSwap(false, true) {
		f.log.Error("cannot force-delete terminating pods on a node tainted out of service: the webhook's ServiceAccount lacks `delete pods`, "+
			"which --dead-node-action=out-of-service needs; apply the kustomize component deploy/webhook/components/failover "+
			"(ClusterRole edgequorum-webhook-failover) or deploy/install/webhook-failover.yaml. Until then the pod garbage collector "+
			"deletes them on its 20 s cycle, so StatefulSet pods start elsewhere up to 20 s later; the taint itself still works",
			"node", node, "err", err)
		return
	}
	f.log.Debug("force-delete refused: no `delete pods` right", "node", node, "err", err)
}

// forget drops what the failover knows of a node that is gone.
func (f *failover) forget(node string) {
	f.mu.Lock()
	delete(f.deadSince, node)
	f.mu.Unlock()
	f.brake.release(node)
	f.brake.tainted(node, "", false, "", "", "")
}

// hold records that the brake holds n by limit: logged and recorded on the
// node once per stretch and limit, counted in
// edgequorum_admission_failover_held_total and shown in
// edgequorum_admission_failover_held_nodes while it lasts.
func (f *failover) hold(n *corev1.Node, limit, note string) {
	if !f.brake.hold(n.Name, limit) {
		return
	}
	note = "not tainting out of service although its zone, reaching the cloud, judges it dead and the cloud sees it Unknown: " + note +
		"; its pods wait for upstream eviction"
	f.log.Warn(note, "node", n.Name, "limit", limit)
	if f.events != nil {
		f.events.record(nodeEvent{node: n.Name, uid: n.UID, reason: EventFailoverHeld, typ: corev1.EventTypeWarning,
			action: "Failover", note: note})
	}
}

// hasOutOfService reports whether n carries the out-of-service taint, whoever
// set it.
func hasOutOfService(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, isOutOfService)
}

func isOutOfService(t corev1.Taint) bool {
	return t.Key == corev1.TaintNodeOutOfService && t.Effect == corev1.TaintEffectNoExecute
}

// write applies (taint) or removes the taint on n as the cache holds it,
// guarded by its resourceVersion: a node changed since is judged again.
func (f *failover) write(ctx context.Context, n *corev1.Node, taint bool) error {
	n = n.DeepCopy()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	reason, note := EventOutOfServiceRemoved, "removed node.kubernetes.io/out-of-service: its zone judges it healthy again"
	if taint {
		now := metav1.NewTime(f.clock.Now())
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: outOfServiceValue,
			Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
		n.Annotations[outOfServiceAnnotation] = now.UTC().Format(time.RFC3339)
		reason = EventOutOfServiceApplied
		note = fmt.Sprintf("applied node.kubernetes.io/out-of-service: its zone, reaching the cloud, has judged it unhealthy for %s and the cloud sees it Unknown; its pods are deleted and their volumes detached", f.dwell)
	} else {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, isOutOfService)
		delete(n.Annotations, outOfServiceAnnotation)
	}
	written, err := f.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("update node %s: %w", n.Name, err)
	}
	f.brake.tainted(n.Name, n.Labels[f.decider.zoneLabel], taint, n.Annotations[outOfServiceAnnotation], n.ResourceVersion, written.ResourceVersion)
	f.brake.release(n.Name)
	if taint {
		f.metrics.failovers.Inc()
	}
	f.log.Info(note, "node", n.Name)
	if f.events != nil {
		typ := corev1.EventTypeNormal
		if taint {
			typ = corev1.EventTypeWarning
		}
		f.events.record(nodeEvent{node: n.Name, uid: n.UID, reason: reason, typ: typ, action: "Failover", note: note})
	}
	return nil
}
