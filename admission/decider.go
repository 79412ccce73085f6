package admission

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/zone"
)

// Caches are the informer listers the admission path reads. Nothing on that path
// reads anything else, so an answer never waits on the apiserver.
type Caches struct {
	// Nodes are all nodes.
	Nodes corelisters.NodeLister
	// Pods are all pods; only metadata, spec.nodeName and the Ready condition
	// are needed.
	Pods corelisters.PodLister
	// NodeLeases are the kubelet Leases in NodeLeaseNamespace.
	NodeLeases coordinationlisters.LeaseNamespaceLister
	// ZoneLeases are the Leases in Config.LeaseNamespace.
	ZoneLeases coordinationlisters.LeaseNamespaceLister
}

// Reason says why the Decider did or did not vouch for a node. The values are
// stable: they appear in logs and tests.
type Reason string

// Reasons, in the order Decide checks them.
const (
	ReasonNodeNotFound Reason = "node-not-found"
	ReasonNoVerdict    Reason = "no-verdict"
	ReasonBadVerdict   Reason = "bad-verdict"
	ReasonNotHealthy   Reason = "not-healthy"
	// ReasonZoneMismatch: the verdict names another zone than the node's zone
	// label, e.g. a node moved between zones with its old verdict still on.
	ReasonZoneMismatch Reason = "zone-mismatch"
	// ReasonZoneLeaseFresh: vouched, the zone's leader renewed its Lease less
	// than the Lease's own leaseDurationSeconds ago.
	ReasonZoneLeaseFresh Reason = "zone-lease-fresh"
	// ReasonZoneNotCutOff: the zone Lease is stale but some member still
	// renews its kubelet Lease, so the cloud can reach the zone and the zone's
	// quorum is what is missing.
	ReasonZoneNotCutOff Reason = "zone-lease-stale"
	// ReasonZoneLeaseNoDuration: as ReasonZoneNotCutOff, except that the
	// zone Lease has no positive leaseDurationSeconds, so however recently
	// renewed it never counts as held. The agents always set one; a Lease
	// without it was written by something else, and a reason of its own
	// keeps that from passing for a dead quorum in the logs. A zone that
	// looks cut off is judged as with a stale Lease, under the cut-off
	// reasons below.
	ReasonZoneLeaseNoDuration Reason = "zone-lease-no-duration"
	// ReasonNoLeases: the zone looks cut off but no Lease says since when.
	ReasonNoLeases Reason = "no-leases"
	// ReasonZoneCutOff: vouched, the whole zone lost the cloud less than
	// MaxCutoffProtection ago.
	ReasonZoneCutOff Reason = "zone-cut-off"
	// ReasonCutOffExpired: the zone has been cut off for longer than
	// MaxCutoffProtection; its last verdicts are too old to keep trusting.
	ReasonCutOffExpired Reason = "cut-off-expired"
)

// Decision is the Decider's answer for one node.
type Decision struct {
	Vouched bool
	Reason  Reason
	// Zone is the zone named by the node's verdict, if it had one.
	Zone string
}

// Decider answers "does the node's zone vouch for it?" from informer caches
// alone. It is safe for concurrent use; listers are.
type Decider struct {
	caches              Caches
	zoneLabel           string
	nodeLeaseMaxAge     time.Duration
	maxCutoffProtection time.Duration
	clock               clock.PassiveClock
}

// NewDecider returns a Decider reading caches with cfg's zone label, kubelet
// Lease age and cut-off protection. cfg.Clock may be nil for the real clock.
func NewDecider(cfg Config, caches Caches) *Decider {
	var clk clock.PassiveClock = clock.RealClock{}
	if cfg.Clock != nil {
		clk = cfg.Clock
	}
	return &Decider{
		caches:              caches,
		zoneLabel:           cfg.ZoneLabel,
		nodeLeaseMaxAge:     cfg.NodeLeaseMaxAge,
		maxCutoffProtection: cfg.MaxCutoffProtection,
		clock:               clk,
	}
}

// DecideNode decides for the node of that name as the cache holds it. A node
// missing from the cache is not vouched and not an error.
func (d *Decider) DecideNode(name string) (Decision, *corev1.Node, error) {
	node, err := d.caches.Nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return Decision{Reason: ReasonNodeNotFound}, nil, nil
	}
	if err != nil {
		return Decision{}, nil, fmt.Errorf("read node %s from cache: %w", name, err)
	}
	dec, err := d.Decide(node)
	return dec, node, err
}

