package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// fieldManager names the repair loop's writes in managedFields and audit logs.
const fieldManager = "edgequorum-webhook"

// Values of the result label of edgequorum_admission_repairs_total.
const (
	repairMutated   = "mutated"
	repairUnchanged = "unchanged"
	repairDryRun    = "dry_run"
	repairConflict  = "conflict"
	repairError     = "error"
	// repairForbidden: the apiserver refused the write for want of a right
	// (the failover's `delete pods`, which deploy/webhook/components/failover
	// grants); not retried until something about the object changes.
	repairForbidden = "forbidden"
)

// repairKey names one object the repair loop may re-send.
type repairKey struct {
	resource  string
	namespace string
	name      string
}

// repairer re-sends objects whose admission was missed (webhook down, timed out,
// restarted): a node vouched for that still carries unreachable:NoExecute, an
// EndpointSlice or Endpoints object with endpoints the webhook would mark ready.
// It also hands back pods the webhook kept Ready on an Unknown node once the
// node is no longer vouched for (see markNotReady): the one write it makes
// itself rather than through the webhook.
// It re-sends each one unchanged, as read from the cache, so the update passes
// through the webhook, which applies the mutation; the rules live in one place
// and a write the webhook does not change is a no-op the apiserver drops.
//
// Only the elected leader among webhook replicas runs it. While leading it
// follows informer events and rescans every period, because vouching changes
// with time (a zone Lease going stale, a cut-off outlasting its protection)
// without any event on the object. A zone whose evidence becomes valid again
// does come with an event, on its zone Lease, and protection should return at
// once, not a period later: so it also follows the zone Leases, and a Lease
// that comes back valid or changes hands brings every node of its zone along
// (see zoneLeaseChanged). Like sample-controller it never acts on an event's
// payload beyond choosing what to consider: a key is re-read from the cache
// and re-judged when its turn comes. Writes are paced by a token
// bucket and an object that comes back unchanged is retried with exponential
// backoff, both from the workqueue's rate limiter.
type repairer struct {
	client    kubernetes.Interface
	mut       *mutator
	nodes     corelisters.NodeLister
	slices    discoverylisters.EndpointSliceLister
	endpoints corelisters.EndpointsLister
	informers []cache.SharedIndexInformer
	// byNode index the EndpointSlice and Endpoints caches by the nodes of
	// their not-ready endpoints (see notReadyNodes), so a node that turns
	// revivable brings its objects along without waiting for a rescan.
	byNode  []cache.Indexer
	clock   clock.WithTicker
	period  time.Duration
	qps     float64
	burst   int
	dryRun  bool
	metrics *metrics
	log     *slog.Logger

	// zoneLeases is the zone Lease informer, and byZoneLease indexes the
	// node cache by the zone Lease that vouches for each node (see
	// nodeZoneLease), so a zone Lease event finds its zone's nodes.
	zoneLeases  cache.SharedIndexInformer
	byZoneLease cache.Indexer

	// pods is the pod cache and podsByNode indexes it by node, so a node
	// that is Unknown and no longer vouched finds the pods the webhook kept
	// Ready (see handBack).
	pods       corelisters.PodLister
	podsByNode cache.Indexer
	// events records each hand-back on the pod's Node; nil records
	// nothing.
	events *eventer
	// failover taints nodes their zone confirms dead; nil when
	// --dead-node-action is none.
	failover *failover
	// memory is the webhook's memory of honoured verdicts, which the
	// leader writes (not in a dry run).
	memory *memory
	// podInformer is the pod cache's informer: with the failover on, a pod
	// that turns terminating on a node the failover tainted brings that
	// node's force-delete key (see podChanged). Nil follows no pod events.
	podInformer cache.SharedIndexInformer
}

