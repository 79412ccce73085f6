package apiwriter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// Annotations on the zone Lease besides zone.LeaseTermAnnotation.
const LeaseMembersAnnotation = "edgequorum.io/members"

// leaseState caches the last Lease this member wrote, so a renewal is a single
// Update; only a conflict costs a read. Guarded by Writer.mu.
type leaseState struct {
	obj  *coordinationv1.Lease
	term uint64
	// quiet says whether it was a quiet renewal, written at at.
	quiet bool
	at    time.Time
}

// EvidenceSource gathers the members' signed word for the zone Lease: the
// quorum's evidence (which members the cloud cannot hear from, and each
// member's word on which of them it reaches) and the votes that this member
// leads in its term. raftzone.Member implements it.
type EvidenceSource interface {
	// WantEvidence lists the members that need it now.
	WantEvidence() []string
	// GatherEvidence asks every member about nodes.
	GatherEvidence(ctx context.Context, nodes []string) []zone.Attestation
	// Leadership returns the term this member leads in and the members'
	// votes that it does.
	Leadership(ctx context.Context) (uint64, []zone.LeaderVote)
}

// Gather makes the writer carry the quorum's evidence in its zone Lease
// renewals while some member needs it; until it is called, it carries none.
func (w *Writer) Gather(src EvidenceSource) {
	w.mu.Lock()
	w.evidence = src
	w.mu.Unlock()
}

// evidenceCheck is how often the leader looks whether a member started to need
// evidence, to renew at once rather than at the next renewal: the controller
// manager marks a node Unknown after its grace period, and the evidence must
// be in the cloud by then.
const evidenceCheck = time.Second

func (w *Writer) leaseLoop(ctx context.Context) {
	t := w.clock.NewTicker(w.cfg.LeaseRenew)
	defer t.Stop()
	check := gridtick.NewOn(w.clock, slots.ZoneGrid(w.cfg.Zone), w.cfg.HealthPeriod, evidenceCheck, rand.Float64())
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if w.quietNotDue() {
				continue
			}
		case <-w.renewNow:
		case <-check.C():
			check.Next()
			if !w.newlyWanted() && !w.votesSoon() {
				continue
			}
		}
		if err := w.renewLease(ctx); err != nil && ctx.Err() == nil {
			w.log.Info("zone lease not renewed", "err", err)
		}
	}
}

// RenewLease renews the zone Lease now if this member leads; exported for tests
// and for the agent to renew right after winning leadership.
func (w *Writer) RenewLease(ctx context.Context) error { return w.renewLease(ctx) }

func (w *Writer) renewLease(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	term, err := w.fence.VerifyLeader(ctx)
	if err != nil {
		w.mu.Lock()
		w.lease = leaseState{}
		w.mu.Unlock()
		return nil // followers do not renew
	}
	w.mu.Lock()
	cached := w.lease
	w.mu.Unlock()
	var (
		evidence, leadership string
		wanted               []string
		atts                 []zone.Attestation
		wg                   sync.WaitGroup
	)
	format := w.formatLevel(ctx)
	wg.Go(func() { evidence, wanted, atts = w.gather(ctx) })
	wg.Go(func() { leadership = w.votes(ctx, term) })
	wg.Wait()
	quiet := w.quiet(format, wanted, atts)
	leases := w.client.Leases(w.cfg.LeaseNamespace)
	name := zone.LeaseName(w.cfg.Zone)
	cur := cached.obj
	if cur == nil || cached.term != term {
		got, err := leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			created, err := leases.Create(ctx, w.leaseObject(nil, term, format, evidence, leadership, quiet), metav1.CreateOptions{FieldManager: "edgequorum"})
			if err := w.observe(err); err != nil {
				w.metrics.writes.WithLabelValues("lease", "error").Inc()
				return fmt.Errorf("create zone lease %s/%s: %w", w.cfg.LeaseNamespace, name, err)
			}
			w.leaseWritten(created, term, wanted, quiet)
			w.leaderEvent(ctx, created, term, "")
			return nil
		case w.observeRead(err) != nil:
			return fmt.Errorf("read zone lease %s/%s: %w", w.cfg.LeaseNamespace, name, err)
		}
		cur = got
	}
	if t, _ := strconv.ParseUint(cur.Annotations[zone.LeaseTermAnnotation], 10, 64); t > term {
		// A newer leader's, or a term the zone never had: only a quorum
		// that confirms us again tells them apart.
		if err := w.confirmForged(ctx, "lease", name, strconv.FormatUint(t, 10)); err != nil {
			w.metrics.skipped.WithLabelValues("fenced").Inc()
			return fmt.Errorf("zone lease held under term %d, we lead term %d: %w", t, term, err)
		}
	}
	updated, err := leases.Update(ctx, w.leaseObject(cur, term, format, evidence, leadership, quiet), metav1.UpdateOptions{FieldManager: "edgequorum"})
	if err := w.observe(err); err != nil {
		w.metrics.writes.WithLabelValues("lease", "error").Inc()
		w.mu.Lock()
		w.lease = leaseState{} // re-read next time (conflict or worse)
		w.mu.Unlock()
		return fmt.Errorf("renew zone lease %s/%s: %w", w.cfg.LeaseNamespace, name, err)
	}
	w.leaseWritten(updated, term, wanted, quiet)
	if was := ptr.Deref(cur.Spec.HolderIdentity, ""); was != w.cfg.Node {
		w.leaderEvent(ctx, updated, term, was)
	}
	return nil
}

