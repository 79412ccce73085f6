package admission

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/zone"
)

// EdgeZoneResource is the cluster-scoped resource that shows each zone in the
// cloud (deploy/webhook/base/edgezones.yaml): `kubectl get edgezones`. Only
// the webhook's repair loop leader writes it.
var EdgeZoneResource = schema.GroupVersionResource{Group: "edgequorum.io", Version: "v1alpha1", Resource: "edgezones"}

// EdgeZoneZoneLabel names, on an EdgeZone, the zone label value it shows:
// object names are DNS subdomains, zone label values need not be.
const EdgeZoneZoneLabel = "edgequorum.io/zone"

// ZoneState is a zone's state as the cloud sees it. The values are stable:
// they are the EdgeZone STATE column and Event reasons' stems.
type ZoneState string

// Zone states.
const (
	// ZoneConnected: the zone's leader renews the zone Lease, which the
	// webhook honours.
	ZoneConnected ZoneState = "Connected"
	// ZoneCutOff: the zone Lease and every member's kubelet went silent
	// together: the whole zone lost the cloud, and its vouched nodes stay
	// protected until ProtectedUntil.
	ZoneCutOff ZoneState = "CutOff"
	// ZoneNoLeader: the zone Lease went stale while the cloud still hears a
	// member's kubelet: the zone's quorum, not its link, is what is missing,
	// and nothing is protected.
	ZoneNoLeader ZoneState = "NoLeader"
	// ZoneForming: the zone has nodes but no zone Lease the webhook honours
	// yet.
	ZoneForming ZoneState = "Forming"
)

// zoneStates are the states in the order metrics list them.
var zoneStates = []ZoneState{ZoneConnected, ZoneCutOff, ZoneNoLeader, ZoneForming}

// metricLabel is the state as a value of the state label of
// edgequorum_admission_zones.
func (s ZoneState) metricLabel() string {
	switch s {
	case ZoneCutOff:
		return "cut_off"
	case ZoneNoLeader:
		return "no_leader"
	}
	return string(s[0]+'a'-'A') + string(s[1:])
}

// EdgeZoneStatus is an EdgeZone's status: what the cloud makes of a zone from
// the evidence the webhook verified (signed verdicts, signed zone Leases and
// their attestations, kubelet Leases), never from what an agent says of its
// zone's state. Its JSON is the resource's schema.
type EdgeZoneStatus struct {
	// Nodes is how many nodes carry the zone's label.
	Nodes int `json:"nodes"`
	// Leader and Term are those of the zone Lease the webhook honours last.
	Leader string    `json:"leader,omitempty"`
	Term   int64     `json:"term,omitempty"`
	State  ZoneState `json:"state"`
	// Since is when the zone entered State: for CutOff when it went dark,
	// for NoLeader when its zone Lease went stale, by the webhook's clock;
	// otherwise when the webhook first saw it so.
	Since *metav1.Time `json:"since,omitempty"`
	// Protected is how many of its nodes the cloud cannot hear from while
	// the webhook vouches for them: their taints are kept off and their pods
	// Ready.
	Protected int `json:"protected"`
	// FailedOver is how many of its nodes carry the failover's
	// out-of-service taint.
	FailedOver int `json:"failedOver"`
	// ProtectedUntil is, in a cut, when the zone's protection ends
	// (--max-cutoff-protection after it went dark); ProtectionLeft is the
	// time left then, coarsely (hours, then tens of minutes, then minutes),
	// so that a long cut costs a few dozen writes, not one per pass.
	ProtectedUntil *metav1.Time `json:"protectedUntil,omitempty"`
	ProtectionLeft string       `json:"protectionLeft,omitempty"`
	// Members are the zone's nodes, by name.
	Members []EdgeZoneMember `json:"members,omitempty"`
}

