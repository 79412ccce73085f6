package admission

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// Informers are the shared informers behind Caches whose events the Decider
// follows: what it trusts is timed by when the webhook saw it, not by the
// times writers put into objects.
type Informers struct {
	Nodes      cache.SharedIndexInformer
	NodeLeases cache.SharedIndexInformer
	ZoneLeases cache.SharedIndexInformer
}

// maxPendingClaims bounds zoneRecord.pending.
const maxPendingClaims = 4

// verifiedCacheSize is the least bound of the signature caches; past their
// bound they start over (see cacheLimit).
const verifiedCacheSize = 1 << 14

// cacheLimit bounds the signature caches: a few entries for every node the
// webhook knows (its verdict, a replaced one, zone Lease claims and
// attestations), never fewer than verifiedCacheSize. A fixed bound made a
// fleet of more than a few thousand edge nodes start the cache over again and
// again, every review and zone view pass checking every signature anew
// (BenchmarkZoneViewPass). Called with mu held.
func (e *evidence) cacheLimit() int { return max(verifiedCacheSize, 4*len(e.joined)) }

// Reasons a zone Lease write is not honoured: values of the reason label of
// edgequorum_admission_zone_leases_refused_total.
const (
	leaseUnsigned        = "unsigned"
	leaseZoneMismatch    = "zone-mismatch"
	leaseNoDuration      = "no-duration"
	leaseHolderNotMember = "holder-not-member"
	leaseHolderNoKey     = "holder-no-key"
	leaseBadSignature    = "bad-signature"
	leaseBadEndorsements = "bad-endorsements"
	// The members' votes that the holder leads in the claim's term
	// (zone.LeaseLeadershipAnnotation): missing in a zone that has shown
	// them, malformed, for another term or holder, or of no majority.
	leaseNoLeadership       = "no-leadership"
	leaseBadLeadership      = "bad-leadership"
	leaseLeadershipMinority = "leadership-minority"
	// leaseStaleTerm: a claim under a term below that of the honoured
	// claim, which is still fresh: a deposed leader's, or a replay.
	leaseStaleTerm = "stale-term"
	// leaseNewerFormat: the Lease is of a newer release's format than this
	// webhook reads (zone.LeaseFormatAnnotation): upgrade the webhook first.
	leaseNewerFormat = "newer-format"
)

// renewal is a Lease renewal as the webhook saw it.
type renewal struct {
	// renewed is the time the writer put into the Lease.
	renewed time.Time
	// seen is when the webhook first saw that renewal.
	seen time.Time
}

// at is when the renewal counts as made: the writer's time, but never later
// than the webhook saw it. A renewTime in the future buys nothing.
func (r renewal) at() time.Time {
	if r.seen.Before(r.renewed) {
		return r.seen
	}
	return r.renewed
}

// claim is a zone Lease renewal: what it states, its signature, when seen.
type claim struct {
	zone.LeaseClaim
	sig string
	renewal
	// endorses are the verdicts other members signed that the holder
	// vouches for; endorsed is false when the annotation does not parse.
	endorses zone.Endorsements
	endorsed bool
	// leadership is the members' votes for the holder, as written;
	// certified is set once a majority of them verified.
	leadership string
	certified  bool
	// newer is set when the Lease is of a newer release's format.
	newer bool
	// downs is the zone's downs as they stood when the claim was
	// honoured: what its members had said of dead nodes when the zone
	// went dark, if this renewal turns out to be its last.
	downs downs
}

// downs is, by node and signer, the latest time (as renewal.at counts it) a
// member of the zone attested, in an attestation checked against its key,
// that every probe of its failed on that node. It is never changed in place:
// a claim keeps the one that stood when it was honoured.
type downs map[downKey]time.Time

type downKey struct{ node, signer string }

