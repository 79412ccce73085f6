package admission

import (
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/skew"
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

// Reasons, in the order Decide checks them. Up to ReasonSuperseded they say
// why an annotation is not honoured; ReasonNotHealthy and the rest are about
// the verdict honoured.
const (
	ReasonNodeNotFound Reason = "node-not-found"
	ReasonNoVerdict    Reason = "no-verdict"
	ReasonBadVerdict   Reason = "bad-verdict"
	// ReasonNewerFormat: the verdict is in a format of a newer release
	// than this webhook reads; its agents were upgraded before it, against
	// the skew policy (docs/operating.md, "Upgrades").
	ReasonNewerFormat Reason = "newer-format"
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
	// ReasonSignerNotLeader: the signer does not hold the zone Lease, and
	// the holder does not vouch for this verdict.
	ReasonSignerNotLeader Reason = "signer-not-leader"
	// ReasonTermAheadOfLease: the verdict claims to be signed under a term
	// above the zone Lease's.
	ReasonTermAheadOfLease Reason = "term-ahead-of-lease"
	// ReasonLeaderMismatch: a verdict of the Lease's own term names another
	// leader than the Lease holder.
	ReasonLeaderMismatch Reason = "leader-mismatch"
	// ReasonSuperseded: the zone signed the verdict, but it is older (by
	// signing term, then decision time) than a verdict the webhook already
	// honoured for the node and which still stands: a replay.
	ReasonSuperseded Reason = "superseded"
	// ReasonNotHealthy: the verdict honoured says unhealthy or unknown.
	ReasonNotHealthy Reason = "not-healthy"
	// ReasonNoQuorumEvidence: the zone reaches the cloud but the cloud
	// cannot hear from the node's kubelet, and no fresh evidence signed by
	// a majority of the node's peers says they reach it (a quiet zone
	// Lease renewal carries none: its leader renews busily, with it, as
	// soon as it learns the node needs it).
	ReasonNoQuorumEvidence Reason = "no-quorum-evidence"
	// ReasonZoneLeaseFresh: vouched, the zone's leader renewed its Lease less
	// than the Lease's own leaseDurationSeconds (at most
	// --max-zone-lease-duration) ago, by the webhook's clock, and if the
	// cloud cannot hear from the node, a majority of its peers attest that
	// they reach it.
	ReasonZoneLeaseFresh Reason = "zone-lease-fresh"
	// ReasonZoneNotCutOff: the zone Lease is stale but a member renewed its
	// kubelet Lease after it went stale, so the cloud can reach the zone
	// and the zone's quorum is what is missing.
	ReasonZoneNotCutOff Reason = "zone-lease-stale"
	// ReasonZoneCutOff: vouched, the whole zone lost the cloud less than
	// MaxCutoffProtection ago.
	ReasonZoneCutOff Reason = "zone-cut-off"
	// ReasonSilentBeforeCut: the zone is cut off as a whole, but the cloud
	// had stopped hearing the node's kubelet before the zone went dark, and
	// no majority of its peers attested then that they reach it: a node
	// that died before the cut, whatever its leader's last verdict says.
	ReasonSilentBeforeCut Reason = "silent-before-cut"
	// ReasonDownBeforeCut: the zone is cut off as a whole, and before it
	// went dark a majority of the node's peers had attested that every
	// probe of theirs failed on it, after the cloud last heard its
	// kubelet: a node that died before the cut, whatever any later word
	// of its leader's says.
	ReasonDownBeforeCut Reason = "down-before-cut"
	// ReasonCutOffExpired: the zone has been cut off for longer than
	// MaxCutoffProtection; its last verdicts are too old to keep trusting.
	ReasonCutOffExpired Reason = "cut-off-expired"
)

// Decision is the Decider's answer for one node.
type Decision struct {
	Vouched bool
	Reason  Reason
	// Zone is the zone named by the verdict judged, if there was one.
	Zone string
	// Refused says why the node's own annotation was not honoured when the
	// node was judged by the last verdict the zone signed for it instead;
	// empty when the annotation itself was judged.
	Refused Reason
}

// because is why, for logs and Events: the reason, and the refusal of the
// node's annotation when the node was judged by its last signed verdict.
func (d Decision) because() string {
	if d.Refused == "" {
		return string(d.Reason)
	}
	return fmt.Sprintf("%s, by its last signed verdict; its annotation was refused: %s", d.Reason, d.Refused)
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
	cachesSynced        func() bool

	syncMu    sync.Mutex
	judgedAll bool
	// memorySynced and seed are the webhook's memory (see remember).
	memorySynced func() bool
	seed         func()
}

// remember makes the Decider read what the webhook's memory keeps before it
// judges every Node: synced tells when its cache holds it, seed hands it to
// the Decider. Call before the informers start.
func (d *Decider) remember(synced func() bool, seed func()) {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	d.memorySynced, d.seed = synced, seed
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
	// Verdicts are judged as they arrive, not only when a review asks: the
	// verdict a forger replaces may never have been asked about, and it is
	// the one the node is then judged by. The replaced one is judged again
	// first: when it arrived, the zone Lease that vouches for it may not
	// have been cached yet.
	reg, err := inf.Nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				d.judge(n)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && (o.Annotations[zone.AnnotationKey] != n.Annotations[zone.AnnotationKey] ||
				o.Labels[d.zoneLabel] != n.Labels[d.zoneLabel]) {
				d.judge(o)
				d.judge(n)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("follow node events: %w", err)
	}
	synced := []func() bool{reg.HasSynced, inf.Nodes.HasSynced, inf.NodeLeases.HasSynced, inf.ZoneLeases.HasSynced}
	d.cachesSynced = func() bool {
		for _, f := range synced {
			if !f() {
				return false
			}
		}
		return true
	}
	return d, nil
}

// HasSynced reports whether the Decider has judged every cached Node with
// every cache synced, after reading the webhook's memory; the first call that
// finds the caches synced does so.
// Before that, a verdict forged over a signed one the Decider never judged
// would go unnoticed: the webhook answers nothing until it is true.
func (d *Decider) HasSynced() bool {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	if d.judgedAll {
		return true
	}
	if !d.cachesSynced() || d.memorySynced != nil && !d.memorySynced() {
		return false
	}
	if d.seed != nil {
		d.seed()
	}
	nodes, err := d.caches.Nodes.List(labels.Everything())
	if err != nil {
		return false
	}
	for _, n := range nodes {
		d.judge(n)
	}
	d.judgedAll = true
	return true
}

// judge decides for n only to keep its verdict if the zone signed it (and
// count it if not).
func (d *Decider) judge(n *corev1.Node) {
	// An error is a cache that cannot be read; the next event or review
	// judges again.
	_, _ = d.Decide(n)
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
// node's zone whose key is registered on its own Node, it was signed under a
// term no higher than the zone Lease's, and either its signer holds the zone
// Lease or the holder's signed Lease names this very verdict among those it
// vouches for. Of two verdicts the zone signed, the one signed under the
// newer term counts (see keptVerdict.newerOrSame).
// Time is the webhook's own: a Lease renewal counts from when the webhook saw
// it at the latest, however late its renewTime.
//
// Signatures are checked before anything the verdict says is read: any agent
// token may write or remove the annotation on any Node, so a verdict that is
// unsigned, forged, removed, or older than one the zone already signed for
// the node (a replay) is refused and counted, and the node is judged by the
// last verdict the Decider honoured for it, as long as that one still stands.
// Otherwise a stolen token of one zone could end the protection of another
// zone's nodes while that zone is cut off and its leader cannot write back.
func (d *Decider) Decide(node *corev1.Node) (Decision, error) {
	dec, _, _, err := d.decide(node)
	return dec, err
}

// decide is Decide that also returns the verdict the node was judged by and
// the zone Lease claim that vouches for it; both nil when no verdict was
// honoured.
func (d *Decider) decide(node *corev1.Node) (Decision, *keptVerdict, *claim, error) {
	raw, present := node.Annotations[zone.AnnotationKey]
	var (
		cur     *keptVerdict
		valid   *claim
		refused = ReasonNoVerdict
	)
	if present {
		a, err := zone.ParseAnnotation(raw)
		switch {
		case errors.Is(err, skew.ErrTooNew):
			refused = ReasonNewerFormat
		case err != nil:
			refused = ReasonBadVerdict
		default:
			cur = &keptVerdict{raw: raw, verdict: a}
			if valid, refused, err = d.honours(node, cur); err != nil {
				return Decision{Zone: a.Zone}, nil, nil, err
			}
		}
	}
	seen := d.evidence.keptVerdict(node.Name)
	prev := seen
	if prev != nil && present && prev.raw == raw {
		prev = nil // the same annotation, judged above
	}
	if refused == "" && prev != nil && !cur.newerOrSame(prev) {
		refused = ReasonSuperseded
	}
	judge, by := cur, valid
	if refused != "" {
		var prevClaim *claim
		if prev != nil {
			var why Reason
			var err error
			if prevClaim, why, err = d.honours(node, prev); err != nil {
				return Decision{Zone: prev.verdict.Zone}, nil, nil, err
			}
			if why != "" {
				prev = nil // it no longer stands either
			}
		}
		switch {
		case prev == nil && refused == ReasonSuperseded:
			refused = "" // what it was older than no longer stands
		case prev == nil:
			dec := Decision{Reason: refused}
			if cur != nil {
				dec.Zone = cur.verdict.Zone
			}
			if present {
				d.evidence.refuse(node.Name, raw, refused)
			}
			return dec, nil, nil, nil
		default:
			d.evidence.refuse(node.Name, raw, refused)
			judge, by = prev, prevClaim
		}
	}
	if judge == cur {
		d.evidence.keep(node.Name, cur, seen)
	}
	dec := Decision{Zone: judge.verdict.Zone, Refused: refused}
	if judge.verdict.State != zone.Healthy {
		dec.Reason = ReasonNotHealthy
		return dec, judge, by, nil
	}
	dec, err := d.fresh(node.Name, dec, by)
	return dec, judge, by, err
}

// staleAt is when the zone Lease renewal valid stops vouching for its zone's
// nodes by itself, by the webhook's clock.
func (d *Decider) staleAt(valid *claim) time.Time {
	return valid.at().Add(d.leaseTerm(valid))
}

// leaseTerm is how long a zone Lease renewal, and an attestation of the
// quorum's evidence, counts: the Lease's own duration, at most
// --max-zone-lease-duration. A quiet renewal lasts longer, but no word that
// peers reach a node counts under it (fresh, deadWhenDark).
func (d *Decider) leaseTerm(valid *claim) time.Duration {
	return min(time.Duration(valid.DurationSeconds)*time.Second, d.maxLeaseDuration)
}

// judgement is what a node's zone says of it now, for acting on a node the
// zone confirms dead.
type judgement struct {
	// state is what the verdict the node is judged by says: its own
	// annotation if the zone signed it and it stands, else the last one the
	// zone signed, as for protection (a forgery or replay changes nothing,
	// neither way); empty when there is none.
	state zone.State
	// leaderReachesCloud: the zone Lease that vouches for that verdict is
	// fresh by the webhook's clock, and the zone is not dark, so the zone's
	// leader reaches the cloud.
	leaderReachesCloud bool
	// evidenceTerm is how long the quorum's attestations count: the
	// Lease's duration.
	evidenceTerm time.Duration
}

// judgement returns the zone's judgement of node.
func (d *Decider) judgement(node *corev1.Node) (judgement, error) {
	_, v, valid, err := d.decide(node)
	if err != nil || v == nil {
		return judgement{}, err
	}
	z, err := d.darknessFor(node.Name, v.verdict.Zone, valid, d.clock.Now())
	if err != nil {
		return judgement{}, err
	}
	return judgement{state: v.verdict.State, leaderReachesCloud: !z.stale && !z.dark,
		evidenceTerm: d.leaseTerm(valid)}, nil
}

// honours checks that v, found on node, is a verdict of node's zone that the
// zone signed, and returns the zone Lease claim that vouches for its signer,
// or why there is none.
func (d *Decider) honours(node *corev1.Node, v *keptVerdict) (*claim, Reason, error) {
	// A verdict is only as good as the zone that wrote it: a node whose label
	// no longer names that zone is judged by nobody.
	if v.verdict.Zone == "" || node.Labels[d.zoneLabel] != v.verdict.Zone {
		return nil, ReasonZoneMismatch, nil
	}
	return d.signedBy(node.Name, v.raw, &v.verdict)
}

// fresh decides whether the zone that signed a healthy verdict for node,
// vouched for by valid, still speaks for it: its leader renewed the zone Lease
// lately and, if the cloud cannot hear from node itself, a majority of node's
// peers attest that they reach it; or the whole zone was cut off from the
// cloud not too long ago.
func (d *Decider) fresh(node string, dec Decision, valid *claim) (Decision, error) {
	now := d.clock.Now()
	z, err := d.darknessFor(node, dec.Zone, valid, now)
	if err != nil {
		return dec, err
	}
	switch {
	case !z.stale && !z.dark:
		// The zone reaches the cloud, so its word on a node the cloud
		// cannot hear from is the word of a majority of that node's
		// peers, each signed with its own key: no one member, the
		// leader included, can keep a dead node protected. A node whose
		// kubelet the cloud still hears has nothing at stake. A quiet
		// renewal says no member needed that word when it was made, so
		// it vouches for no node the cloud cannot hear: its leader
		// renews busily, with the word, as soon as it learns of one.
		silent, err := d.kubeletSilent(node)
		if err != nil {
			return dec, err
		}
		if silent && (valid.Quiet() || !d.evidence.covered(node, dec.Zone, d.leaseTerm(valid))) {
			dec.Reason = ReasonNoQuorumEvidence
			return dec, nil
		}
		dec.Vouched, dec.Reason = true, ReasonZoneLeaseFresh
		return dec, nil
	case !z.dark:
		// The zone's leader is silent, but the cloud still hears one of
		// its members: the zone's quorum is what is missing.
		dec.Reason = ReasonZoneNotCutOff
		return dec, nil
	case z.reconnecting:
		heard, err := d.heardSinceStale(node, valid)
		if err != nil || heard {
			dec.Reason = ReasonZoneNotCutOff
			return dec, err
		}
	}
	if now.Sub(z.at) >= d.maxCutoffProtection {
		dec.Reason = ReasonCutOffExpired
		return dec, nil
	}
	// The zone's last word stands for the nodes the cloud saw alive when
	// the zone went dark, not for one that had died before: its leader's
	// "healthy" for such a node buys nothing.
	why, err := d.deadWhenDark(node, dec.Zone, valid, z.ref)
	if err != nil {
		return dec, err
	}
	if why != "" {
		dec.Reason = why
		return dec, nil
	}
	dec.Vouched, dec.Reason = true, ReasonZoneCutOff
	return dec, nil
}

// heardSinceStale tells whether node's kubelet renewed its Lease once the
// zone Lease renewal valid had gone stale.
func (d *Decider) heardSinceStale(node string, valid *claim) (bool, error) {
	l, err := d.lease(d.caches.NodeLeases, node)
	if err != nil || l == nil {
		return false, err
	}
	return !d.evidence.kubeletRenewed(l).Before(d.staleAt(valid)), nil
}

// zoneDarkness is what the webhook makes of a zone's silence.
type zoneDarkness struct {
	// stale: the zone Lease renewal honoured is past its duration.
	stale bool
	// dark: the zone is cut off from the cloud as a whole, since at (the
	// newest of the last renewal and its members' kubelet renewals); ref
	// is the webhook's own time for the same instant (when it saw the
	// last of them), against which it asks which members were alive.
	dark    bool
	at, ref time.Time
	// reconnecting: the zone is dark as far as the nodes it protected
	// are concerned, but the cloud hears some of its members again
	// (Decider.reconnecting); a node among them is judged as in a zone
	// without a leader.
	reconnecting bool
}

// darknessFor is darkness as a decision on node needs it: a zone is not dark
// while the cloud hears node's kubelet, and under a fresh quiet renewal that
// is answered without listing the zone's nodes (the answer for most reviews).
func (d *Decider) darknessFor(node, zoneName string, valid *claim, now time.Time) (zoneDarkness, error) {
	if valid.Quiet() && now.Before(d.staleAt(valid)) {
		l, err := d.lease(d.caches.NodeLeases, node)
		if err != nil {
			return zoneDarkness{}, err
		}
		if l != nil && now.Sub(d.evidence.kubeletSeen(l)) <= quietSilence(l) {
			return zoneDarkness{}, nil
		}
	}
	return d.darkness(zoneName, valid, now, nil)
}

// quietSilence is how long a member's kubelet may be silent before a zone
// renewed quietly counts it silent: six fifths of its renew interval.
func quietSilence(l *coordinationv1.Lease) time.Duration { return kubeletInterval(l) * 6 / 5 }

// darkness tells whether zoneName, whose last honoured zone Lease renewal is
// valid, is cut off from the cloud as a whole at now; members are its nodes
// when the caller has them (nil: listed from the node cache). A busy renewal
// says the zone reaches the cloud until it goes stale; then the zone is dark
// unless the cloud still hears one of its members (zoneDark). A quiet
// renewal says that its holder renews at once when a member needs the
// cloud, which every member of a zone that loses its link does: a zone whose
// every kubelet fell silent after it, with no renewal since, is dark before
// the renewal goes stale (quietDark).
func (d *Decider) darkness(zoneName string, valid *claim, now time.Time, members []*corev1.Node) (zoneDarkness, error) {
	if staleAt := d.staleAt(valid); now.Before(staleAt) {
		if !valid.Quiet() {
			return zoneDarkness{}, nil
		}
		return d.quietDark(zoneName, valid, now, members)
	}
	c, err := d.zoneDark(zoneName, valid)
	if err != nil {
		return zoneDarkness{stale: true}, err
	}
	z := zoneDarkness{stale: true, dark: true, at: c.dark, ref: valid.seen}
	if !c.heard.IsZero() {
		if !d.reconnecting(zoneName, valid, c, now) {
			return zoneDarkness{stale: true}, nil
		}
		z.reconnecting = true
	}
	return z, nil
}

// reconnecting tells whether the zone of the stale renewal valid, heard again
// as c says, is coming back from a cut: it was dark for longer than one and
// a half kubelet renew intervals before the cloud heard one of its members
// (a zone whose leader alone went silent is heard within one), and it was
// heard again less than two renew intervals ago, still inside the cut's
// protection. Then its members come back one by one while the controller
// manager still taints those whose kubelets have not renewed yet, and the
// leader's renewal that makes the zone fresh again may be a renew interval
// behind: the nodes the cut protected stay protected until then, never longer
// than the cut itself would have kept them. A thief's kubelet renewal buys
// nothing: silence would have kept the zone dark longer.
func (d *Decider) reconnecting(zoneName string, valid *claim, c zoneContact, now time.Time) bool {
	heard := d.evidence.reheard(zone.LeaseName(zoneName), valid, c.heard)
	return heard.Sub(d.staleAt(valid)) > c.interval*3/2 &&
		now.Before(heard.Add(2*c.interval)) &&
		now.Sub(c.dark) < d.maxCutoffProtection
}

// quietDark tells whether the zone of the fresh quiet renewal valid is dark
// at now: every member it spoke for has a silent kubelet (no renewal for
// six fifths of its renew interval: a zone of several nodes always has one
// renewing within an interval, so the zone as a whole is silent little more
// than an interval after its link went), and the renewal was made before the
// last of them fell silent. A quiet renewal made after they all had speaks
// for a leader that reaches the cloud and will renew busily as soon as it
// learns why. A zone whose members the cloud hears from is not dark, and
// its nodes the cloud cannot hear need their peers' word: a quiet renewal
// carries none.
func (d *Decider) quietDark(zoneName string, valid *claim, now time.Time, members []*corev1.Node) (zoneDarkness, error) {
	if members == nil {
		var err error
		if members, err = d.caches.Nodes.List(labels.SelectorFromSet(labels.Set{d.zoneLabel: zoneName})); err != nil {
			return zoneDarkness{}, fmt.Errorf("list nodes of zone %s from cache: %w", zoneName, err)
		}
	}
	renewed := valid.at()
	z := zoneDarkness{at: renewed, ref: valid.seen}
	var lastSeen, silentSince time.Time
	counted := 0
	for _, m := range members {
		if d.evidence.memberSince(m.Name, zoneName).After(renewed) {
			continue
		}
		l, err := d.lease(d.caches.NodeLeases, m.Name)
		if err != nil {
			return zoneDarkness{}, err
		}
		seen := d.evidence.kubeletSeen(l)
		silence := quietSilence(l)
		if now.Sub(seen) <= silence {
			return zoneDarkness{}, nil // heard
		}
		counted++
		if seen.After(lastSeen) {
			lastSeen, silentSince = seen, seen.Add(silence)
		}
		if t := d.evidence.kubeletRenewed(l); t.After(z.at) {
			z.at = t
		}
	}
	if counted == 0 || !valid.seen.Before(silentSince) {
		return zoneDarkness{}, nil
	}
	if lastSeen.After(z.ref) {
		z.ref = lastSeen
	}
	z.dark = true
	return z, nil
}

// zoneContact is what the cloud heard from a zone's members since its last
// honoured zone Lease renewal went stale.
type zoneContact struct {
	// heard is the earliest kubelet renewal, at or after the renewal went
	// stale, among the members the cache shows renewed since; zero if none
	// did (the zone is dark).
	heard time.Time
	// dark is when the zone went dark, as far as the members not heard
	// since tell: the newest of the renewal and their kubelet renewals.
	dark time.Time
	// interval is the longest kubelet renew interval among the members.
	interval time.Duration
}

// zoneDark tells what the cloud heard from zoneName's members since its last
// honoured zone Lease renewal valid went stale. A member heard since (a
// kubelet renewed its Lease once the zone Lease was stale) means the zone's
// quorum is what is missing, unless the zone is coming back from a cut
// (reconnecting); a zone heard from by none went dark at the newest of that
// renewal and its members' kubelet renewals. No flag has to match the
// controller manager's grace period: the zone Lease is renewed every few
// seconds, kubelets every 10 s, so a zone cut off as a whole is known as such
// the moment its Lease goes stale. A node that joined the zone after the
// zone's last renewal is not one of the members that Lease spoke for, and is
// not asked.
func (d *Decider) zoneDark(zoneName string, valid *claim) (zoneContact, error) {
	members, err := d.caches.Nodes.List(labels.SelectorFromSet(labels.Set{d.zoneLabel: zoneName}))
	if err != nil {
		return zoneContact{}, fmt.Errorf("list nodes of zone %s from cache: %w", zoneName, err)
	}
	renewed, staleAt := valid.at(), d.staleAt(valid)
	c := zoneContact{dark: renewed, interval: defaultKubeletRenewInterval}
	for _, m := range members {
		if d.evidence.memberSince(m.Name, zoneName).After(renewed) {
			continue
		}
		l, err := d.lease(d.caches.NodeLeases, m.Name)
		if err != nil {
			return zoneContact{}, err
		}
		if l != nil {
			c.interval = max(c.interval, kubeletInterval(l))
		}
		t := d.evidence.kubeletRenewed(l)
		switch {
		case !t.Before(staleAt):
			if c.heard.IsZero() || t.Before(c.heard) {
				c.heard = t
			}
		case t.After(c.dark):
			c.dark = t
		}
	}
	return c, nil
}

// deadWhenDark says why the cloud cannot count node alive when its zone went
// dark with valid, the zone Lease's last honoured renewal, or "" if it can.
// It cannot when, before then, a majority of node's peers had attested that
// it was down since its kubelet last renewed its Lease (a thief with one
// member's key, the leader's included, cannot take that back). Otherwise it
// can when the webhook had seen its kubelet renew no more than one and a half
// renew intervals before it saw that renewal (both by the webhook's clock, so
// no two nodes' clocks are compared), or a majority of its peers'
// attestations covered it then. A webhook that started during the cut saw
// both renewals at once, and of the attestations only those the zone Lease
// carried last.
func (d *Decider) deadWhenDark(node, zoneName string, valid *claim, dark time.Time) (Reason, error) {
	l, err := d.lease(d.caches.NodeLeases, node)
	if err != nil {
		return "", err
	}
	if d.evidence.downWhenDark(node, zoneName, valid, d.leaseTerm(valid), d.evidence.kubeletRenewed(l)) {
		return ReasonDownBeforeCut, nil
	}
	if l != nil && !d.evidence.kubeletSeen(l).Before(dark.Add(-kubeletInterval(l)*3/2)) {
		return "", nil
	}
	// Under a quiet renewal no member needed its peers' word, and none
	// stands for a node the cloud had stopped hearing before the cut.
	if !valid.Quiet() && d.evidence.coveredAt(node, zoneName, d.leaseTerm(valid), dark) {
		return "", nil
	}
	return ReasonSilentBeforeCut, nil
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
	case verdict.SigningTerm() > valid.Term:
		return nil, ReasonTermAheadOfLease, nil
	case verdict.Signer == valid.Holder:
		if verdict.Term == valid.Term && verdict.Leader != valid.Holder {
			return nil, ReasonLeaderMismatch, nil
		}
		return valid, "", nil
	}
	// Another member's verdict stands while the holder vouches for that
	// very verdict.
	if valid.endorses.Vouches(node, verdict) {
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
	return d.clock.Since(d.evidence.kubeletRenewed(l)) > kubeletInterval(l)*3/2, nil
}

// kubeletInterval is how often the kubelet renews its Lease l: a quarter of
// its duration, as the kubelet sets it.
func kubeletInterval(l *coordinationv1.Lease) time.Duration {
	if interval := leaseDuration(l) / 4; interval > 0 {
		return interval
	}
	return defaultKubeletRenewInterval
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