// leaderEvent records on the zone Lease l that this node took it over under
// term from was ("" for a new zone).
func (w *Writer) leaderEvent(ctx context.Context, l *coordinationv1.Lease, term uint64, was string) {
	note := fmt.Sprintf("%s leads zone %s from term %d", w.cfg.Node, w.cfg.Zone, term)
	if was != "" {
		note += "; " + was + " held the zone Lease before"
	}
	w.recordEvent(ctx, l.Namespace, kubeclient.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease",
		Namespace: l.Namespace, Name: l.Name, UID: l.UID}, EventLeaderChanged, kubeclient.EventTypeNormal, "Lead", note)
}

func (w *Writer) leaseWritten(l *coordinationv1.Lease, term uint64, wanted []string, quiet bool) {
	w.metrics.writes.WithLabelValues("lease", "ok").Inc()
	if quiet {
		w.metrics.leaseQuiet.Set(1)
	} else {
		w.metrics.leaseQuiet.Set(0)
	}
	now := w.clock.Now()
	w.mu.Lock()
	w.lease = leaseState{obj: l, term: term, quiet: quiet, at: now}
	w.wanted = wanted
	w.lastWrite = now
	w.mu.Unlock()
}

// quietAfter is how many renewal periods a leader stays busy after the last
// renewal that had to be: a member whose link flaps would otherwise switch
// the zone between busy and quiet at every flap.
const quietAfter = 6

// quiet decides whether the renewal about to be made, carrying the
// attestations atts gathered for wanted, may be quiet (of
// zone.LeaseQuietFormat, lasting QuietDuration), and remembers one that may
// not. It may when every reader reads that format, no member needs its peers'
// word that they reach it (a member whose committed verdict is unhealthy
// needs only their word that it is down, which a quiet renewal carries too,
// once a majority of its peers give it: until then the next renewal must not
// wait a quiet period for theirs), the last renewal carried a majority's
// votes, and no renewal had to be busy for quietAfter periods. The webhook holds a quiet
// renewal to that: it vouches, on it, for no node the cloud cannot hear, and
// a zone whose every kubelet falls silent after it is one cut off
// (admission.Decider).
func (w *Writer) quiet(format skew.Level, wanted []string, atts []zone.Attestation) bool {
	busy := len(w.needReach(wanted)) > 0 || len(w.downShort(wanted, atts)) > 0
	if !busy {
		voters := w.voters()
		w.mu.Lock()
		busy = w.evidence != nil && w.votesCarried < voters/2+1
		w.mu.Unlock()
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if busy {
		w.busyUntil = now.Add(quietAfter * w.cfg.LeaseRenew)
	}
	return !busy && w.cfg.QuietRenew > 0 && skew.Reads(format, zone.LeaseQuietFormat) && !now.Before(w.busyUntil)
}

// needReach is the members of wanted that need their peers' word that they
// reach them: all but those whose committed verdict is unhealthy.
func (w *Writer) needReach(wanted []string) []string {
	src := w.followed()
	if src == nil {
		return wanted
	}
	return slices.DeleteFunc(slices.Clone(wanted), func(n string) bool {
		v, ok := src.CommittedVerdict(n)
		return ok && v.State == zone.Unhealthy
	})
}

// downShort is the members of wanted whose committed verdict is unhealthy
// and whom fewer than a majority of their peers find down in atts: the
// webhook counts such a member alive when the zone goes dark on a quiet
// renewal (admission.Decider), so the renewals that gather its peers' word
// must come at the busy pace until the word is in. A member that withholds
// its word can keep its zone busy, which costs the old cadence's writes and
// nothing else: a busy renewal promises less than a quiet one.
func (w *Writer) downShort(wanted []string, atts []zone.Attestation) []string {
	src := w.followed()
	if src == nil {
		return nil
	}
	peers := w.voters() - 1
	var short []string
	for _, n := range wanted {
		if v, ok := src.CommittedVerdict(n); !ok || v.State != zone.Unhealthy {
			continue
		}
		down := 0
		for _, a := range atts {
			if a.Signer != n && a.FindsDown(n) {
				down++
			}
		}
		if down < peers/2+1 {
			short = append(short, n)
		}
	}
	return short
}

// quietNotDue reports whether the last Lease written was a quiet renewal
// that needs no renewal yet: the renewal ticks come every LeaseRenew, so a
// quiet renewal is made at the tick nearest QuietRenew after the last.
func (w *Writer) quietNotDue() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lease.obj != nil && w.lease.quiet && w.clock.Since(w.lease.at)+w.cfg.LeaseRenew/2 < w.cfg.QuietRenew
}