// zoneRecord is what the webhook knows of one zone Lease.
type zoneRecord struct {
	// latest is the Lease as last seen; checked once it was verified or
	// refused for good (a holder whose Node is not cached yet is retried).
	latest  claim
	checked bool
	// counted is set once latest was counted as refused.
	counted bool
	// evidenceRaw is the evidence annotation last read.
	evidenceRaw string
	// pending are earlier renewals replaced before they could be checked
	// (their holder's Node was not cached yet), oldest first: checked in
	// order before latest, so a write that follows a valid renewal quickly
	// cannot hide it.
	pending []claim
	// valid is the newest honoured claim; a refused write leaves it in
	// force, so a forged Lease can neither extend nor cut short the
	// zone's protection.
	valid *claim
	// certified is set once a claim carrying a majority's votes was
	// honoured: from then on a claim without them is not, so a stolen
	// key cannot go back to the form that needs no one else's word.
	certified bool
	// attests are the newest attestation seen from each signer, by signer:
	// the quorum's evidence for the nodes the cloud cannot hear from.
	attests map[string]*seenAttestation
	// downs records every member's word that a node is down, whatever it
	// said after: a signer's newest attestation may be a thief's, made
	// with its stolen key to take back what the honest member said.
	downs downs
	// reheard is when the cloud first heard a member again after the
	// claim renewed at reheardOf went stale (see Decider.reconnecting).
	reheard, reheardOf time.Time
}

// seenAttestation is an attestation as the webhook saw it, with the answer of
// its signature check against the key checked, so that a review, which
// counts the zone's attestations each time, verifies none of them again. The
// answer belongs to this parsed attestation alone: a copy of its signature
// under other words is another attestation, checked anew.
type seenAttestation struct {
	zone.Attestation
	renewal
	// checkedKey is the key the signature was last checked against, ok
	// the answer; checkedGen is e.keysGen then and checkedZone the zone
	// it was checked for: while no member's key or zone changed since,
	// the answer stands without reading the signer's Node again.
	checkedKey  ed25519.PublicKey
	ok          bool
	checkedGen  uint64
	checkedZone string
}

// membership is a node's zone as the webhook saw it, and since when. Nodes in
// the first list count as members since ever.
type membership struct {
	zone  string
	since time.Time
	// key is the node key annotation as last seen.
	key string
}

type verdictCheck struct {
	key ed25519.PublicKey
	ok  bool
}

// evidence follows zone Leases, kubelet Leases and nodes' zones, and checks
// signatures. It is safe for concurrent use.
type evidence struct {
	clock     clock.PassiveClock
	nodes     corelisters.NodeLister
	zoneLabel string
	metrics   *metrics
	// maxLeaseTerm is the longest an attestation counts: downs older
	// than that are dropped.
	maxLeaseTerm time.Duration
	// nodesSynced tells whether every Node of the first list has reached
	// the event handlers, so sizes counts every zone in full.
	nodesSynced func() bool

	mu       sync.Mutex
	zones    map[string]*zoneRecord // by Lease name
	kubelets map[string]renewal     // by node name
	joined   map[string]membership  // by node name
	sizes    map[string]int         // nodes per zone label value, from joined
	verified map[string]verdictCheck
	refused  map[string]Reason // verdicts counted as refused
	// kept is, by node name, the last verdict honoured: what the node is
	// judged by while its annotation is one the zone did not sign.
	kept map[string]*keptVerdict
	// keysGen counts the changes of any node's zone or key the node events
	// told (seenAttestation.checkedGen). An event trails the node cache
	// by moments, during which an attestation checked before a key change
	// keeps its answer.
	keysGen uint64

	// keysMu guards keys, the memo of nodeKey; apart from mu, since
	// memberKey is called with and without it.
	keysMu sync.Mutex
	keys   map[string]memberKeyOf
}

func newEvidence(cfg Config, nodes corelisters.NodeLister, m *metrics) *evidence {
	return &evidence{
		clock: cfg.Clock, nodes: nodes, zoneLabel: cfg.ZoneLabel, metrics: m, maxLeaseTerm: cfg.MaxZoneLeaseDuration,
		zones: map[string]*zoneRecord{}, kubelets: map[string]renewal{}, joined: map[string]membership{}, sizes: map[string]int{},
		verified: map[string]verdictCheck{}, refused: map[string]Reason{}, kept: map[string]*keptVerdict{},
	}
}