// EdgeZoneMember is one node of an EdgeZone: what its zone says of it, what
// the webhook makes of that, and what its peers attest.
type EdgeZoneMember struct {
	Name string `json:"name"`
	// Verdict is the state of the verdict the node is judged by (healthy,
	// unhealthy, unknown); empty when the zone signed none the webhook
	// honours.
	Verdict string `json:"verdict,omitempty"`
	// Vouched and Reason are the webhook's decision (Reason values are
	// admission.Reason).
	Vouched bool   `json:"vouched"`
	Reason  string `json:"reason"`
	// Ready is the status of the Node's Ready condition.
	Ready string `json:"ready,omitempty"`
	// ReachedBy and DownBy are the peers whose fresh signed attestation
	// says they reach the node, and that every probe of theirs fails on
	// it. Members attest only on the nodes the cloud may not hear from and
	// those judged unhealthy; of others both are empty.
	ReachedBy []string `json:"reachedBy,omitempty"`
	DownBy    []string `json:"downBy,omitempty"`
	// FailedOver is set while the node carries the failover's
	// out-of-service taint.
	FailedOver bool `json:"failedOver,omitempty"`
}

// protectionLeft rounds d down to hours (from two hours), tens of minutes
// (from ten minutes) or minutes.
func protectionLeft(d time.Duration) string {
	switch {
	case d <= 0:
		return "0m"
	case d >= 2*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	case d >= 10*time.Minute:
		return fmt.Sprintf("%dm", int(d/(10*time.Minute))*10)
	}
	return fmt.Sprintf("%dm", int(d/time.Minute))
}

// zoneViewLimit caps the zones with a series of their own in each per-zone
// gauge: the most urgent ones. The state counts cover all.
const zoneViewLimit = 100

// zoneSnapshot is one pass's view of every zone, which the metrics read.
type zoneSnapshot struct {
	// clock is the viewer's, which ages the snapshot for the gauges.
	clock clock.PassiveClock
	zones map[string]*EdgeZoneStatus
}

// zoneViewer is the zone view: while its replica leads the repair loop, every
// ZoneStatusPeriod it judges every zone from the caches and writes each
// EdgeZone whose status changed, paced by a token bucket, and records an
// Event on each state change. It keeps what it wrote, so steady zones cost no
// write at all; a new leader lists the EdgeZones once to learn what is stored.
// At 10,000 zones its writes are the zones whose state, membership,
// decisions or coarse protection left changed since the last pass, never
// more than ZoneStatusQPS a second: what the bucket defers is written on a
// later pass, state changes first.
type zoneViewer struct {
	decider *Decider
	nodes   interface {
		List(labels.Selector) ([]*corev1.Node, error)
	}
	// client is nil when EdgeZones are not written: the metrics still are.
	client dynamic.ResourceInterface
	events *eventer
	clock  clock.WithTicker
	period time.Duration
	// spread is how long a pass may stretch its judging over, pausing
	// between zones: at thousands of zones a pass takes a few hundred
	// milliseconds of CPU, and done at once it makes the reviews that
	// arrive meanwhile queue behind it (the p99 of every route rose from a
	// few to 150-200 ms on one core). Zero judges every zone at once.
	spread  time.Duration
	limiter *rate.Limiter
	dryRun  bool
	metrics *metrics
	log     *slog.Logger

	// latest is the last pass's view while this replica leads, nil
	// otherwise: only the leader exports the zone gauges.
	latest atomic.Pointer[zoneSnapshot]
	// written is, by zone, what this leader last wrote or read.
	written map[string]*writtenZone
}

// writtenZone is an EdgeZone as stored.
type writtenZone struct {
	name   string
	uid    types.UID
	status EdgeZoneStatus
}

