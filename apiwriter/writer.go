package apiwriter

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
)

// Fence confirms leadership. raftzone.Leadership implements it, as does the
// Member itself.
type Fence interface {
	// VerifyLeader returns the leader's term after a quorum confirmed it, or
	// an error when this member does not lead or the quorum did not answer
	// in time.
	VerifyLeader(ctx context.Context) (uint64, error)
	// Term is the term this member believes it leads, unconfirmed, or 0
	// when it does not lead. It tells a failed VerifyLeader of a leader
	// whose quorum was slow from one of a member that lost leadership.
	Term() uint64
}

// NodeVerdicts shows the leader the verdicts its zone's Nodes carry, so that
// the zone Lease can vouch for the ones its predecessors signed instead of
// this leader signing every one again. The agent implements it with its Node
// informer and the zone's committed state.
type NodeVerdicts interface {
	// ZoneNodes are the zone's Nodes as the agent's informer holds them.
	ZoneNodes() []*kubeclient.Node
	// CommittedVerdict is the zone's committed verdict for node, if any.
	CommittedVerdict(node string) (zone.Verdict, bool)
}

// ZoneFacts tells what the zone last committed that the writer keeps to:
// how many members it has, for the zone Lease, and the protocol level every
// member reads (skew.Unannounced before the member found it), for the
// formats it writes.
type ZoneFacts interface {
	MemberCount() int
	ZoneLevel() skew.Level
}

// Writer writes committed verdicts and the zone Lease while this member leads.
// It is safe for concurrent use; Verdicts never blocks.
type Writer struct {
	cfg     Config
	client  kubeclient.Interface
	fence   Fence
	facts   ZoneFacts
	log     *slog.Logger
	clock   clock.WithTicker
	metrics *metrics
	queue   workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	pending map[string]zone.Verdict
	// restoring marks the pending verdicts that Restore queued, so that
	// edgequorum_apiwriter_verdicts_restored_total counts the restores
	// that wrote, not the informer views that lagged behind the Node.
	restoring map[string]bool
	lastWrite time.Time
	reach     reachability
	// lastHealthErr is the last health-check error logged (see healthErr).
	lastHealthErr string
	lease         leaseState
	renewNow      chan struct{}
	nodes         NodeVerdicts
	// sigOK remembers which verdicts on the zone's Nodes verify (see
	// verified).
	sigOK map[string]bool
	// evidence gathers the quorum's evidence; wanted are the members the
	// last Lease written gathered it for.
	evidence EvidenceSource
	wanted   []string
	// votesCarried is how many members' votes the last Lease written
	// carried for its term (votesTerm); soonRetries counts the renewals
	// brought forward in this term because they were short of a majority
	// of soonFor voters.
	votesCarried int
	votesTerm    uint64
	soonRetries  int
	soonFor      int
	// busyUntil is the earliest a renewal may be quiet again: a while
	// after the last one that had to be busy (lease.go, quiet).
	busyUntil time.Time
	// webhook is what the webhook's Lease said when last read (format.go);
	// lastFormat the level of the formats last written.
	webhook    webhookLevel
	lastFormat atomic.Uint32
}

// webhookLevel is the level every webhook replica reads, and when it was
// read (zero: never).
type webhookLevel struct {
	level skew.Level
	read  time.Time
}

// New returns a Writer; Run starts it.
func New(cfg Config, client kubeclient.Interface, fence Fence, facts ZoneFacts) (*Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Writer{
		cfg: cfg, client: client, fence: fence, facts: facts,
		log:       cfg.Logger.With("zone", cfg.Zone, "node", cfg.Node),
		clock:     cfg.Clock,
		metrics:   newMetrics(cfg.Registerer),
		pending:   map[string]zone.Verdict{},
		restoring: map[string]bool{},
		renewNow:  make(chan struct{}, 1),
		sigOK:     map[string]bool{},
	}
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.RetryBase, cfg.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: cfg.Clock})
	return w, nil
}