// follow registers the event handlers. Objects already cached are delivered
// as part of the first list.
func (e *evidence) follow(inf Informers) error {
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		add func(obj any, initial bool)
		del func(obj any)
	}{
		{inf.Nodes, e.onNode, func(obj any) {
			e.forget(obj, func(n string) {
				if m, ok := e.joined[n]; ok {
					e.sizes[m.zone]--
				}
				delete(e.joined, n)
				delete(e.kept, n)
				e.keysGen++
			})
		}},
		{inf.NodeLeases, func(obj any, _ bool) { e.onKubeletLease(obj) }, func(obj any) { e.forget(obj, func(n string) { delete(e.kubelets, n) }) }},
		{inf.ZoneLeases, func(obj any, _ bool) { e.onZoneLease(obj) }, func(obj any) { e.forget(obj, func(n string) { delete(e.zones, n) }) }},
	} {
		add, del := h.add, h.del
		reg, err := h.inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    add,
			UpdateFunc: func(_, obj any) { add(obj, false) },
			DeleteFunc: del,
		})
		if err != nil {
			return fmt.Errorf("follow informer events: %w", err)
		}
		if h.inf == inf.Nodes {
			// Synced once this handler, which counts the zones'
			// sizes, has had every Node of the first list.
			e.nodesSynced = reg.HasSynced
		}
	}
	return nil
}

// forget runs del, under the lock, with the name of a deleted object.
func (e *evidence) forget(obj any, del func(name string)) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(interface{ GetName() string }); ok {
		e.mu.Lock()
		del(o.GetName())
		e.mu.Unlock()
	}
}

func (e *evidence) onNode(obj any, initial bool) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	z, key := n.Labels[e.zoneLabel], n.Annotations[zone.NodeKeyAnnotation]
	e.mu.Lock()
	defer e.mu.Unlock()
	old, ok := e.joined[n.Name]
	if ok && old.zone == z {
		if old.key != key {
			old.key = key
			e.joined[n.Name] = old
			e.keysGen++
		}
		return
	}
	if ok {
		e.sizes[old.zone]--
	}
	e.sizes[z]++
	m := membership{zone: z, key: key}
	if !initial {
		m.since = e.clock.Now()
	}
	e.joined[n.Name] = m
	e.keysGen++
}

func (e *evidence) onKubeletLease(obj any) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		e.mu.Lock()
		e.kubeletLease(l)
		e.mu.Unlock()
	}
}

// kubeletLease records l if it is a renewal the webhook has not seen yet.
// Called with mu held, from the informer's events and, in case the Decider
// reads the cache before its own event arrived, from the Decider.
func (e *evidence) kubeletLease(l *coordinationv1.Lease) renewal {
	t := renewTime(l)
	if r, ok := e.kubelets[l.Name]; ok && r.renewed.Equal(t) {
		return r
	}
	r := renewal{renewed: t, seen: e.clock.Now()}
	e.kubelets[l.Name] = r
	return r
}

func (e *evidence) onZoneLease(obj any) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		e.mu.Lock()
		e.zoneLease(l)
		e.mu.Unlock()
	}
}

// zoneLease records l if it is a renewal the webhook has not seen yet, and
// honours it if it is valid. Called with mu held, like kubeletLease.
func (e *evidence) zoneLease(l *coordinationv1.Lease) *zoneRecord {
	c := claim{LeaseClaim: zonek8s.LeaseClaimOf(l), sig: l.Annotations[zone.LeaseSignatureAnnotation],
		leadership: l.Annotations[zone.LeaseLeadershipAnnotation]}
	_, err := zone.ParseFormatLevel(l.Annotations[zone.LeaseFormatAnnotation])
	c.newer = errors.Is(err, skew.ErrTooNew)
	c.renewed = c.Renewed
	endorses, err := zone.ParseEndorsements(c.Endorses)
	c.endorses, c.endorsed = endorses, err == nil // refused when it does not parse
	rec := e.zones[l.Name]
	if rec == nil {
		rec = &zoneRecord{attests: map[string]*seenAttestation{}}
		e.zones[l.Name] = rec
	}
	e.attestations(l, rec)
	if rec.latest.sig == c.sig && rec.latest.LeaseClaim == c.LeaseClaim && rec.latest.leadership == c.leadership && !rec.latest.seen.IsZero() {
		return rec // not a renewal: labels, managed fields, members
	}
	c.seen = e.clock.Now()
	if !rec.checked && !rec.latest.seen.IsZero() {
		if len(rec.pending) == maxPendingClaims {
			rec.pending = rec.pending[1:]
		}
		rec.pending = append(rec.pending, rec.latest)
	}
	rec.latest, rec.checked, rec.counted = c, false, false
	e.check(l.Name, rec)
	return rec
}