// run keeps the view until ctx is done.
func (v *zoneViewer) run(ctx context.Context) {
	defer v.latest.Store(nil)
	v.written = map[string]*writtenZone{}
	if v.client != nil {
		v.readStored(ctx)
	}
	t := v.clock.NewTicker(v.period)
	defer t.Stop()
	for {
		v.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// readStored learns what the EdgeZones hold, so an unchanged zone is not
// written again after a restart or a change of leader.
func (v *zoneViewer) readStored(ctx context.Context) {
	list, err := v.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		v.log.Warn("EdgeZones not read; writing every zone", "err", err)
		return
	}
	for i := range list.Items {
		o := &list.Items[i]
		z := o.GetLabels()[EdgeZoneZoneLabel]
		if z == "" {
			continue
		}
		w := &writtenZone{name: o.GetName(), uid: o.GetUID()}
		if raw, ok := o.Object["status"]; ok {
			b, err := json.Marshal(raw)
			if err == nil {
				err = json.Unmarshal(b, &w.status)
			}
			if err != nil {
				w.status = EdgeZoneStatus{} // written anew
			}
			// Times read back are local; the view's are UTC.
			for _, t := range []*metav1.Time{w.status.Since, w.status.ProtectedUntil} {
				if t != nil {
					t.Time = t.UTC()
				}
			}
		}
		v.written[z] = w
	}
}

// pass judges every zone and writes what changed.
func (v *zoneViewer) pass(ctx context.Context) {
	now := v.clock.Now()
	view, err := v.view(ctx, now)
	if ctx.Err() != nil {
		return // stopping: a paced pass ends where it is
	}
	if err != nil {
		v.log.Warn("zone view not computed", "err", err)
		return
	}
	v.latest.Store(&zoneSnapshot{clock: v.clock, zones: view})

	if v.client == nil || v.dryRun {
		return
	}
	// State changes first: the bucket may defer the rest to a later pass.
	names := slices.Sorted(maps.Keys(view))
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(v.stateUnchanged(a, view[a]), v.stateUnchanged(b, view[b]))
	})
	for _, z := range names {
		st := view[z]
		if w := v.written[z]; w != nil && reflect.DeepEqual(w.status, *st) {
			continue
		}
		if !v.limiter.Allow() {
			v.metrics.zoneStatusWrites.WithLabelValues("deferred").Inc()
			continue
		}
		if err := v.write(ctx, z, st); err != nil {
			v.metrics.zoneStatusWrites.WithLabelValues(repairError).Inc()
			v.log.Info("EdgeZone not written; retried next pass", "zone", z, "err", err)
			continue
		}
		v.metrics.zoneStatusWrites.WithLabelValues("ok").Inc()
	}
	for z, w := range v.written {
		if _, ok := view[z]; ok || !v.limiter.Allow() {
			continue
		}
		err := v.client.Delete(ctx, w.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &w.uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			v.log.Info("EdgeZone of a zone without nodes not deleted; retried next pass", "zone", z, "err", err)
			continue
		}
		delete(v.written, z)
	}
}

// stateUnchanged is 0 when zone z's state differs from what is stored, 1 if
// not.
func (v *zoneViewer) stateUnchanged(z string, st *EdgeZoneStatus) int {
	if w := v.written[z]; w != nil && w.status.State == st.State {
		return 1
	}
	return 0
}

// view judges every zone with a node in the cache, at now.
func (v *zoneViewer) view(ctx context.Context, now time.Time) (map[string]*EdgeZoneStatus, error) {
	nodes, err := v.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes from cache: %w", err)
	}
	byZone := map[string][]*corev1.Node{}
	for _, n := range nodes {
		if z := n.Labels[v.decider.zoneLabel]; z != "" {
			byZone[z] = append(byZone[z], n)
		}
	}
	out := make(map[string]*EdgeZoneStatus, len(byZone))
	batch, pause := v.pacing(len(byZone), len(nodes))
	pace := pacer{batch: batch, pause: pause}
	for z, members := range byZone {
		if !pace.next(ctx) {
			return nil, ctx.Err()
		}
		edge, err := v.edgeZone(z, members)
		if err != nil {
			return nil, err
		}
		if !edge {
			continue
		}
		st, err := v.zone(z, members, now)
		if err != nil {
			return nil, err
		}
		out[z] = st
	}
	return out, nil
}

// pacedNodes is how many nodes a pass judges before it spreads its work: a
// pass over fewer takes a few milliseconds.
const pacedNodes = 1000

