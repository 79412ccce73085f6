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
	// ReasonUnsigned: the verdict carries no signature.
	ReasonUnsigned Reason = "unsigned"
	// ReasonSignerNotMember: the verdict's signer is no node of the
	// verdict's zone.
	ReasonSignerNotMember Reason = "signer-not-member"
	// ReasonSignerNoKey: the signer's Node registers no valid node key.
	ReasonSignerNoKey Reason = "signer-no-key"
	// ReasonBadSignature: the signature does not verify under the signer's
	// registered key, for this node.
	ReasonBadSignature Reason = "bad-signature"
	// ReasonNoZoneLease: the zone has no zone Lease the webhook honoured.
	ReasonNoZoneLease Reason = "no-zone-lease"
	// ReasonSignerNotLeader: the signer neither holds the zone Lease nor
	// is an earlier leader the holder vouches for, for verdicts it decided
	// up to the term the holder names.
	ReasonSignerNotLeader Reason = "signer-not-leader"
	// ReasonTermAheadOfLease: the verdict claims a term above the zone
	// Lease's.
	ReasonTermAheadOfLease Reason = "term-ahead-of-lease"
	// ReasonLeaderMismatch: a verdict of the Lease's own term names another
	// leader than the Lease holder.
	ReasonLeaderMismatch Reason = "leader-mismatch"
	// ReasonZoneLeaseFresh: vouched, the zone's leader renewed its Lease less
	// than the Lease's own leaseDurationSeconds (at most
	// --max-zone-lease-duration) ago, by the webhook's clock.
	ReasonZoneLeaseFresh Reason = "zone-lease-fresh"
	// ReasonZoneNotCutOff: the zone Lease is stale but a member renewed its
	// kubelet Lease after it went stale, so the cloud can reach the zone
	// and the zone's quorum is what is missing.
	ReasonZoneNotCutOff Reason = "zone-lease-stale"
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
// and what it observed of them. It is safe for concurrent use.
type Decider struct {
	caches              Caches
	evidence            *evidence
	zoneLabel           string
	maxLeaseDuration    time.Duration
	maxCutoffProtection time.Duration
	clock               clock.PassiveClock
}

// NewDecider returns a Decider reading caches, which follows the events of
// inf (the informers behind caches) to time what it trusts by its own clock.
// Register it before the informers start, or their first list counts as
// news. cfg.Clock may be nil for the real clock; its refusal counters go to
// cfg.Registerer (a private registry when nil).
func NewDecider(cfg Config, caches Caches, inf Informers) (*Decider, error) {
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return newDecider(cfg, caches, inf, m)
}