// check verifies rec.latest (after any pending renewal) and honours it if it
// is valid. Called with mu held.
func (e *evidence) check(name string, rec *zoneRecord) {
	for len(rec.pending) > 0 {
		c := rec.pending[0]
		if reason, final := e.verifyClaim(name, rec, &c); reason == "" {
			e.honour(rec, c)
		} else if !final {
			break // its holder's Node is still not cached: keep the order
		}
		rec.pending = rec.pending[1:]
	}
	c := rec.latest
	reason, final := e.verifyClaim(name, rec, &c)
	if reason == "" {
		e.honour(rec, c)
		rec.checked = true
		return
	}
	rec.checked = final
	// Before the node cache has synced, a holder not found may just not
	// be there yet: that is retried, not counted.
	if !rec.counted && (final || e.nodesSynced()) {
		e.metrics.leasesRefused.WithLabelValues(reason).Inc()
		rec.counted = true
	}
}

// honour makes c, verified, rec's valid claim, with the zone's downs as they
// stand. Called with mu held.
func (e *evidence) honour(rec *zoneRecord, c claim) {
	c.downs = rec.downs
	rec.valid = &c
	if c.certified {
		rec.certified = true
	}
}

// verifyClaim says why c, read from the Lease named name whose record is rec,
// is not honoured, or "" when it is, and then sets c.certified if a majority's
// votes back it. final is false when the reason may go away once the node
// cache catches up with the holder's or a voter's Node.
func (e *evidence) verifyClaim(name string, rec *zoneRecord, c *claim) (reason string, final bool) {
	switch {
	case c.newer:
		return leaseNewerFormat, true
	case c.sig == "":
		return leaseUnsigned, true
	case c.Zone == "" || zone.LeaseName(c.Zone) != name:
		return leaseZoneMismatch, true
	case c.DurationSeconds <= 0:
		return leaseNoDuration, true
	case !c.endorsed:
		return leaseBadEndorsements, true
	}
	key, r := e.memberKey(c.Holder, c.Zone)
	switch r {
	case ReasonSignerNotMember:
		return leaseHolderNotMember, false
	case ReasonSignerNoKey:
		return leaseHolderNoKey, false
	}
	if !c.Verify(c.sig, key) {
		return leaseBadSignature, true
	}
	if c.leadership == "" {
		if rec.certified {
			return leaseNoLeadership, true
		}
		return "", true // agents of a release before the votes
	}
	votes, err := zone.ParseLeadership(c.Zone, c.leadership)
	if err != nil || len(votes) == 0 || votes[0].Term != c.Term || votes[0].Leader != c.Holder {
		return leaseBadLeadership, true
	}
	if !e.nodesSynced() {
		// The zone's size is not known yet: a partial count could make
		// one vote a majority.
		return leaseLeadershipMinority, false
	}
	if n, need := e.validVotes(c.Zone, votes), e.sizes[c.Zone]/2+1; n < need {
		return leaseLeadershipMinority, true
	}
	if v := rec.valid; v != nil && v.certified && c.Term < v.Term &&
		e.clock.Now().Before(v.at().Add(min(time.Duration(v.DurationSeconds)*time.Second, e.maxLeaseTerm))) {
		return leaseStaleTerm, true
	}
	c.certified = true
	return "", true
}

// validVotes counts the votes that verify against the key their signer's Node
// registers, a member of zoneName, remembering each answer per signature and
// key. Called with mu held.
func (e *evidence) validVotes(zoneName string, votes []zone.LeaderVote) int {
	n := 0
	for _, v := range votes {
		key, r := e.memberKey(v.Signer, zoneName)
		if r != "" {
			continue
		}
		if ok, _ := e.checkOnce("vote\x00", v.Sig, v.SigningBytes(), key, v.Verify); ok {
			n++
		}
	}
	return n
}