// pacing says how a pass over zones with nodes in all spreads its judging
// over v.spread (spreadOver); no pause under pacedNodes.
func (v *zoneViewer) pacing(zones, nodes int) (batch int, pause time.Duration) {
	if nodes < pacedNodes {
		return 1, 0
	}
	return spreadOver(zones, v.spread)
}

// edgeZone reports whether zone z, whose nodes are members, is one of
// edgequorum's: a member registers a node key or carries a verdict, or the
// zone has a zone Lease. The zone label is topology.kubernetes.io/zone by
// default, which the cloud's own nodes carry too; their zones have none of
// these and are not shown.
func (v *zoneViewer) edgeZone(z string, members []*corev1.Node) (bool, error) {
	for _, n := range members {
		_, key := n.Annotations[zone.NodeKeyAnnotation]
		_, verdict := n.Annotations[zone.AnnotationKey]
		if key || verdict {
			return true, nil
		}
	}
	l, err := v.decider.lease(v.decider.caches.ZoneLeases, zone.LeaseName(z))
	return l != nil, err
}

// zone judges zone z, whose nodes are members, at now.
func (v *zoneViewer) zone(z string, members []*corev1.Node, now time.Time) (*EdgeZoneStatus, error) {
	d := v.decider
	st := &EdgeZoneStatus{Nodes: len(members), State: ZoneForming}
	l, err := d.lease(d.caches.ZoneLeases, zone.LeaseName(z))
	if err != nil {
		return nil, err
	}
	valid := d.evidence.zoneClaim(zone.LeaseName(z), l)
	asOf := now
	if valid != nil {
		st.Leader, st.Term = valid.Holder, int64(valid.Term)
		st.State = ZoneConnected
		dz, err := d.darkness(z, valid, now, members)
		switch {
		case err != nil:
			return nil, err
		case dz.dark:
			asOf = valid.at()
			until := dz.at.Add(d.maxCutoffProtection)
			st.State, st.Since, st.ProtectedUntil = ZoneCutOff, ptrTime(dz.at), ptrTime(until)
			st.ProtectionLeft = protectionLeft(until.Sub(now))
		case dz.stale:
			asOf = valid.at()
			st.State, st.Since = ZoneNoLeader, ptrTime(d.staleAt(valid))
		}
	}
	if st.Since == nil {
		// Connected or forming: since the webhook first saw it so.
		st.Since = v.sinceBefore(z, st.State)
		if st.Since == nil {
			st.Since = ptrTime(now)
		}
	}
	slices.SortFunc(members, func(a, b *corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	for _, n := range members {
		m, err := v.member(n, z, valid, asOf)
		if err != nil {
			return nil, err
		}
		if m.Vouched && m.Ready == string(corev1.ConditionUnknown) {
			st.Protected++
		}
		if m.FailedOver {
			st.FailedOver++
		}
		st.Members = append(st.Members, m)
	}
	return st, nil
}

// sinceBefore is since when zone z has been in state as the last pass, or
// else the stored EdgeZone, saw it; nil if neither did.
func (v *zoneViewer) sinceBefore(z string, state ZoneState) *metav1.Time {
	if snap := v.latest.Load(); snap != nil {
		if st := snap.zones[z]; st != nil && st.State == state {
			return st.Since
		}
		return nil
	}
	if w := v.written[z]; w != nil && w.status.State == state {
		return w.status.Since
	}
	return nil
}

// member is what the webhook makes of node n of zone z, with its peers' word
// as of asOf under the zone's honoured claim valid (nil: none).
func (v *zoneViewer) member(n *corev1.Node, z string, valid *claim, asOf time.Time) (EdgeZoneMember, error) {
	d := v.decider
	dec, kept, _, err := d.decide(n)
	if err != nil {
		return EdgeZoneMember{}, err
	}
	m := EdgeZoneMember{Name: n.Name, Vouched: dec.Vouched, Reason: string(dec.Reason)}
	if kept != nil {
		m.Verdict = string(kept.verdict.State)
	}
	if c := readyCondition(n.Status.Conditions); c != nil {
		m.Ready = string(c.Status)
	}
	_, m.FailedOver = n.Annotations[outOfServiceAnnotation]
	if valid != nil {
		m.ReachedBy, m.DownBy = d.evidence.peerWord(n.Name, z, d.leaseTerm(valid), asOf)
	}
	return m, nil
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

// write stores st as zone z's EdgeZone, creating it if need be, and records an
// Event when its state changed.
func (v *zoneViewer) write(ctx context.Context, z string, st *EdgeZoneStatus) error {
	w := v.written[z]
	if w == nil {
		name := edgeZoneName(z)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": EdgeZoneResource.GroupVersion().String(),
			"kind":       "EdgeZone",
			"metadata": map[string]any{
				"name":   name,
				"labels": map[string]any{EdgeZoneZoneLabel: z},
			},
			"spec": map[string]any{"zone": z},
		}}
		created, err := v.client.Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			created, err = v.client.Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("create EdgeZone %s: %w", name, err)
		}
		w = &writtenZone{name: name, uid: created.GetUID()}
		v.written[z] = w
	}
	b, err := json.Marshal([]map[string]any{{"op": "add", "path": "/status", "value": st}})
	if err != nil {
		return fmt.Errorf("encode EdgeZone %s status: %w", w.name, err)
	}
	if _, err := v.client.Patch(ctx, w.name, types.JSONPatchType, b, metav1.PatchOptions{FieldManager: fieldManager}, "status"); err != nil {
		if apierrors.IsNotFound(err) {
			delete(v.written, z) // deleted by someone: created anew next pass
		}
		return fmt.Errorf("write EdgeZone %s status: %w", w.name, err)
	}
	prev := w.status.State
	w.status = *st
	if prev != st.State {
		v.stateChanged(w, z, prev, st)
	}
	return nil
}

