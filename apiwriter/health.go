package apiwriter

import (
	"context"
	"errors"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// observe records what err says about reachability and returns it unchanged.
// Answers from the apiserver (even errors such as NotFound or Conflict) prove it
// is reachable; transport failures and server-side unavailability do not.
func (w *Writer) observe(err error) error {
	w.setReachable(!unreachableErr(err))
	return err
}

func (w *Writer) setReachable(ok bool) {
	now := w.clock.Now()
	w.mu.Lock()
	changed := !w.reach.known || w.reach.reachable != ok
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
	if changed {
		if ok {
			w.log.Info("apiserver reachable")
			w.requeuePending()
		} else {
			w.log.Warn("apiserver unreachable")
		}
	}
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

// healthLoop asks the apiserver for its version every HealthPeriod so followers, which never write,
// still know whether they reach the apiserver.
func (w *Writer) healthLoop(ctx context.Context) {
	t := w.clock.NewTicker(w.cfg.HealthPeriod)
	defer t.Stop()
	for {
		w.checkHealth(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (w *Writer) checkHealth(ctx context.Context) {
	// /version is cheap, readable by every identity, and answered by the
	// apiserver itself: exactly the "can we reach it" question.
	// The client's own timeout bounds the call.
	if _, err := w.client.Discovery().ServerVersion(); ctx.Err() == nil {
		w.observe(err)
	}
}