// newDecider is NewDecider with the webhook's own metrics.
func newDecider(cfg Config, caches Caches, inf Informers, m *metrics) (*Decider, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	d := &Decider{
		caches:              caches,
		evidence:            newEvidence(cfg, caches.Nodes, m),
		zoneLabel:           cfg.ZoneLabel,
		maxLeaseDuration:    cfg.MaxZoneLeaseDuration,
		maxCutoffProtection: cfg.MaxCutoffProtection,
		clock:               cfg.Clock,
	}
	if err := d.evidence.follow(inf); err != nil {
		return nil, err
	}
	return d, nil
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
//
// A verdict counts only if the zone signed it: its signer is a member of the
// node's zone whose key is registered on its own Node, and either holds the
// zone Lease under a term no lower than the verdict's, or is the earlier
// leader that decided the verdict and whom the holder's signed Lease vouches
// for up to the verdict's term.
// Time is the webhook's own: a Lease renewal counts from when the webhook saw
// it at the latest, however late its renewTime.
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
	valid, reason, err := d.signedBy(node.Name, raw, &verdict)
	if err != nil {
		return dec, err
	}
	if reason != "" {
		dec.Reason = reason
		d.evidence.refuse(node.Name, raw, reason)
		return dec, nil
	}

	now := d.clock.Now()
	renewed := valid.at()
	staleAt := renewed.Add(min(time.Duration(valid.DurationSeconds)*time.Second, d.maxLeaseDuration))
	if now.Before(staleAt) {
		dec.Vouched, dec.Reason = true, ReasonZoneLeaseFresh
		return dec, nil
	}

	// The zone's leader is silent. That is either the whole zone behind a
	// broken link (keep trusting its last verdicts, for a while) or a zone the
	// cloud still reaches whose quorum is gone (trust nothing). The evidence:
	// a member whose kubelet renewed its Lease once the zone Lease was stale
	// reaches the cloud. No flag has to match the controller manager's
	// grace period: the zone Lease is renewed every few seconds, kubelets
	// every 10 s, so a zone cut off as a whole is known as such the moment its
	// Lease goes stale. A node that joined the zone after the zone's last
	// renewal is not one of the members that Lease spoke for, and is not
	// asked.
	members, err := d.caches.Nodes.List(labels.SelectorFromSet(labels.Set{d.zoneLabel: verdict.Zone}))
	if err != nil {
		return dec, fmt.Errorf("list nodes of zone %s from cache: %w", verdict.Zone, err)
	}
	newest := renewed
	for _, m := range members {
		if d.evidence.memberSince(m.Name, verdict.Zone).After(renewed) {
			continue
		}
		l, err := d.lease(d.caches.NodeLeases, m.Name)
		if err != nil {
			return dec, err
		}
		t := d.evidence.kubeletRenewed(l)
		if !t.Before(staleAt) {
			dec.Reason = ReasonZoneNotCutOff
			return dec, nil
		}
		if t.After(newest) {
			newest = t
		}
	}
	if now.Sub(newest) < d.maxCutoffProtection {
		dec.Vouched, dec.Reason = true, ReasonZoneCutOff
	} else {
		dec.Reason = ReasonCutOffExpired
	}
	return dec, nil
}

// signedBy checks that the zone signed verdict (read from raw on the node
// named node) and returns the zone Lease claim that vouches for its signer,
// or why there is none.
func (d *Decider) signedBy(node, raw string, verdict *zone.Annotation) (*claim, Reason, error) {
	if r := d.evidence.verifyVerdict(node, raw, verdict); r != "" {
		return nil, r, nil
	}
	name := zone.LeaseName(verdict.Zone)
	l, err := d.lease(d.caches.ZoneLeases, name)
	if err != nil {
		return nil, "", err
	}
	valid := d.evidence.zoneClaim(name, l)
	switch {
	case valid == nil:
		return nil, ReasonNoZoneLease, nil
	case verdict.Term > valid.Term:
		return nil, ReasonTermAheadOfLease, nil
	case verdict.Signer == valid.Holder:
		if verdict.Term == valid.Term && verdict.Leader != valid.Holder {
			return nil, ReasonLeaderMismatch, nil
		}
		return valid, "", nil
	}
	// An earlier leader's verdict, signed by the leader that decided it,
	// stands while the holder vouches for that leader up to its term.
	if t, ok := valid.endorses[verdict.Signer]; ok && verdict.Leader == verdict.Signer && verdict.Term <= t {
		return valid, "", nil
	}
	return nil, ReasonSignerNotLeader, nil
}

// defaultKubeletRenewInterval is how often a kubelet renews a Lease that names
// no duration: a quarter of the kubelet's default 40 s.
const defaultKubeletRenewInterval = 10 * time.Second

// kubeletSilent reports whether the named node's kubelet missed a renewal of
// its Lease by the webhook's clock: none for one and a half renew intervals (a
// kubelet renews every quarter of leaseDurationSeconds), or no Lease at all.
func (d *Decider) kubeletSilent(node string) (bool, error) {
	l, err := d.lease(d.caches.NodeLeases, node)
	if err != nil || l == nil {
		return l == nil && err == nil, err
	}
	interval := leaseDuration(l) / 4
	if interval <= 0 {
		interval = defaultKubeletRenewInterval
	}
	return d.clock.Since(d.evidence.kubeletRenewed(l)) > interval*3/2, nil
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