// runElected campaigns for the election lock until ctx is done, leading the
// repair loop whenever it holds the lock.
func (r *repairer) runElected(ctx context.Context, lock resourcelock.Interface, cfg Config) error {
	for ctx.Err() == nil {
		leading := make(chan context.Context, 1)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            cfg.LeaderElectionID,
			Callbacks: leaderelection.LeaderCallbacks{
				// client-go runs this in a goroutine of its own; hand the
				// term's context over so the loop runs on a goroutine
				// this function owns and waits for.
				OnStartedLeading: func(lctx context.Context) { leading <- lctx },
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return fmt.Errorf("repair leader election: %w", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			le.Run(ctx)
		}()
		select {
		case lctx := <-leading:
			r.log.Info("leading the repair loop", "identity", lock.Identity())
			r.metrics.repairLeader.Set(1)
			var remembering sync.WaitGroup
			if r.memory != nil && !r.dryRun {
				remembering.Go(func() { r.memory.run(lctx) })
			}
			r.lead(lctx)
			remembering.Wait()
			r.metrics.repairLeader.Set(0)
			if r.failover != nil {
				r.failover.brake.reset() // what it held is the next leader's to judge
			}
			<-done
			r.log.Info("stopped leading the repair loop", "identity", lock.Identity())
		case <-done:
		}
	}
	return nil
}

// lead runs the repair loop for one term of leadership and returns, with every
// goroutine it started stopped, once ctx is done.
func (r *repairer) lead(ctx context.Context) {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		// A first repair waits 5ms, as in client-go's default controller
		// limiter: an endpoint the webhook missed should not stay not ready
		// for long. Retries of one object double from there; the bucket
		// paces all writes together.
		workqueue.NewTypedItemExponentialFailureRateLimiter[repairKey](5*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[repairKey]{Limiter: rate.NewLimiter(rate.Limit(r.qps), r.burst)},
	)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[repairKey]{Clock: r.clock})

	// The handlers' initial replay of every cached object doubles as the
	// first scan.
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.consider(q, obj) },
		UpdateFunc: func(_, obj any) { r.consider(q, obj) },
	}
	regs := make([]cache.ResourceEventHandlerRegistration, len(r.informers))
	for i, inf := range r.informers {
		var err error
		if regs[i], err = inf.AddEventHandler(handler); err != nil {
			r.log.Error("repair loop cannot follow informer events; relying on rescans", "err", err)
		}
	}
	var leaseReg cache.ResourceEventHandlerRegistration
	if r.zoneLeases != nil {
		var err error
		leaseReg, err = r.zoneLeases.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The replay of the cached Leases is skipped: the node
			// handler's replay above already considers every node.
			AddFunc: func(obj any, isInInitialList bool) {
				if !isInInitialList {
					r.zoneLeaseChanged(q, nil, obj)
				}
			},
			UpdateFunc: func(old, obj any) { r.zoneLeaseChanged(q, old, obj) },
		})
		if err != nil {
			r.log.Error("repair loop cannot follow zone Lease events; relying on rescans", "err", err)
		}
	}
	var podReg cache.ResourceEventHandlerRegistration
	if r.failover != nil && r.podInformer != nil {
		var err error
		podReg, err = r.podInformer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			// The replay of the cached pods is skipped: the node
			// handler's replay considers every node and its
			// terminating pods.
			AddFunc: func(obj any, isInInitialList bool) {
				if !isInInitialList {
					r.podChanged(q, obj)
				}
			},
			UpdateFunc: func(_, obj any) { r.podChanged(q, obj) },
		})
		if err != nil {
			r.log.Error("repair loop cannot follow pod events; force-deletes wait for rescans", "err", err)
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for r.processNext(ctx, q) {
		}
	})
	wg.Go(func() {
		t := r.clock.NewTicker(r.period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				r.scan(q)
			}
		}
	})

	<-ctx.Done()
	for i, reg := range regs {
		if reg != nil {
			_ = r.informers[i].RemoveEventHandler(reg)
		}
	}
	if leaseReg != nil {
		_ = r.zoneLeases.RemoveEventHandler(leaseReg)
	}
	if podReg != nil {
		_ = r.podInformer.RemoveEventHandler(podReg)
	}
	q.ShutDown()
	wg.Wait()
}

// scan considers every cached node, EndpointSlice and Endpoints object.
func (r *repairer) scan(q workqueue.TypedRateLimitingInterface[repairKey]) {
	nodes, _ := r.nodes.List(labels.Everything())
	for _, n := range nodes {
		r.consider(q, n)
	}
	slices, _ := r.slices.List(labels.Everything())
	for _, s := range slices {
		r.consider(q, s)
	}
	eps, _ := r.endpoints.List(labels.Everything())
	for _, e := range eps {
		r.consider(q, e)
	}
}