// Verdicts queues committed verdicts (raftzone.VerdictSink). Only the newest
// verdict per node is kept, so a long outage costs one write per node on
// reconnect, not one per change.
func (w *Writer) Verdicts(term uint64, vs []zone.Verdict, resync bool) {
	w.mu.Lock()
	for _, v := range vs {
		if cur, ok := w.pending[v.Node]; ok && cur.Term > v.Term {
			continue
		}
		w.pending[v.Node] = v
		delete(w.restoring, v.Node)
	}
	w.metrics.pending.Set(float64(len(w.pending)))
	w.mu.Unlock()
	for _, v := range vs {
		w.queue.Add(v.Node)
	}
	if resync {
		// A new leader: take the zone Lease now rather than at the next
		// renewal, so the webhook sees a live quorum without a gap.
		w.kickRenewal()
	}
}

// kickRenewal makes the lease loop renew the zone Lease now (if this member
// leads) rather than at its next tick.
func (w *Writer) kickRenewal() {
	select {
	case w.renewNow <- struct{}{}:
	default:
	}
}

// Follow lets the writer see the verdicts on the zone's Nodes; until it is
// called, the writer signs every verdict it leaves standing itself.
func (w *Writer) Follow(nodes NodeVerdicts) {
	w.mu.Lock()
	w.nodes = nodes
	w.mu.Unlock()
}

// followed is what Follow gave, nil before.
func (w *Writer) followed() NodeVerdicts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes
}

// LastWrite is when the last API write succeeded (zero if none yet).
func (w *Writer) LastWrite() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastWrite
}