// memberKey is the node key registered on the Node of a member of zoneName,
// or why there is none.
func (e *evidence) memberKey(node, zoneName string) (ed25519.PublicKey, Reason) {
	n, err := e.nodes.Get(node)
	if err != nil {
		return nil, ReasonSignerNotMember
	}
	k := e.nodeKey(n)
	switch {
	case k.zone != zoneName:
		return nil, ReasonSignerNotMember
	case k.key == nil:
		return nil, ReasonSignerNoKey
	}
	return k.key, ""
}

// memberKeyOf is what memberKey reads of one version of a Node.
type memberKeyOf struct {
	resourceVersion string
	zone            string
	key             ed25519.PublicKey // nil: none that parses
}

// maxNodeKeys bounds the memo of Node keys; past it, it starts over.
const maxNodeKeys = 1 << 17

// nodeKey returns n's zone and registered key, memoized per Node version: a
// review checks every peer's attestation, each against its signer's Node,
// and the cached Node is replaced, never changed, when it changes.
func (e *evidence) nodeKey(n *corev1.Node) memberKeyOf {
	e.keysMu.Lock()
	k, ok := e.keys[n.Name]
	e.keysMu.Unlock()
	if ok && k.resourceVersion == n.ResourceVersion && n.ResourceVersion != "" {
		return k
	}
	k = memberKeyOf{resourceVersion: n.ResourceVersion, zone: n.Labels[e.zoneLabel]}
	if key, err := zone.ParseNodeKey(n.Annotations[zone.NodeKeyAnnotation]); err == nil {
		k.key = key
	}
	e.keysMu.Lock()
	if e.keys == nil || len(e.keys) >= maxNodeKeys {
		e.keys = map[string]memberKeyOf{}
	}
	e.keys[n.Name] = k
	e.keysMu.Unlock()
	return k
}

// zoneClaim returns the honoured claim of the zone Lease named name, nil if
// none. l is the Lease as the cache holds it now (nil if none), which may be
// newer than the last event.
func (e *evidence) zoneClaim(name string, l *coordinationv1.Lease) *claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := e.zones[name]
	if l != nil {
		rec = e.zoneLease(l)
	}
	if rec == nil {
		return nil
	}
	if !rec.checked {
		e.check(name, rec)
	}
	return rec.valid
}

// reheard returns when the cloud first heard a member of the zone whose Lease
// is name again after its stale honoured claim valid: first, the earliest
// renewal heard now, the first time it is asked about valid, and that same
// instant after, while the members' renewals move on.
func (e *evidence) reheard(name string, valid *claim, first time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec := e.zones[name]
	if rec == nil {
		return first
	}
	if !rec.reheardOf.Equal(valid.renewed) || rec.reheard.IsZero() {
		rec.reheard, rec.reheardOf = first, valid.renewed
	}
	return rec.reheard
}