// consider queues obj if the webhook would change it now. A node that went
// Unknown also brings the EndpointSlices and Endpoints with not-ready endpoints
// on it: one admitted while the webhook's node cache still had the node Ready
// was left alone, and no event on the object itself will come to fix it.
func (r *repairer) consider(q workqueue.TypedRateLimitingInterface[repairKey], obj any) {
	key, ok := keyOf(obj)
	if !ok {
		return
	}
	if need, err := r.needsRepair(obj); err == nil && need {
		q.AddRateLimited(key)
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if r.failover != nil {
		if step, _, err := r.failover.step(n); err == nil && step != failoverNone {
			q.AddRateLimited(repairKey{resource: resOutOfService, name: n.Name})
		}
		if due, err := r.failover.forceDeleteDue(n); err == nil && due && r.terminatingPods(n.Name) > 0 {
			q.AddRateLimited(repairKey{resource: resForceDelete, name: n.Name})
		}
	}
	if c := readyCondition(n.Status.Conditions); c == nil || c.Status != corev1.ConditionUnknown {
		return
	}
	r.considerPods(q, n)
	for _, idx := range r.byNode {
		objs, err := idx.ByIndex(notReadyNodeIndex, n.Name)
		if err != nil {
			r.log.Error("read the node index", "node", n.Name, "err", err)
			continue
		}
		for _, o := range objs {
			r.consider(q, o)
		}
	}
}

// considerPods queues the pods of the Unknown node n that are still Ready
// although its zone no longer vouches for it: the webhook kept them Ready
// while it did, and the node lifecycle controller marks pods not ready only
// when a node goes Unknown, never again later. Deciding the node once here
// keeps a scan from deciding it per pod.
func (r *repairer) considerPods(q workqueue.TypedRateLimitingInterface[repairKey], n *corev1.Node) {
	if r.podsByNode == nil {
		return
	}
	if dec, err := r.mut.decider.Decide(n); err != nil || dec.Vouched || !judged(dec) {
		return
	}
	pods, err := r.podsByNode.ByIndex(podNodeIndex, n.Name)
	if err != nil {
		r.log.Error("read the pod index", "node", n.Name, "err", err)
		return
	}
	for _, o := range pods {
		if p, ok := o.(*corev1.Pod); ok && podKeptReady(p) {
			q.AddRateLimited(repairKey{resource: resPodStatus, namespace: p.Namespace, name: p.Name})
		}
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
func (r *repairer) podChanged(q workqueue.TypedRateLimitingInterface[repairKey], obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !podTerminating(p) || p.Spec.NodeName == "" {
		return
	}
	n, err := r.nodes.Get(p.Spec.NodeName)
	if err != nil {
		return
	}
	if due, err := r.failover.forceDeleteDue(n); err == nil && due {
		q.Add(repairKey{resource: resForceDelete, name: n.Name})
	}
}

// terminatingPods counts the cached pods on node that are being deleted.
func (r *repairer) terminatingPods(node string) int {
	if r.podsByNode == nil {
		return 0
	}
	pods, err := r.podsByNode.ByIndex(podNodeIndex, node)
	if err != nil {
		r.log.Error("read the pod index", "node", node, "err", err)
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

// podKeptReady reports whether p is Ready and not being deleted: on a node that
// is Unknown, a Ready the webhook kept.
func podKeptReady(p *corev1.Pod) bool {
	c := podReadyCondition(p.Status.Conditions)
	return c != nil && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
}

// handBack reports whether the Ready condition of p must be handed back to the
// node lifecycle controller's judgement: p is Ready on a node that is Unknown
// and not vouched for.
func (r *repairer) handBack(p *corev1.Pod) (bool, error) {
	if !podKeptReady(p) || p.Spec.NodeName == "" {
		return false, nil
	}
	dec, node, err := r.mut.decider.DecideNode(p.Spec.NodeName)
	if err != nil || dec.Vouched || !judged(dec) {
		return false, err
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

// podNodeIndex names the pod index podNode builds.
const podNodeIndex = "podNode"

// podNode indexes a pod by the node it is bound to.
func podNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// zoneLeaseChanged considers every cached node of the zone whose Lease was
// added, or updated from old, if the change may have given the zone back its
// protection (see zoneLeaseRegained); each Unknown node brings its not-ready
// endpoint objects along (see consider). The Lease only chooses the nodes:
// they come from the node cache, and the Decider re-reads the Lease from its
// own. Plain renewals of a valid Lease, every few seconds per zone, are
// ignored.
func (r *repairer) zoneLeaseChanged(q workqueue.TypedRateLimitingInterface[repairKey], oldObj, obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || r.byZoneLease == nil {
		return
	}
	if old, ok := oldObj.(*coordinationv1.Lease); ok && !zoneLeaseRegained(old, l, r.clock.Now()) {
		return
	}
	nodes, err := r.byZoneLease.ByIndex(zoneLeaseIndex, l.Name)
	if err != nil {
		r.log.Error("read the zone index", "lease", l.Name, "err", err)
		return
	}
	r.metrics.zoneRechecks.Inc()
	r.log.Debug("zone Lease regained or changed hands; re-checking its nodes", "lease", l.Name, "nodes", len(nodes))
	for _, n := range nodes {
		r.consider(q, n)
	}
}

// zoneLeaseRegained reports whether an update of a zone Lease from old to l,
// seen at now, may have restored protection to the zone's nodes: the Lease
// turned valid (old had expired by now, or had no duration), another holder
// or term took it over, whose verdicts are new evidence, or its members'
// attestations speak of a node old's did not (the quorum's word for a node
// the cloud stopped hearing, which comes a renewal after the cloud noticed).
func zoneLeaseRegained(old, l *coordinationv1.Lease, now time.Time) bool {
	return (!leaseFresh(old, now) && leaseFresh(l, now)) ||
		ptr.Deref(old.Spec.HolderIdentity, "") != ptr.Deref(l.Spec.HolderIdentity, "") ||
		old.Annotations[zone.LeaseTermAnnotation] != l.Annotations[zone.LeaseTermAnnotation] ||
		evidenceGained(old, l)
}

// evidenceGained reports whether l's evidence names a node that old's did not.
func evidenceGained(old, l *coordinationv1.Lease) bool {
	was, now := old.Annotations[zone.LeaseEvidenceAnnotation], l.Annotations[zone.LeaseEvidenceAnnotation]
	if now == "" || now == was {
		return false
	}
	named := func(raw string) map[string]bool {
		out := map[string]bool{}
		atts, _ := zone.ParseEvidence(l.Labels[zonek8s.ZoneLabel], raw)
		for _, a := range atts {
			for _, n := range slices.Concat(a.Reach, a.Down) {
				out[n] = true
			}
		}
		return out
	}
	before := named(was)
	for n := range named(now) {
		if !before[n] {
			return true
		}
	}
	return false
}

// zoneLeaseIndex names the node index nodeZoneLease builds.
const zoneLeaseIndex = "zoneLease"

// nodeZoneLease indexes a node by the name of its zone's Lease, zone.LeaseName
// of its zoneLabel value: the Lease the Decider reads for it (the Decider only
// trusts a verdict naming the zone of that label). Keying by the Lease's name
// rather than the zone lets a Lease event find the nodes without trusting any
// label on the Lease. Nodes in no zone are not indexed.
func nodeZoneLease(zoneLabel string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Labels[zoneLabel] == "" {
			return nil, nil
		}
		return []string{zone.LeaseName(n.Labels[zoneLabel])}, nil
	}
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
func (r *repairer) needsRepair(obj any) (bool, error) {
	var n int
	var err error
	switch o := obj.(type) {
	case *corev1.Node:
		n, _, err = r.mut.node(o.DeepCopy())
	case *discoveryv1.EndpointSlice:
		n, err = r.mut.endpointSlice(o.DeepCopy(), r.mut.newQualifier())
	case *corev1.Endpoints:
		n, err = r.mut.endpoints(o.DeepCopy(), r.mut.newQualifier())
	case *corev1.Pod:
		return r.handBack(o)
	}
	return n > 0, err
}

func (r *repairer) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[repairKey]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	result, err := r.sync(ctx, q, key)
	// A force-delete sync writes per pod and counts each write itself.
	if result != "" && key.resource != resForceDelete {
		r.metrics.repairs.WithLabelValues(key.resource, result).Inc()
	}
	switch result {
	case repairUnchanged, repairConflict, repairError:
		// The webhook did not answer, or the cache was behind: try again
		// later, backing off per object.
		r.log.Debug("repair not done, will retry", "resource", key.resource, "namespace", key.namespace, "name", key.name, "result", result, "err", err)
		q.AddRateLimited(key)
	default:
		switch {
		case result == repairMutated && key.resource == resOutOfService:
			// failover.write logged it.
		case result == repairMutated && key.resource == resPodStatus:
			r.log.Info("handed a kept pod back to not ready: its node is no longer vouched", "namespace", key.namespace, "name", key.name)
		case result == repairMutated:
			r.log.Info("repaired a missed admission", "resource", key.resource, "namespace", key.namespace, "name", key.name)
		}
		q.Forget(key)
	}
	return true
}

// sync re-judges the cached object and, if the webhook would change it,
// re-sends it unchanged. It returns the result label, or "" when there was
// nothing to do.
func (r *repairer) sync(ctx context.Context, q workqueue.TypedRateLimitingInterface[repairKey], key repairKey) (string, error) {
	switch key.resource {
	case resOutOfService:
		return r.syncFailover(ctx, q, key)
	case resForceDelete:
		return r.syncForceDelete(ctx, key)
	}
	obj, err := r.get(key)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return repairError, err
	}
	need, err := r.needsRepair(obj)
	if err != nil {
		return repairError, err
	}
	if !need {
		return "", nil
	}
	if r.dryRun {
		return repairDryRun, nil
	}
	stored, err := r.update(ctx, key, obj)
	if err == nil && !stored {
		// The apiserver stored nothing: the webhook was not called or left
		// the object alone.
		return repairUnchanged, nil
	}
	return writeResult(err)
}

// writeResult is the result label of a write that failed with err, or
// succeeded: a write to an object gone since is nothing to count.
func writeResult(err error) (string, error) {
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case apierrors.IsConflict(err):
		return repairConflict, err
	case err != nil:
		return repairError, err
	}
	return repairMutated, nil
}

// syncFailover judges the cached node again and applies or removes the
// out-of-service taint if the failover says so; a node confirmed dead for
// less than the dwell time comes back when it is up.
func (r *repairer) syncFailover(ctx context.Context, q workqueue.TypedRateLimitingInterface[repairKey], key repairKey) (string, error) {
	if r.failover == nil {
		return "", nil
	}
	n, err := r.nodes.Get(key.name)
	if apierrors.IsNotFound(err) {
		r.failover.forget(key.name)
		return "", nil
	}
	if err != nil {
		return repairError, err
	}
	step, wait, limit, note, err := r.failover.judge(n)
	switch {
	case err != nil:
		return repairError, err
	case step == failoverWait:
		q.AddAfter(key, wait)
		return "", nil
	case step == failoverHeld:
		// Judged again once the brake may have let go: another node
		// back, or the outage over. Rescans bring it back too.
		r.failover.hold(n, limit, note)
		q.AddAfter(key, r.failover.dwell)
		return "", nil
	case step == failoverNone:
		return "", nil
	case r.dryRun:
		return repairDryRun, nil
	}
	return writeResult(r.failover.write(ctx, n, step == failoverTaint))
}

// syncForceDelete force-deletes the terminating pods on the node named by key
// if the failover is due to (see failover.forceDeleteDue), counting each
// pod's write in repairs_total{resource="forcedelete"}. It returns
// repairError (retried, with backoff) if a delete failed for a reason that
// may pass, and repairForbidden, not retried, if the webhook may not delete
// pods: the pod garbage collector still deletes them on its cycle, and the
// next pod or node event tries again.
func (r *repairer) syncForceDelete(ctx context.Context, key repairKey) (string, error) {
	if r.failover == nil || r.podsByNode == nil {
		return "", nil
	}
	n, err := r.nodes.Get(key.name)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return repairError, fmt.Errorf("read node %s from the cache: %w", key.name, err)
	}
	due, err := r.failover.forceDeleteDue(n)
	if err != nil {
		return repairError, err
	}
	if !due {
		return "", nil
	}
	objs, err := r.podsByNode.ByIndex(podNodeIndex, n.Name)
	if err != nil {
		return repairError, fmt.Errorf("read the pod index for node %s: %w", n.Name, err)
	}
	count := func(result string) { r.metrics.repairs.WithLabelValues(resForceDelete, result).Inc() }
	deleted := 0
	var failed error
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || !podTerminating(p) {
			continue
		}
		if r.dryRun {
			count(repairDryRun)
			continue
		}
		err := r.failover.forceDelete(ctx, p)
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
			r.failover.logForbidden(n.Name, err)
			if deleted > 0 {
				r.failover.forceDeleted(n, deleted)
			}
			return repairForbidden, err
		default:
			count(repairError)
			failed = err
		}
	}
	if deleted > 0 {
		r.failover.forceDeleted(n, deleted)
	}
	if failed != nil {
		return repairError, failed
	}
	return "", nil
}

func (r *repairer) get(key repairKey) (any, error) {
	switch key.resource {
	case resNode:
		return r.nodes.Get(key.name)
	case resEndpointSlice:
		return r.slices.EndpointSlices(key.namespace).Get(key.name)
	case resEndpoints:
		return r.endpoints.Endpoints(key.namespace).Get(key.name)
	case resPodStatus:
		if r.pods == nil {
			break
		}
		return r.pods.Pods(key.namespace).Get(key.name)
	}
	return nil, fmt.Errorf("unknown repair resource %q", key.resource)
}

// update writes obj: a node, EndpointSlice or Endpoints object is sent back
// as it is, to pass through the webhook; a pod's Ready condition is handed
// back. It reports whether the apiserver stored a change.
func (r *repairer) update(ctx context.Context, key repairKey, obj any) (bool, error) {
	opts := metav1.UpdateOptions{FieldManager: fieldManager}
	var out metav1.Object
	var err error
	switch o := obj.(type) {
	case *corev1.Node:
		out, err = r.client.CoreV1().Nodes().Update(ctx, o.DeepCopy(), opts)
	case *discoveryv1.EndpointSlice:
		out, err = r.client.DiscoveryV1().EndpointSlices(o.Namespace).Update(ctx, o.DeepCopy(), opts)
	case *corev1.Endpoints:
		out, err = r.client.CoreV1().Endpoints(o.Namespace).Update(ctx, o.DeepCopy(), opts)
	case *corev1.Pod:
		// A patch that applies is a change: it sets Ready to False on a
		// pod judged Ready, at the version judged.
		return true, r.markNotReady(ctx, o)
	default:
		return false, fmt.Errorf("unknown repair resource %q", key.resource)
	}
	if err != nil {
		return false, err
	}
	return out.GetResourceVersion() != obj.(metav1.Object).GetResourceVersion(), nil
}

// markNotReady writes what the node lifecycle controller's MarkPodsNotReady
// would have: p's Ready condition False as of now. The cache holds only part
// of a pod, so this patches the one condition (conditions merge by type), and
// only the version judged: a pod changed since fails with a conflict and is
// judged again.
func (r *repairer) markNotReady(ctx context.Context, p *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.ResourceVersion},
		"status": map[string]any{"conditions": []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(r.clock.Now()),
			Reason:             "NodeNotVouched",
			Message:            "edgequorum kept this pod Ready while its node's zone vouched for the node; it no longer does",
		}}},
	})
	if err != nil {
		return fmt.Errorf("pod status patch: %w", err)
	}
	_, err = r.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	if err == nil && r.events != nil {
		r.events.record(nodeEvent{node: p.Spec.NodeName, reason: EventPodsHandedBack,
			note: "marked the pods kept Ready on this node not ready: its zone no longer vouches for it"})
	}
	return err
}