// Pending is how many verdicts wait to be written.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Run writes until ctx ends: one worker drains the verdict queue, one loop renews
// the zone Lease, one checks apiserver health.
func (w *Writer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, f := range []func(context.Context){w.healthLoop, w.leaseLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for w.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	return nil
}

func (w *Writer) processNext(ctx context.Context) bool {
	node, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(node)
	w.mu.Lock()
	v, ok := w.pending[node]
	w.mu.Unlock()
	if !ok {
		w.queue.Forget(node)
		return true
	}
	wrote, err := w.writeVerdict(ctx, v)
	switch {
	case err == nil:
		w.queue.Forget(node)
		w.mu.Lock()
		restore := wrote && w.restoring[node]
		if restore {
			// Counted before the verdict leaves pending, so whoever
			// sees the queue drained sees the count.
			w.metrics.restored.Inc()
		}
		if cur, ok := w.pending[node]; ok && cur == v {
			delete(w.pending, node)
			delete(w.restoring, node)
		}
		w.metrics.pending.Set(float64(len(w.pending)))
		w.mu.Unlock()
		if restore {
			w.log.Info("node did not carry its committed verdict; wrote it again", "peer", v.Node, "state", v.State, "term", v.Term)
		}
	case errors.Is(err, errFenced) && w.fence.Term() != 0:
		// The quorum did not confirm us in time, but we still lead: no
		// one else will write this verdict, so it stays and is retried
		// (and fenced again) with backoff.
		w.metrics.skipped.WithLabelValues("unconfirmed").Inc()
		w.log.Info("leadership not confirmed in time; will retry", "peer", node, "err", err)
		w.queue.AddRateLimited(node)
	case errors.Is(err, errFenced):
		// A new leader re-delivers every committed verdict; drop ours so a
		// deposed leader never writes them late.
		w.dropPending()
	default:
		w.log.Info("verdict write failed; will retry", "peer", node, "err", err)
		w.queue.AddRateLimited(node)
	}
	return true
}

func (w *Writer) dropPending() {
	w.mu.Lock()
	for node := range w.pending {
		w.queue.Forget(node)
	}
	w.pending = map[string]zone.Verdict{}
	w.restoring = map[string]bool{}
	w.metrics.pending.Set(0)
	w.mu.Unlock()
	w.metrics.skipped.WithLabelValues("not_leader").Inc()
}

// errFenced means a write was not made because this member does not lead
// the term it would be made under: it is no leader now, or the verdict or
// object carries another term.
var errFenced = errors.New("fenced: this member does not lead the term")

// writeVerdict writes the node's verdict annotation and its EdgeQuorum
// condition where either differs, in one nodes/status write, fenced by term
// and guarded against a concurrent change of the annotation itself
// (verdictPatch). It reports whether it wrote: a Node that already holds the
// verdict, or is gone, costs the read alone.
func (w *Writer) writeVerdict(ctx context.Context, v zone.Verdict) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	term, err := w.fence.VerifyLeader(ctx)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errFenced, err)
	}
	if v.Term > term {
		return false, fmt.Errorf("%w: verdict from term %d, we lead term %d", errFenced, v.Term, term)
	}
	node, err := w.client.Nodes().Get(ctx, v.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		w.metrics.skipped.WithLabelValues("gone").Inc()
		return false, nil
	}
	if err := w.observeRead(err); err != nil {
		return false, fmt.Errorf("read node %s: %w", v.Node, err)
	}
	if w.superseded(v) {
		w.metrics.skipped.WithLabelValues(skipSuperseded).Inc()
		return false, nil
	}
	want := w.signed(v, term, w.formatLevel(ctx))
	raw, had := node.Annotations[zone.AnnotationKey]
	value := ""
	switch skip := holds(node.Annotations, want, term, w.predecessorSigned(v.Node, term)); skip {
	case skipUnchanged:
		if showsVerdict(node, want) {
			w.metrics.skipped.WithLabelValues(skip).Inc()
			return false, nil
		}
		// The annotation stands; only the condition is written.
	case forgedTerm:
		if err := w.confirmForged(ctx, "node", v.Node, node.Annotations[zone.AnnotationKey]); err != nil {
			return false, err
		}
		fallthrough
	default:
		b, err := json.Marshal(want)
		if err != nil {
			return false, err
		}
		value = string(b)
	}
	patch, err := verdictPatch(node, raw, had, value, want)
	if err != nil {
		return false, err
	}
	_, err = w.client.Nodes().Patch(ctx, v.Node, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: "edgequorum"}, "status")
	if err := w.observe(err); err != nil {
		w.metrics.writes.WithLabelValues("node", "error").Inc()
		return false, fmt.Errorf("write verdict on node %s: %w", v.Node, err)
	}
	w.metrics.writes.WithLabelValues("node", "ok").Inc()
	w.mu.Lock()
	w.lastWrite = w.clock.Now()
	w.mu.Unlock()
	w.log.Info("wrote verdict", "peer", v.Node, "state", v.State, "term", v.Term, "annotation", value != "")
	// A verdict written again (re-signed, or restored over an edit) with
	// the state the Node showed is no news.
	if prev, err := zone.ParseAnnotation(raw); !had || err != nil || prev.State != v.State {
		reason, typ, note := verdictEvent(v)
		w.recordEvent(ctx, metav1.NamespaceDefault, kubeclient.ObjectReference{APIVersion: "v1", Kind: "Node", Name: v.Node, UID: node.UID},
			reason, typ, "Judge", note)
	}
	return true, nil
}

// showsVerdict reports whether node's EdgeQuorum condition shows verdict a.
func showsVerdict(node *kubeclient.Node, a zone.Annotation) bool {
	prev, _ := zonek8s.FindCondition(node.Status.Conditions)
	return prev != nil && zonek8s.SameCondition(*prev, zonek8s.Condition(a, prev))
}

// Why the writer leaves a node's annotation alone; values of the reason label
// of edgequorum_apiwriter_skipped_total.
const (
	skipUnchanged = "unchanged"
	// skipSuperseded: the verdict queued is no longer the zone's committed
	// one (a newer one is on its way).
	skipSuperseded = "superseded"
)