// Reasons of the Events on an EdgeZone: the state it entered.
const (
	EventZoneConnected = "ZoneConnected"
	EventZoneCutOff    = "ZoneCutOff"
	EventZoneNoLeader  = "ZoneNoLeader"
	EventZoneForming   = "ZoneForming"
)

// stateChanged records zone z's new state as an Event on its EdgeZone.
func (v *zoneViewer) stateChanged(w *writtenZone, z string, prev ZoneState, st *EdgeZoneStatus) {
	typ, reason, note := corev1.EventTypeNormal, EventZoneConnected, ""
	switch st.State {
	case ZoneConnected:
		note = fmt.Sprintf("zone %s reaches the cloud: %s leads it in term %d", z, st.Leader, st.Term)
	case ZoneForming:
		reason, note = EventZoneForming, fmt.Sprintf("zone %s has no zone Lease the webhook honours yet", z)
	case ZoneNoLeader:
		typ, reason = corev1.EventTypeWarning, EventZoneNoLeader
		note = fmt.Sprintf("zone %s has had no leader since %s while the cloud still hears its kubelets: its quorum is lost, and none of its nodes is protected",
			z, st.Since.UTC().Format(time.RFC3339))
	case ZoneCutOff:
		typ, reason = corev1.EventTypeWarning, EventZoneCutOff
		note = fmt.Sprintf("zone %s lost the cloud at %s; its vouched nodes stay protected until %s",
			z, st.Since.UTC().Format(time.RFC3339), st.ProtectedUntil.UTC().Format(time.RFC3339))
	}
	v.log.Info(note, "zone", z, "from", prev, "to", st.State)
	if v.events == nil {
		return
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(EdgeZoneResource.GroupVersion().String())
	obj.SetKind("EdgeZone")
	obj.SetName(w.name)
	obj.SetUID(w.uid)
	v.events.recordOn(obj, typ, reason, "Observe", note)
}

// edgeZoneName is the EdgeZone name of zone z: z itself when it is a valid
// object name, else its zone Lease's name, which is.
func edgeZoneName(z string) string {
	if len(validation.IsDNS1123Subdomain(z)) == 0 {
		return z
	}
	return zone.LeaseName(z)
}