// gather returns the evidence annotation's value for this renewal ("" when no
// member needs it, or nothing gathers it), the members it was wanted for, and
// the attestations it holds.
func (w *Writer) gather(ctx context.Context) (string, []string, []zone.Attestation) {
	w.mu.Lock()
	src := w.evidence
	w.mu.Unlock()
	if src == nil {
		return "", nil, nil
	}
	want := w.unmarked(src.WantEvidence())
	if len(want) == 0 {
		return "", nil, nil
	}
	atts := src.GatherEvidence(ctx, want)
	w.metrics.evidence.Set(float64(len(want)))
	return zone.FormatEvidence(atts), want, atts
}

// soonRetriesPerTerm bounds the renewals a leader brings forward in one term,
// and again each time the zone grows, while its Lease carries the votes of no
// majority: the members that have not seen its election yet see it within a
// heartbeat or a spare's view sync, and a zone whose majority is gone would
// otherwise be renewed every second. The zone grows only by a Node the cloud
// labels, so no edge credential can reset the count, and the leader's
// once-a-second check bounds the rate whatever happens.
const soonRetriesPerTerm = 10

// votes returns the leadership annotation's value for a renewal under term:
// the members' votes that this member leads in it ("" when nothing gathers
// them, or they are for another term), and notes how many it carried, so that
// a renewal short of a majority is followed by a sooner one.
func (w *Writer) votes(ctx context.Context, term uint64) string {
	w.mu.Lock()
	src := w.evidence
	w.mu.Unlock()
	if src == nil {
		return ""
	}
	vt, votes := src.Leadership(ctx)
	if vt != term {
		votes = nil
	}
	votes = carried(votes, w.cfg.Node, w.voters())
	w.mu.Lock()
	if w.votesTerm != term {
		w.votesTerm, w.soonRetries, w.soonFor = term, 0, 0
	}
	w.votesCarried = len(votes)
	w.mu.Unlock()
	w.metrics.leaderVotes.Set(float64(len(votes)))
	return zone.FormatLeadership(votes)
}

// voters is how many members a majority of votes is counted against: the
// zone's members as the leader last committed them, or the zone's Nodes when
// they are more. The webhook counts the Nodes, and a zone's founder leads
// alone for a moment before the others join: its lone vote must not pass
// for a majority then.
func (w *Writer) voters() int {
	n := 0
	if w.facts != nil {
		n = w.facts.MemberCount()
	}
	src := w.followed()
	if src != nil {
		n = max(n, len(src.ZoneNodes()))
	}
	return n
}

// carried is the votes a renewal carries: a majority of members and one more,
// for a webhook that counts a node the zone has not admitted yet, the
// leader's own first, then by signer. More would only cost bytes: at 129
// members every vote is about 14 KB per renewal, a majority and one 7 KB.
func carried(votes []zone.LeaderVote, self string, members int) []zone.LeaderVote {
	keep := members/2 + 2
	if len(votes) <= keep {
		return votes
	}
	out := make([]zone.LeaderVote, 0, keep)
	if i := slices.IndexFunc(votes, func(v zone.LeaderVote) bool { return v.Signer == self }); i >= 0 {
		out = append(out, votes[i])
	}
	for _, v := range votes {
		if len(out) == keep {
			break
		}
		if v.Signer != self {
			out = append(out, v)
		}
	}
	return out
}