// forgedTerm is holds' answer for a verdict under a term above the one the
// writer leads: one the zone may never have had (see confirmForged).
const forgedTerm = "forged-term"

// holds says why annotations need no write of want, the committed verdict
// signed by this member leading leaderTerm: they already carry that decision
// (skipUnchanged), signed by us or by another member (endorsed, if endorsed
// says so). It returns "" when want must be written over whatever else is
// there, whatever its decision term: the committed verdict is the zone's
// word, and want's signing term is the newest this leader knows. It returns
// forgedTerm when the annotation claims to be signed under a term above
// leaderTerm: by a newer leader this one does not know of yet, or forged.
func holds(annotations map[string]string, want zone.Annotation, leaderTerm uint64, endorsed func(zone.Annotation) bool) string {
	raw, ok := annotations[zone.AnnotationKey]
	if !ok {
		return ""
	}
	cur, err := zone.ParseAnnotation(raw)
	switch {
	case err != nil:
		return ""
	case cur.SigningTerm() > leaderTerm:
		return forgedTerm
	case sameDecision(cur, want) && len(cur.Sig) > 0 && (cur.Signer == want.Signer || endorsed(cur)):
		return skipUnchanged
	}
	return ""
}

// sameDecision reports whether a and b state the same decision: every field
// but who signed it, when and how.
func sameDecision(a, b zone.Annotation) bool {
	return a.State == b.State && a.Zone == b.Zone && a.Term == b.Term && a.Leader == b.Leader && a.At.Equal(b.At) &&
		a.Pros == b.Pros && a.Cons == b.Cons && a.Members == b.Members
}

// superseded reports whether v is no longer the zone's committed verdict for
// its node: the committed one is newer, and queued or on its way. A leader
// may hold an older verdict queued from an earlier term when it leads again.
func (w *Writer) superseded(v zone.Verdict) bool {
	src := w.followed()
	if src == nil {
		return false
	}
	c, ok := src.CommittedVerdict(v.Node)
	return ok && (c.Term > v.Term || c.Term == v.Term && c.DecidedAt.After(v.DecidedAt))
}

// confirmForged decides what a term above ours means, on an object (a Node's
// verdict or the zone Lease) read after VerifyLeader confirmed us. A leader
// of a higher term needs a quorum to have moved to that term, and such a
// quorum no longer confirms us. So if a quorum confirms us again now, after
// the read, no such leader existed when the object was read: the term is one
// the zone never had, written by hand or by a stolen credential, and letting
// it fence us would let one write pin the zone's verdicts (a term of 2^64-1
// is never outgrown). confirmForged returns nil when the object may be
// overwritten, errFenced otherwise.
func (w *Writer) confirmForged(ctx context.Context, kind, name, found string) error {
	if _, err := w.fence.VerifyLeader(ctx); err != nil {
		return fmt.Errorf("%w: %s %s carries a newer term: %w", errFenced, kind, name, err)
	}
	w.metrics.forged.WithLabelValues(kind).Inc()
	w.log.Warn("overwriting a term the zone never had", "kind", kind, "name", name, "found", found)
	return nil
}

// predecessorSigned returns the test holds applies to a verdict on node that
// this leader, leading term, did not sign: it stands if the zone Lease names
// it (see endorsements).
func (w *Writer) predecessorSigned(node string, term uint64) func(zone.Annotation) bool {
	return func(a zone.Annotation) bool {
		d, ok := w.endorsements(term)[node]
		return ok && len(a.Sig) > 0 && d == zone.VerdictDigest(a.Sig)
	}
}

// maxEndorsesBytes bounds the LeaseEndorsesAnnotation value, in step with
// the size deploy/agent's policy allows it (16 KiB): a Lease the policy
// refused would cost the zone its protection. Verdicts past it, in name
// order, are signed again instead, one write each.
const maxEndorsesBytes = 16 << 10

