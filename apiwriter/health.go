package apiwriter

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
)

// reachability is what this member knows of the apiserver: the outcome of the
// last call that could tell. Guarded by Writer.mu.
type reachability struct {
	known     bool
	reachable bool
	since     time.Time
	// lastContact is when the apiserver last answered anything.
	lastContact time.Time
}

// Reachable reports whether the apiserver answered the last call or health
// check (raftzone.APIHealth). Before the first answer it reports false, so a
// member that never reached the cloud is not made leader for writing.
func (w *Writer) Reachable() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reach.known && w.reach.reachable
}

// ReachableSince returns the current reachability and since when it holds.
func (w *Writer) ReachableSince() (bool, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reach.reachable, w.reach.since
}

// LastContact returns when the apiserver last answered a call of this member
// (zero before the first answer), so the zone leader measures an outage from
// there: a call that hangs until its timeout says nothing for that long, and
// must not delay the handover to a voter that reaches the cloud.
func (w *Writer) LastContact() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reach.lastContact
}

// observe records what the outcome err of a write says about reachability and
// returns it unchanged. A write that succeeded proves the apiserver reachable:
// no cache can store one. Transport failures and server-side unavailability
// prove it unreachable. Other refusals (Conflict, Forbidden, ...) prove
// nothing either way, since an edge API proxy cut off from the cloud may
// answer a write with an error of its own making.
func (w *Writer) observe(err error) error {
	switch {
	case err == nil:
		w.setReachable(true)
	case unreachableErr(err):
		w.setReachable(false)
	}
	return err
}

// observeRead is observe for a read, which only ever proves the apiserver
// unreachable: an edge API proxy (OpenYurt's yurthub, SuperEdge's
// lite-apiserver) answers reads from its cache while the cloud is gone, so a
// read that succeeds, or is answered NotFound, says nothing about the link.
func (w *Writer) observeRead(err error) error {
	if unreachableErr(err) {
		w.setReachable(false)
	}
	return err
}

func (w *Writer) setReachable(ok bool) {
	now := w.clock.Now()
	w.mu.Lock()
	changed := !w.reach.known || w.reach.reachable != ok
	back := ok && w.reach.known && !w.reach.reachable
	if changed {
		w.reach = reachability{known: true, reachable: ok, since: now, lastContact: w.reach.lastContact}
	}
	if ok {
		w.reach.lastContact = now
	}
	w.mu.Unlock()
	if ok {
		w.metrics.reachable.Set(1)
	} else {
		w.metrics.reachable.Set(0)
	}
	switch {
	case changed && ok:
		w.log.Info("apiserver reachable")
		w.requeuePending()
		if back {
			// Renew the zone Lease now rather than at the next
			// renewal: back from a cut, the webhook counts the zone
			// led again only from its leader's renewal on.
			w.kickRenewal()
		}
	case changed:
		w.log.Warn("apiserver unreachable")
	}
}

// webhookCallErr reports whether err is the apiserver refusing a write
// because an admission webhook with failurePolicy Fail did not answer (the
// webhook's nodestatus hook, for verdict writes). The apiserver answered, so
// the path to it works: counted as unreachable, a webhook outage would make
// every zone leader hand its leadership on, round after round.
func webhookCallErr(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	s := status.Status()
	return s.Code == http.StatusInternalServerError && strings.Contains(s.Message, "failed calling webhook")
}

// requeuePending flushes coalesced verdicts at once when the apiserver is back,
// instead of waiting out their backoff.
func (w *Writer) requeuePending() {
	w.mu.Lock()
	nodes := make([]string, 0, len(w.pending))
	for n := range w.pending {
		nodes = append(nodes, n)
	}
	w.mu.Unlock()
	for _, n := range nodes {
		w.queue.Forget(n)
		w.queue.Add(n)
	}
}

func unreachableErr(err error) bool {
	if err == nil {
		return false
	}
	var netErr net.Error
	switch {
	case webhookCallErr(err):
		return false
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return true
	case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsTooManyRequests(err):
		return true
	case apierrors.IsUnexpectedServerError(err):
		return true
	}
	var status apierrors.APIStatus
	// Anything the apiserver itself answered proves the path to it works.
	return !errors.As(err, &status)
}

// healthLoop checks every HealthPeriod that the apiserver answers, so
// followers, which never write, still know whether they reach it. After the
// first, the checks keep a random slot of the zone's grid (gridtick), to
// share a wakeup with the member's probes.
func (w *Writer) healthLoop(ctx context.Context) {
	t := gridtick.New(w.clock, slots.ZoneGrid(w.cfg.Zone), w.cfg.HealthPeriod, rand.Float64())
	defer t.Stop()
	for {
		w.checkHealth(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		}
	}
}

// checkHealth asks the apiserver who we are: a SelfSubjectReview is a create,
// which no cache in between can answer (an edge API proxy serves GET /version
// and every read from its cache while the cloud is gone), yet it stores
// nothing and every authenticated identity may make it (system:basic-user;
// the agent's ClusterRole grants it too). Only an answer naming a user proves
// the apiserver reachable; any error, even one a proxy made up, does not. The
// client's own timeout bounds the call.
func (w *Writer) checkHealth(ctx context.Context) {
	review, err := w.client.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if ctx.Err() != nil {
		return
	}
	if err == nil && review.Status.UserInfo.Username == "" {
		err = errors.New("SelfSubjectReview answered without a user")
	}
	if err != nil && !unreachableErr(err) {
		w.healthErr(err)
	}
	w.setReachable(err == nil)
}

// healthErr logs an answer to the health check that is no proof of
// reachability although something answered (a proxy, or an apiserver that
// refuses the review), once per distinct message: it repeats every
// HealthPeriod.
func (w *Writer) healthErr(err error) {
	w.mu.Lock()
	repeated := w.lastHealthErr == err.Error()
	w.lastHealthErr = err.Error()
	w.mu.Unlock()
	if !repeated {
		w.log.Warn("apiserver health check answered with an error; counting the apiserver unreachable", "err", err)
	}
}
