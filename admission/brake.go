package admission

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/edgequorum/edgequorum/zone"
)

// Limits of the failover's brake: the value of the limit label of
// edgequorum_admission_failover_held_total. The values are stable: alerts
// filter on them.
const (
	// brakeZone: the node's zone already has as many nodes out of service
	// as --failover-max-per-zone allows, or as a minority of the zone is.
	brakeZone = "zone"
	// brakeCluster: the cluster already has as many edge nodes out of
	// service as --failover-max-unhealthy allows.
	brakeCluster = "cluster"
	// brakeMassOutage: the cloud sees at least
	// --failover-mass-outage-threshold of the edge nodes Unknown.
	brakeMassOutage = "mass_outage"
)

// EventFailoverHeld says the failover did not taint a node its zone confirms
// dead because the brake held: how many nodes it may keep out of service at
// once, per zone and cluster-wide, and none during a mass outage.
const EventFailoverHeld = "FailoverHeld"

// brake bounds how many nodes the failover keeps out of service at once. One
// bad verdict stream, or one bug, must not fail over a whole site or a fleet:
// the out-of-service taint deletes pods and detaches volumes, which nothing
// undoes. The brake holds a node (it stays as it is, its pods waiting for
// upstream eviction) when tainting it would put more than
// --failover-max-per-zone nodes of its zone, or a majority of the zone, out
// of service; when it would put more than --failover-max-unhealthy of the
// cluster's edge nodes out of service; and while at least
// --failover-mass-outage-threshold of the edge nodes are Unknown to the cloud,
// which is the cloud's own link or a whole region down, not dead machines.
// Only taints the failover applied count (an admin's are the admin's
// business), and only on nodes their zone does not sign healthy (a node's
// kubelet credential can mark its own Node). The counts come from the node cache, plus the taints this
// process wrote that the cache does not show yet: the single repair worker
// judges the next node before the informer has delivered the last write.
type brake struct {
	f            *failover
	perZone      int
	maxUnhealthy intstr.IntOrString
	massOutage   float64

	mu sync.Mutex
	// pending are the nodes this process tainted, with their zone and when.
	pending map[string]pendingTaint
	// held are the nodes the brake holds now, by limit.
	held map[string]string
}

// pendingTaint is a taint this process wrote: its zone, the annotation value
// that marks it, and the node's resourceVersion before and after the write.
// It counts until the cache shows that write, or a later change of the node.
type pendingTaint struct {
	zone, stamp       string
	rvBefore, rvAfter string
}

func newBrake(f *failover, cfg Config) *brake {
	return &brake{f: f, perZone: cfg.FailoverMaxPerZone, maxUnhealthy: cfg.FailoverMaxUnhealthy,
		massOutage: cfg.FailoverMassOutage, pending: map[string]pendingTaint{}, held: map[string]string{}}
}

// maxUnhealthy is how many of total edge nodes v allows out of service: a
// count, or a percentage of total rounded up (so a small cluster may still
// fail over one node).
func maxUnhealthy(v intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, total, true)
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a count or a percentage such as 10%%, got %q: %w", v.String(), err)
	case n < 0:
		return 0, fmt.Errorf("must not be negative, got %s", v.String())
	case v.Type == intstr.String && n > total:
		return 0, fmt.Errorf("a percentage must be at most 100%%, got %s", v.String())
	}
	return n, nil
}