// endorsements are the verdicts other members signed that stand on the zone's
// Nodes, node → zone.VerdictDigest: each states the zone's committed verdict,
// signed under a term no later than term (ours), with the key its signer's
// Node registers; in name order, as many as maxEndorsesBytes holds. The zone
// Lease names them, so it vouches for nothing else their signers sign.
func (w *Writer) endorsements(term uint64) map[string]string {
	src := w.followed()
	out := map[string]string{}
	if src == nil {
		return out
	}
	nodes := src.ZoneNodes()
	slices.SortFunc(nodes, func(a, b *kubeclient.Node) int { return strings.Compare(a.Name, b.Name) })
	keys := nodeKeys(nodes)
	size := 0
	for _, n := range nodes {
		raw, ok := n.Annotations[zone.AnnotationKey]
		if !ok {
			continue
		}
		a, err := zone.ParseAnnotation(raw)
		if err != nil || a.Signer == "" || a.Signer == w.cfg.Node || a.SigningTerm() > term {
			continue
		}
		v, ok := src.CommittedVerdict(n.Name)
		if !ok || !sameDecision(a, zone.AnnotationFor(w.cfg.Zone, v, skew.Oldest())) || !w.verified(n.Name, raw, &a, keys[a.Signer]) {
			continue
		}
		d := zone.VerdictDigest(a.Sig)
		if size += len(n.Name) + len(d) + 2; size > maxEndorsesBytes {
			break
		}
		out[n.Name] = d
	}
	return out
}

// verified reports whether a, read from raw on node, verifies under pub,
// remembering the answer: the zone's verdicts change once per verdict change,
// the endorsements are read with every Lease renewal and Node event.
func (w *Writer) verified(node, raw string, a *zone.Annotation, pub ed25519.PublicKey) bool {
	k := node + "\x00" + raw + "\x00" + string(pub)
	w.mu.Lock()
	ok, known := w.sigOK[k]
	w.mu.Unlock()
	if known {
		return ok
	}
	ok = a.Verify(node, pub)
	w.mu.Lock()
	if len(w.sigOK) >= maxVerifiedMemo {
		clear(w.sigOK)
	}
	w.sigOK[k] = ok
	w.mu.Unlock()
	return ok
}

// maxVerifiedMemo bounds Writer.sigOK; past it, it starts over.
const maxVerifiedMemo = 1 << 12

// nodeKeys are the node keys the Nodes register, by node name.
func nodeKeys(nodes []*kubeclient.Node) map[string]ed25519.PublicKey {
	keys := make(map[string]ed25519.PublicKey, len(nodes))
	for _, n := range nodes {
		if k, err := zone.ParseNodeKey(n.Annotations[zone.NodeKeyAnnotation]); err == nil {
			keys[n.Name] = k
		}
	}
	return keys
}

// signed is the annotation for committed verdict v as this member writes it
// leading term, in the format of level format: signed with its node key
// under that term, whoever decided v.
func (w *Writer) signed(v zone.Verdict, term uint64, format skew.Level) zone.Annotation {
	a := zone.AnnotationFor(w.cfg.Zone, v, format)
	a.SignedTerm = term
	a.Sign(v.Node, w.cfg.Node, w.cfg.NodeKey)
	return a
}