// kubeletRenewed is when the node's kubelet last renewed its Lease l (as the
// cache holds it now, nil if none), as the webhook saw it; zero if never.
func (e *evidence) kubeletRenewed(l *coordinationv1.Lease) time.Time {
	if l == nil {
		return time.Time{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kubeletLease(l).at()
}

// kubeletSeen is when the webhook first saw the kubelet Lease renewal l holds
// (the cache's copy, nil if none); zero if none.
func (e *evidence) kubeletSeen(l *coordinationv1.Lease) time.Time {
	if l == nil {
		return time.Time{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kubeletLease(l).seen
}

// memberSince is when the webhook first saw node in zoneName: zero for nodes
// that were there when it started, and for a node it has not seen yet (its
// informer event may trail the node cache).
func (e *evidence) memberSince(node, zoneName string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.joined[node]; ok && m.zone == zoneName {
		return m.since
	}
	return time.Time{}
}

// verifyVerdict checks that a, read from raw on node, is signed by a member of
// its zone with the key its Node registers. Results are cached per annotation
// and key: a verdict changes once per verdict change, a review comes with
// every kubelet status post.
func (e *evidence) verifyVerdict(node, raw string, a *zone.Annotation) Reason {
	if len(a.Sig) == 0 {
		return ReasonUnsigned
	}
	key, r := e.memberKey(a.Signer, a.Zone)
	if r != "" {
		return r
	}
	k := node + "\x00" + raw
	e.mu.Lock()
	c, ok := e.verified[k]
	e.mu.Unlock()
	if !ok || !bytes.Equal(c.key, key) {
		c = verdictCheck{key: key, ok: a.Verify(node, key)}
		e.mu.Lock()
		if len(e.verified) >= e.cacheLimit() {
			e.verified = map[string]verdictCheck{}
		}
		e.verified[k] = c
		e.mu.Unlock()
	}
	if !c.ok {
		return ReasonBadSignature
	}
	return ""
}

// refuse counts a verdict not honoured for reason, once per annotation and
// reason: the same Node is reviewed again with every status post.
func (e *evidence) refuse(node, raw string, reason Reason) {
	k := node + "\x00" + raw
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refused[k] == reason {
		return
	}
	if len(e.refused) >= e.cacheLimit() {
		e.refused = map[string]Reason{}
	}
	e.refused[k] = reason
	e.metrics.verdictsRefused.WithLabelValues(string(reason)).Inc()
}

// keptVerdict is a verdict annotation as found on a Node, parsed.
type keptVerdict struct {
	raw     string
	verdict zone.Annotation
}

// newerOrSame reports whether v was signed no earlier than o: under a higher
// signing term, or under the same one for a decision no earlier. Within a
// term one leader signs, in order; a leader's verdict supersedes every verdict
// of the leaders before it, whatever their decision times, so an earlier
// leader's word, forged or not, ends with its leadership.
func (v *keptVerdict) newerOrSame(o *keptVerdict) bool {
	if a, b := v.verdict.SigningTerm(), o.verdict.SigningTerm(); a != b {
		return a > b
	}
	return !v.verdict.At.Before(o.verdict.At)
}

// keptVerdict is the last verdict honoured for node, nil if none.
func (e *evidence) keptVerdict(node string) *keptVerdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kept[node]
}

// keep records v as the last verdict honoured for node, unless another Decide
// meanwhile kept a newer one than seen, the one it judged against.
func (e *evidence) keep(node string, v, seen *keptVerdict) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k := e.kept[node]; k == nil || k == seen || k.verdict.Zone != v.verdict.Zone || v.newerOrSame(k) {
		e.kept[node] = v
		// A removal counted before this verdict is a new event next time.
		delete(e.refused, node+"\x00")
	}
}

// keptByZone is every kept verdict, by zone and node, as its raw annotation:
// what the webhook's memory writes.
func (e *evidence) keptByZone() map[string]map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]map[string]string{}
	for node, k := range e.kept {
		z := k.verdict.Zone
		if out[z] == nil {
			out[z] = map[string]string{}
		}
		out[z][node] = k.raw
	}
	return out
}

// attestations records the attestations the zone Lease l carries that are
// newer, by their signer's clock, than the last seen from that signer. They
// prove nothing about the Lease or its writer: each is checked against its
// own signer's key when counted. Called with mu held.
func (e *evidence) attestations(l *coordinationv1.Lease, rec *zoneRecord) {
	raw, ok := l.Annotations[zone.LeaseEvidenceAnnotation]
	if !ok || raw == rec.evidenceRaw {
		return
	}
	rec.evidenceRaw = raw
	z := l.Labels[zonek8s.ZoneLabel]
	atts, err := zone.ParseEvidence(z, raw)
	if err != nil || z == "" || zone.LeaseName(z) != l.Name {
		e.metrics.evidenceRefused.WithLabelValues(evidenceMalformed).Inc()
		return
	}
	now := e.clock.Now()
	for _, a := range atts {
		sa := seenAttestation{Attestation: a, renewal: renewal{renewed: a.At, seen: now}}
		e.recordDowns(z, rec, &sa)
		if prev, ok := rec.attests[a.Signer]; ok && !a.At.After(prev.At) {
			continue
		}
		rec.attests[a.Signer] = &sa
	}
}