// Decide decides for node, which may be newer than the cache (the object of a
// Node UPDATE under review): its verdict annotation and zone label are read
// from node itself, Leases and zone members from the caches. An error means a
// cache could not be read; the decision is then "not vouched".
func (d *Decider) Decide(node *corev1.Node) (Decision, error) {
	raw, ok := node.Annotations[zone.AnnotationKey]
	if !ok {
		return Decision{Reason: ReasonNoVerdict}, nil
	}
	verdict, err := zone.ParseAnnotation(raw)
	if err != nil {
		return Decision{Reason: ReasonBadVerdict}, nil
	}
	dec := Decision{Zone: verdict.Zone}
	if verdict.State != zone.Healthy {
		dec.Reason = ReasonNotHealthy
		return dec, nil
	}
	// A verdict is only as good as the zone that wrote it: a node whose label
	// no longer names that zone is judged by nobody.
	if verdict.Zone == "" || node.Labels[d.zoneLabel] != verdict.Zone {
		dec.Reason = ReasonZoneMismatch
		return dec, nil
	}

	now := d.clock.Now()
	zoneLease, err := d.lease(d.caches.ZoneLeases, zone.LeaseName(verdict.Zone))
	if err != nil {
		return dec, err
	}
	// Standard Lease semantics: the leader's own leaseDurationSeconds says
	// how long a renewal holds.
	if leaseFresh(zoneLease, now) {
		dec.Vouched, dec.Reason = true, ReasonZoneLeaseFresh
		return dec, nil
	}
	notCutOff := ReasonZoneNotCutOff
	if zoneLease != nil && leaseDuration(zoneLease) == 0 {
		notCutOff = ReasonZoneLeaseNoDuration
	}
	zoneRenew := renewTime(zoneLease)

	// The zone's leader is silent. That is either the whole zone behind a
	// broken link (keep trusting its last verdicts, for a while) or a zone the
	// cloud still reaches whose quorum is gone (trust nothing).
	members, err := d.caches.Nodes.List(labels.SelectorFromSet(labels.Set{d.zoneLabel: verdict.Zone}))
	if err != nil {
		return dec, fmt.Errorf("list nodes of zone %s from cache: %w", verdict.Zone, err)
	}
	newest := zoneRenew
	for _, m := range members {
		l, err := d.lease(d.caches.NodeLeases, m.Name)
		if err != nil {
			return dec, err
		}
		t := renewTime(l)
		if !t.IsZero() && t.Add(d.nodeLeaseMaxAge).After(now) {
			dec.Reason = notCutOff
			return dec, nil
		}
		if t.After(newest) {
			newest = t
		}
	}
	switch {
	case newest.IsZero():
		dec.Reason = ReasonNoLeases
	case now.Sub(newest) < d.maxCutoffProtection:
		dec.Vouched, dec.Reason = true, ReasonZoneCutOff
	default:
		dec.Reason = ReasonCutOffExpired
	}
	return dec, nil
}

// lease returns the named Lease, or nil when the cache has none.
func (d *Decider) lease(l coordinationlisters.LeaseNamespaceLister, name string) (*coordinationv1.Lease, error) {
	lease, err := l.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s from cache: %w", name, err)
	}
	return lease, nil
}

// renewTime is when the Lease was last renewed, falling back to when it was
// acquired; zero when neither is set.
func renewTime(l *coordinationv1.Lease) time.Time {
	switch {
	case l == nil:
		return time.Time{}
	case l.Spec.RenewTime != nil:
		return l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		return l.Spec.AcquireTime.Time
	}
	return time.Time{}
}

// leaseDuration is the Lease's leaseDurationSeconds, or 0 when it is unset or
// not positive: such a Lease never counts as held.
func leaseDuration(l *coordinationv1.Lease) time.Duration {
	if l == nil || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds <= 0 {
		return 0
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
}

// leaseFresh reports whether l is held at now by standard Lease semantics: it
// was renewed (or, never renewed, acquired) less than its leaseDurationSeconds
// before now. A nil Lease, one never renewed nor acquired, and one without a
// positive duration are not fresh.
func leaseFresh(l *coordinationv1.Lease, now time.Time) bool {
	d, t := leaseDuration(l), renewTime(l)
	return d > 0 && !t.IsZero() && t.Add(d).After(now)
}