// check returns the limit that holds n, in zone, with a note that says why;
// "" when the failover may taint it.
func (b *brake) check(n *corev1.Node, zoneName string) (limit, note string, err error) {
	d := b.f.decider
	nodes, err := d.caches.Nodes.List(labels.Everything())
	if err != nil {
		return "", "", fmt.Errorf("list nodes from cache: %w", err)
	}
	var edge, unknown, zoneSize int
	out := map[string]string{} // out of service by the failover, other than n: node → zone
	cached := make(map[string]*corev1.Node, len(nodes))
	for _, m := range nodes {
		cached[m.Name] = m
		z := m.Labels[d.zoneLabel]
		if z == "" {
			continue
		}
		edge++
		if z == zoneName {
			zoneSize++
		}
		if c := readyCondition(m.Status.Conditions); c != nil && c.Status == corev1.ConditionUnknown {
			unknown++
		}
		if _, ours := m.Annotations[outOfServiceAnnotation]; ours && hasOutOfService(m) && m.Name != n.Name {
			// A node's own kubelet credential can mark and taint its
			// Node: only a node its zone does not vouch for takes a
			// place, so a stolen box cannot spend its zone's budget.
			j, err := d.judgement(m)
			if err != nil {
				return "", "", fmt.Errorf("judge node %s: %w", m.Name, err)
			}
			if j.state != zone.Healthy {
				out[m.Name] = z
			}
		}
	}
	b.mu.Lock()
	for name, p := range b.pending {
		m, ok := cached[name]
		switch {
		case !ok, m.Annotations[outOfServiceAnnotation] == p.stamp,
			m.ResourceVersion != p.rvBefore && m.ResourceVersion != p.rvAfter:
			// Gone, or the cache shows the write (counted above), or a
			// later change of the node (the cache knows better).
			delete(b.pending, name)
		case name != n.Name:
			out[name] = p.zone
		}
	}
	b.mu.Unlock()

	if edge > 0 && float64(unknown) >= b.massOutage*float64(edge) {
		return brakeMassOutage, fmt.Sprintf("the cloud sees %d of %d edge nodes Unknown, at least --failover-mass-outage-threshold (%g): a mass outage, not dead machines",
			unknown, edge, b.massOutage), nil
	}
	inZone := 0
	for _, z := range out {
		if z == zoneName {
			inZone++
		}
	}
	if zoneLimit := min(b.perZone, (zoneSize-1)/2); inZone >= zoneLimit {
		return brakeZone, fmt.Sprintf("zone %s has %d node(s) out of service already; at most %d of its %d nodes may be (--failover-max-per-zone %d, and never a majority)",
			zoneName, inZone, max(zoneLimit, 0), zoneSize, b.perZone), nil
	}
	limitAll, err := maxUnhealthy(b.maxUnhealthy, edge)
	if err != nil {
		return "", "", fmt.Errorf("--failover-max-unhealthy: %w", err)
	}
	if len(out) >= limitAll {
		return brakeCluster, fmt.Sprintf("%d of the cluster's %d edge nodes are out of service already; --failover-max-unhealthy (%s) allows %d",
			len(out), edge, b.maxUnhealthy.String(), limitAll), nil
	}
	return "", "", nil
}

// hold records that the brake holds n by limit, and reports whether that is
// news: the first time in this stretch, or under another limit.
func (b *brake) hold(node, limit string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, was := b.held[node]
	b.held[node] = limit
	b.f.metrics.failoverHeldNodes.Set(float64(len(b.held)))
	if was && prev == limit {
		return false
	}
	b.f.metrics.failoverHeld.WithLabelValues(limit).Inc()
	return true
}

// release forgets that the brake held node: it was tainted, came back, or is
// gone.
func (b *brake) release(node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, node)
	b.f.metrics.failoverHeldNodes.Set(float64(len(b.held)))
}

// reset forgets every node held and every pending taint, when this replica
// stops leading the repair loop.
func (b *brake) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.held)
	clear(b.pending)
	b.f.metrics.failoverHeldNodes.Set(0)
}

// tainted counts node, in zone, as out of service until the cache shows the
// write that tainted it (stamp, the node's resourceVersion before and after);
// untainted stops counting it.
func (b *brake) tainted(node, zone string, taint bool, stamp, rvBefore, rvAfter string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if taint {
		b.pending[node] = pendingTaint{zone: zone, stamp: stamp, rvBefore: rvBefore, rvAfter: rvAfter}
	} else {
		delete(b.pending, node)
	}
}