// recordDowns adds to rec.downs what a, seen at now, says of nodes that are
// down, if it is newer than what its signer said of them before and a checks
// out against its signer's key. Only members of zone z are recorded, as
// signers and as nodes, so a writer cannot grow the map with made-up names.
// Called with mu held.
func (e *evidence) recordDowns(z string, rec *zoneRecord, a *seenAttestation) {
	if len(a.Down) == 0 || !e.memberOf(a.Signer, z) {
		return
	}
	now, at := a.seen, a.at()
	var raise []string
	for _, n := range a.Down {
		if n != a.Signer && e.memberOf(n, z) && at.After(rec.downs[downKey{n, a.Signer}]) {
			raise = append(raise, n)
		}
	}
	if len(raise) == 0 || !e.attestationValid(z, a) {
		return
	}
	next := make(downs, len(rec.downs)+len(raise))
	for k, t := range rec.downs {
		if now.Sub(t) < e.maxLeaseTerm {
			next[k] = t
		}
	}
	for _, n := range raise {
		next[downKey{n, a.Signer}] = at
	}
	rec.downs = next
}

// memberOf reports whether the node events put node in zone z. Called with mu
// held.
func (e *evidence) memberOf(node, z string) bool {
	m, ok := e.joined[node]
	return ok && m.zone == z
}

// Reasons an attestation is not counted: values of the reason label of
// edgequorum_admission_evidence_refused_total.
const (
	evidenceMalformed    = "malformed"
	evidenceNotMember    = "signer-not-member"
	evidenceBadSignature = "bad-signature"
)

// covered reports whether a majority of node's peers in zoneName attested,
// each with the key its own Node registers, that they reach node, in
// attestations fresh by the webhook's clock: made (by the signer's clock,
// never later than the webhook saw them) less than ttl ago. The peers are the
// nodes the cache holds with the zone's label, node excluded.
func (e *evidence) covered(node, zoneName string, ttl time.Duration) bool {
	return e.coveredAt(node, zoneName, ttl, e.clock.Now())
}

// coveredAt is covered as of t: by attestations made no later than t and
// less than ttl before it.
func (e *evidence) coveredAt(node, zoneName string, ttl time.Duration, now time.Time) bool {
	return e.majority(node, zoneName, ttl, now, func(a *zone.Attestation) bool { return a.Reaches(node) })
}

// confirmedDown reports whether a majority of node's peers in zoneName
// attested, in fresh attestations checked as for covered, that every probe
// of theirs fails on node: its kubelet port and its agent alike.
func (e *evidence) confirmedDown(node, zoneName string, ttl time.Duration) bool {
	return e.majority(node, zoneName, ttl, e.clock.Now(), func(a *zone.Attestation) bool { return a.FindsDown(node) })
}

// majority reports whether more than half of node's peers in zoneName say so
// of node in attestations made no later than now and less than ttl before.
func (e *evidence) majority(node, zoneName string, ttl time.Duration, now time.Time, says func(*zone.Attestation) bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	count := 0
	e.eachValid(node, zoneName, ttl, now, func(a *zone.Attestation) {
		if says(a) {
			count++
		}
	})
	return count >= e.majorityOfPeers(node, zoneName)
}

// peerWord is what node's peers in zoneName say of it in valid attestations
// made no later than now and less than ttl before: who reaches it, and who
// finds every probe of theirs failing on it, each sorted. Members attest only
// on the nodes their leader asks about (those the cloud may not hear from, and
// those judged unhealthy), so of a node nobody asked about both are empty.
func (e *evidence) peerWord(node, zoneName string, ttl time.Duration, now time.Time) (reach, down []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.eachValid(node, zoneName, ttl, now, func(a *zone.Attestation) {
		switch {
		case a.Reaches(node):
			reach = append(reach, a.Signer)
		case a.FindsDown(node):
			down = append(down, a.Signer)
		}
	})
	slices.Sort(reach)
	slices.Sort(down)
	return reach, down
}