// Restore queues committed verdict v again if node, as an informer last saw
// it, does not hold it: the Node was deleted and registered anew, or its
// annotation was removed or edited, or it is signed neither by this leader nor
// by another member whose verdict the zone Lease vouches for (the webhook
// honours nothing else), or
// its EdgeQuorum condition does not show it (a Node written before the
// condition existed, or one whose condition was edited).
// Verdicts are written only when they
// change, so without this a lost annotation stays lost, and the node
// unprotected, until its next change or the next leader. Only a leader
// restores; Restore reports whether it queued a write. The write reads the
// Node first, so an informer view that lagged behind it costs one read and
// no write; edgequorum_apiwriter_verdicts_restored_total counts only the
// restores that wrote.
func (w *Writer) Restore(node *kubeclient.Node, v zone.Verdict) bool {
	term := w.fence.Term()
	if term == 0 || node.Name != v.Node {
		return false
	}
	// Whether node holds v does not depend on the format's level (holds
	// and showsVerdict compare decisions), so Restore, on an informer's
	// goroutine, reads nothing to learn it.
	want := w.signed(v, term, skew.Oldest())
	switch holds(node.Annotations, want, term, w.predecessorSigned(node.Name, term)) {
	case skipUnchanged:
		if showsVerdict(node, want) {
			return false
		}
	}
	// Check and queue under one lock: v may be older than a verdict the
	// vote loop queues meanwhile, and must not replace it.
	w.mu.Lock()
	if _, queued := w.pending[v.Node]; queued {
		// A write is on its way; the Node has not caught up yet.
		w.mu.Unlock()
		return false
	}
	w.pending[v.Node] = v
	w.restoring[v.Node] = true
	w.metrics.pending.Set(float64(len(w.pending)))
	w.mu.Unlock()
	w.queue.Add(v.Node)
	w.log.Debug("node does not seem to carry its committed verdict; queued it again", "peer", v.Node, "state", v.State, "term", v.Term)
	return true
}

// annotationPath is the verdict annotation as a JSON pointer (RFC 6901).
var annotationPath = "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(zone.AnnotationKey)

// verdictPatch builds the nodes/status write of verdict a on node as read:
// the annotation (value, or left as it is when value is empty) and the
// EdgeQuorum condition that shows a, so that the two never disagree and a
// verdict change costs one write. Only a change to the annotation itself
// makes it fail: a JSON patch tests for exactly the annotation the writer
// judged against, so the kubelet's status posts and the node lifecycle
// controller's taints, which land on a node just as it dies, cost no
// conflict and second write, yet a verdict written meanwhile by anyone else
// fails the test and is read again. A JSON patch cannot test that a key is
// absent, so the first verdict on a node tests the resourceVersion instead.
// The condition is replaced where the Node holds it, tested by its type, so a
// list that changed order meanwhile fails rather than loses a condition.
func verdictPatch(node *kubeclient.Node, current string, had bool, value string, a zone.Annotation) ([]byte, error) {
	var ops []jsonpatch.Operation
	switch {
	case had:
		ops = append(ops, jsonpatch.NewOperation("test", annotationPath, current))
		if value != "" {
			ops = append(ops, jsonpatch.NewOperation("replace", annotationPath, value))
		}
	case len(node.Annotations) == 0:
		// An empty map is stored as none: add the map, not a key of it.
		ops = append(ops, jsonpatch.NewOperation("test", "/metadata/resourceVersion", node.ResourceVersion),
			jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{zone.AnnotationKey: value}))
	default:
		ops = append(ops, jsonpatch.NewOperation("test", "/metadata/resourceVersion", node.ResourceVersion),
			jsonpatch.NewOperation("add", annotationPath, value))
	}
	prev, i := zonek8s.FindCondition(node.Status.Conditions)
	cond := zonek8s.Condition(a, prev)
	switch {
	case prev != nil:
		at := fmt.Sprintf("/status/conditions/%d", i)
		ops = append(ops, jsonpatch.NewOperation("test", at+"/type", string(zonek8s.ConditionType)), jsonpatch.NewOperation("replace", at, cond))
	case len(node.Status.Conditions) == 0:
		// Add cannot append to a list that is absent; a list added
		// meanwhile fails the resourceVersion test.
		if had {
			ops = append(ops, jsonpatch.NewOperation("test", "/metadata/resourceVersion", node.ResourceVersion))
		}
		ops = append(ops, jsonpatch.NewOperation("add", "/status/conditions", []zonek8s.NodeCondition{cond}))
	default:
		ops = append(ops, jsonpatch.NewOperation("add", "/status/conditions/-", cond))
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode verdict patch: %w", err)
	}
	return patch, nil
}
