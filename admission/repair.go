package admission

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// repairKey names one object the repair loop may write. Its resource, a value
// of the resource label, also says whose key it is (see repairer.sync).
type repairKey struct {
	resource  string
	namespace string
	name      string
}

// repairQueue is the workqueue the repair loop's controllers share, so that
// one token bucket paces all of their writes together.
type repairQueue = workqueue.TypedRateLimitingInterface[repairKey]

// repairer is the repair loop: what admission alone cannot do, run by the
// elected leader among webhook replicas. Three controllers share its queue:
//
//   - resend (resend.go) re-sends nodes, EndpointSlices and Endpoints objects
//     whose admission was missed, unchanged, so the webhook mutates them;
//   - handback (handback.go) hands pods the webhook kept Ready on an Unknown
//     node back to not ready once the node is no longer vouched for, patching
//     their status itself;
//   - failover (failover.go), with --dead-node-action=out-of-service, applies
//     and removes the out-of-service taint on nodes their zone confirms dead,
//     behind its brake, and force-deletes the terminating pods on the nodes it
//     tainted.
//
// The leader also writes the webhook's memory of the verdicts it honoured
// (memory.go), outside the queue.
//
// While leading it follows informer events and rescans every period, because
// vouching changes with time (a zone Lease going stale, a cut-off outlasting
// its protection) without any event on the object. A zone whose evidence
// becomes valid again does come with an event, on its zone Lease, and
// protection should return at once, not a period later: so it also follows
// the zone Leases, and a Lease that comes back valid or changes hands brings
// every node of its zone along (see zoneLeaseChanged). Like sample-controller
// it never acts on an event's payload beyond choosing what to consider: a key
// is re-read from the cache and re-judged when its turn comes. Writes are
// paced by a token bucket and a key whose write did not take is retried with
// exponential backoff, both from the workqueue's rate limiter.
type repairer struct {
	resend   *resender
	handback *handback
	// failover is nil when --dead-node-action is none.
	failover *failover
	// memory is the webhook's memory of honoured verdicts, which the
	// leader writes (not in a dry run).
	memory *memory
	// zones is the zone view (zoneview.go), which the leader keeps.
	zones *zoneViewer
	// certs keeps the webhook's own certificates (certs.go); nil unless
	// --manage-certs.
	certs *certKeeper

	// informers are the node, EndpointSlice and Endpoints informers: their
	// events, and a rescan of their caches every period, bring the keys.
	informers []cache.SharedIndexInformer
	// zoneLeases is the zone Lease informer, and byZoneLease indexes the
	// node cache by the zone Lease that vouches for each node (see
	// nodeZoneLease), so a zone Lease event finds its zone's nodes.
	zoneLeases  cache.SharedIndexInformer
	byZoneLease cache.Indexer
	// podInformer is the pod cache's informer: with the failover on, a pod
	// that turns terminating on a node the failover tainted brings that
	// node's force-delete key (see failover.podChanged). Nil follows no pod
	// events.
	podInformer cache.SharedIndexInformer

	clock   clock.WithTicker
	period  time.Duration
	qps     float64
	burst   int
	dryRun  bool
	metrics *metrics
	log     *slog.Logger
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
			if r.zones != nil {
				remembering.Go(func() { r.zones.run(lctx) })
			}
			// Even in a dry run: without its certificate no replica
			// answers a review at all.
			if r.certs != nil {
				remembering.Go(func() { r.certs.run(lctx) })
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
					r.failover.podChanged(q, obj)
				}
			},
			UpdateFunc: func(_, obj any) { r.failover.podChanged(q, obj) },
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
				r.scan(ctx, q)
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
func (r *repairer) scan(ctx context.Context, q repairQueue) {
	var objs [][]any
	total := 0
	for _, inf := range r.informers {
		list := inf.GetStore().List()
		objs, total = append(objs, list), total+len(list)
	}
	var pace pacer
	if total >= pacedObjects {
		pace.batch, pace.pause = spreadOver(total, r.period/2)
	}
	for _, list := range objs {
		for _, obj := range list {
			if !pace.next(ctx) {
				return
			}
			r.consider(q, obj)
		}
	}
}

// pacedObjects is how many objects a rescan considers before it spreads its
// work over half the period (spreadOver): fewer take a few milliseconds.
const pacedObjects = 5000

// consider offers obj, a node, EndpointSlice or Endpoints object, to each
// controller, which queues what it would write now. A node that went Unknown
// also brings the pods the webhook may have kept Ready on it, and the
// EndpointSlices and Endpoints with not-ready endpoints on it: one admitted
// while the webhook's node cache still had the node Ready was left alone, and
// no event on the object itself will come to fix it.
func (r *repairer) consider(q repairQueue, obj any) {
	r.resend.consider(q, obj)
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if r.failover != nil {
		r.failover.consider(q, n)
	}
	if c := readyCondition(n.Status.Conditions); c == nil || c.Status != corev1.ConditionUnknown {
		return
	}
	r.handback.consider(q, n)
	r.resend.considerNotReadyOn(q, n)
}

// processNext syncs the next key, counts what it wrote and, if the write did
// not take, queues the key again with backoff. It reports false once the
// queue shuts down.
func (r *repairer) processNext(ctx context.Context, q repairQueue) bool {
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
		q.Forget(key)
	}
	return true
}

// sync hands key to the controller whose key it is, which re-reads the object
// from its cache, re-judges it and writes if it still must. It returns the
// result label, or "" when there was nothing to do.
func (r *repairer) sync(ctx context.Context, q repairQueue, key repairKey) (string, error) {
	switch key.resource {
	case resPodStatus:
		return r.handback.sync(ctx, key)
	case resOutOfService:
		if r.failover == nil {
			return "", nil
		}
		return r.failover.syncTaint(ctx, q, key)
	case resForceDelete:
		if r.failover == nil {
			return "", nil
		}
		return r.failover.syncForceDelete(ctx, key)
	}
	return r.resend.sync(ctx, key)
}

// syncCached is how resend and handback sync a key, the loop's rule that a
// key is never acted on as it was queued: it re-reads the object with get
// and re-judges it with due, and only if it must still be written, and not in
// a dry run, writes it with write, which returns the result label.
func syncCached[T any](ctx context.Context, key repairKey, dryRun bool, get func(repairKey) (T, error),
	due func(T) (bool, error), write func(context.Context, repairKey, T) (string, error)) (string, error) {
	obj, err := get(key)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return repairError, fmt.Errorf("read %s %s from the cache: %w", key.resource, cache.NewObjectName(key.namespace, key.name), err)
	}
	need, err := due(obj)
	if err != nil {
		return repairError, err
	}
	if !need {
		return "", nil
	}
	if dryRun {
		return repairDryRun, nil
	}
	return write(ctx, key, obj)
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

// podNodeIndex names the pod index podNode builds, which the hand-back and
// the failover's force-deletes read.
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
func (r *repairer) zoneLeaseChanged(q repairQueue, oldObj, obj any) {
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