// eachValid calls fn with the newest attestation of each of node's peers in
// zoneName that was made no later than now and less than ttl before, and
// checks out against its signer's key. Called with mu held.
func (e *evidence) eachValid(node, zoneName string, ttl time.Duration, now time.Time, fn func(*zone.Attestation)) {
	rec := e.zones[zone.LeaseName(zoneName)]
	if rec == nil {
		return
	}
	for signer, a := range rec.attests {
		if signer == node || a.at().After(now) || !now.Before(a.at().Add(ttl)) {
			continue
		}
		if e.attestationValid(zoneName, a) {
			fn(&a.Attestation)
		}
	}
}

// downWhenDark reports whether, when its zone went dark with valid (the zone
// Lease's last honoured renewal), a majority of node's peers had attested
// that every probe of theirs failed on it: each in the ttl before the zone
// went dark and after the cloud last heard node's kubelet, at kubelet (both
// as renewal.at counts them). What a member said counts even if its newest
// attestation says otherwise, since a thief with its key could have signed
// that newest one; it is its own word it takes back, and one word is no
// majority.
func (e *evidence) downWhenDark(node, zoneName string, valid *claim, ttl time.Duration, kubelet time.Time) bool {
	dark := valid.seen
	e.mu.Lock()
	defer e.mu.Unlock()
	count := 0
	for k, at := range valid.downs {
		if k.node == node && e.memberOf(k.signer, zoneName) && !at.After(dark) && dark.Sub(at) < ttl && at.After(kubelet) {
			count++
		}
	}
	return count >= e.majorityOfPeers(node, zoneName)
}

// majorityOfPeers is how many of node's peers in zoneName make a majority. The
// zone's size is as the node events told it: a review comes with every
// kubelet status post, and listing the zone's nodes would cost the whole node
// cache each time. Called with mu held.
func (e *evidence) majorityOfPeers(node, zoneName string) int {
	peers := e.sizes[zoneName]
	if e.memberOf(node, zoneName) {
		peers--
	}
	return peers/2 + 1
}

// attestationValid checks a's signature against the key its signer's Node
// registers, a member of zoneName, remembering the answer on a for that key.
// Called with mu held.
func (e *evidence) attestationValid(zoneName string, a *seenAttestation) bool {
	if a.checkedKey != nil && a.checkedGen == e.keysGen && a.checkedZone == zoneName {
		return a.ok
	}
	key, r := e.memberKey(a.Signer, zoneName)
	if r != "" {
		e.countEvidenceRefusal(a.Attestation, evidenceNotMember)
		return false
	}
	if a.checkedKey != nil && bytes.Equal(a.checkedKey, key) {
		return a.ok
	}
	a.checkedGen, a.checkedZone = e.keysGen, zoneName
	a.checkedKey, a.ok = key, a.Verify(key)
	if !a.ok {
		e.countEvidenceRefusal(a.Attestation, evidenceBadSignature)
	}
	return a.ok
}

// checkOnce returns verify(key), remembered in e.verified per kind, signature,
// signed bytes and key; fresh is set when it was checked now. Keyed by what
// was signed as well as the signature: a copy of a valid signature under
// other words must not find its answer. Called with mu held.
func (e *evidence) checkOnce(kind string, sig, signed []byte, key ed25519.PublicKey, verify func(ed25519.PublicKey) bool) (ok, fresh bool) {
	k := kind + string(sig) + string(signed)
	if c, found := e.verified[k]; found && bytes.Equal(c.key, key) {
		return c.ok, false
	}
	c := verdictCheck{key: key, ok: verify(key)}
	if len(e.verified) >= e.cacheLimit() {
		e.verified = map[string]verdictCheck{}
	}
	e.verified[k] = c
	return c.ok, true
}

// countEvidenceRefusal counts a refused attestation once per signature and
// reason. Called with mu held.
func (e *evidence) countEvidenceRefusal(a zone.Attestation, reason string) {
	k := "att\x00" + string(a.Sig)
	if e.refused[k] == Reason(reason) {
		return
	}
	if len(e.refused) >= e.cacheLimit() {
		e.refused = map[string]Reason{}
	}
	e.refused[k] = Reason(reason)
	e.metrics.evidenceRefused.WithLabelValues(reason).Inc()
}