// votesSoon reports whether the Lease should be renewed before its time
// because the last one carried the votes of no majority of the zone as it is
// now, and counts it. The count starts over when the zone grows: members that
// just joined vote within a heartbeat, and the webhook counts them at once.
func (w *Writer) votesSoon() bool {
	voters := w.voters()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lease.obj == nil || w.votesTerm != w.lease.term || w.votesCarried >= voters/2+1 {
		return false
	}
	if voters > w.soonFor {
		w.soonFor, w.soonRetries = voters, 0
	}
	if w.soonRetries >= soonRetriesPerTerm {
		return false
	}
	w.soonRetries++
	return true
}

// unmarked adds to nodes the members whose Node the cloud marked Ready
// Unknown (their kubelet is silent, whatever their agent reports) and leaves
// out those the webhook's failover has marked out of service: it has acted on
// them, and their evidence would only cost bytes.
func (w *Writer) unmarked(nodes []string) []string {
	src := w.followed()
	if src == nil {
		return nodes
	}
	marked := map[string]bool{}
	for _, n := range src.ZoneNodes() {
		if _, ok := n.Annotations[zone.OutOfServiceAnnotation]; ok {
			marked[n.Name] = true
			continue
		}
		for _, c := range n.Status.Conditions {
			// The leader's own Node too: its peers speak for it.
			if c.Type == kubeclient.NodeReady && c.Status == zonek8s.ConditionUnknown && !slices.Contains(nodes, n.Name) {
				nodes = append(nodes, n.Name)
			}
		}
	}
	nodes = slices.DeleteFunc(nodes, func(n string) bool { return marked[n] })
	slices.Sort(nodes)
	return nodes
}

// newlyWanted reports whether a member needs evidence that the last Lease
// written did not gather for.
func (w *Writer) newlyWanted() bool {
	w.mu.Lock()
	src, written, held := w.evidence, w.wanted, w.lease.obj != nil
	w.mu.Unlock()
	if src == nil || !held {
		return false
	}
	for _, n := range w.unmarked(src.WantEvidence()) {
		if !slices.Contains(written, n) {
			return true
		}
	}
	return false
}

// leaseObject returns the Lease to write: cur renewed by us under term, or a new
// one when cur is nil, in the format of level format, signed with our node
// key, carrying evidence and the members' votes for our leadership (none
// when empty), quiet or not (quiet).
func (w *Writer) leaseObject(cur *coordinationv1.Lease, term uint64, format skew.Level, evidence, leadership string, quiet bool) *coordinationv1.Lease {
	// A Lease keeps its times to the microsecond; sign what it keeps.
	now := metav1.NewMicroTime(w.clock.Now().Truncate(time.Microsecond))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: zone.LeaseName(w.cfg.Zone), Namespace: w.cfg.LeaseNamespace,
	}}
	if cur != nil {
		l = cur.DeepCopy()
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[zonek8s.ZoneLabel] = w.cfg.Zone
	members := 0
	if w.facts != nil {
		members = w.facts.MemberCount()
	}
	l.Annotations[zone.LeaseTermAnnotation] = strconv.FormatUint(term, 10)
	l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(zone.LeaseFormat(format))
	if quiet {
		l.Annotations[zone.LeaseFormatAnnotation] = zone.FormatLevel(zone.LeaseQuietFormat)
	}
	l.Annotations[LeaseMembersAnnotation] = strconv.Itoa(members)
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != w.cfg.Node {
		l.Spec.HolderIdentity = ptr.To(w.cfg.Node)
		l.Spec.AcquireTime = &now
		if cur != nil {
			l.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
		}
	}
	l.Spec.LeaseDurationSeconds = ptr.To(seconds(w.cfg.LeaseDuration))
	if quiet {
		l.Spec.LeaseDurationSeconds = ptr.To(seconds(w.cfg.QuietDuration))
	}
	l.Spec.RenewTime = &now
	if e := zone.FormatEndorsements(w.endorsements(term)); e != "" {
		l.Annotations[zone.LeaseEndorsesAnnotation] = e
	} else {
		delete(l.Annotations, zone.LeaseEndorsesAnnotation)
	}
	if evidence != "" {
		l.Annotations[zone.LeaseEvidenceAnnotation] = evidence
	} else {
		delete(l.Annotations, zone.LeaseEvidenceAnnotation)
		w.metrics.evidence.Set(0)
	}
	if leadership != "" {
		l.Annotations[zone.LeaseLeadershipAnnotation] = leadership
	} else {
		delete(l.Annotations, zone.LeaseLeadershipAnnotation)
	}
	l.Annotations[zone.LeaseSignatureAnnotation] = zonek8s.LeaseClaimOf(l).Sign(w.cfg.NodeKey)
	return l
}

// seconds is d in whole seconds, rounded up, as a Lease states durations.
func seconds(d time.Duration) int32 { return int32((d + time.Second - 1) / time.Second) }
