package apiwriter

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/zone"
)

// ReportingController names the zone leader in the Events it records; each
// Event's reportingInstance is the leader's node, which deploy/agent's
// edgequorum-agent-event-writes policy holds to the token's node-name claim,
// so an Event says which node made the claim.
const ReportingController = "edgequorum.io/agent"

// Reasons of the leader's Events. The values are stable: operators filter on
// them.
const (
	EventJudgedHealthy   = "ZoneJudgedHealthy"
	EventJudgedUnhealthy = "ZoneJudgedUnhealthy"
	EventJudgedUnknown   = "ZoneJudgedUnknown"
	EventLeaderChanged   = "ZoneLeaderChanged"
)

// verdictEvent is the Event on the Node for a verdict that changed its state.
func verdictEvent(v zone.Verdict) (reason, typ, note string) {
	typ = kubeclient.EventTypeNormal
	switch v.State {
	case zone.Healthy:
		reason = EventJudgedHealthy
	case zone.Unhealthy:
		reason, typ = EventJudgedUnhealthy, kubeclient.EventTypeWarning
	default:
		reason = EventJudgedUnknown
	}
	note = fmt.Sprintf("zone judged the node %s: %d of %d members found it healthy, %d unhealthy; leader %s, term %d",
		v.State, v.Pros, v.Members, v.Cons, v.Leader, v.Term)
	return reason, typ, note
}

// recordEvent creates an Event about regarding in namespace, as this node.
// Events are rare (one per verdict change, one per new leader) and best
// effort: a failure is counted and logged, never retried, and never holds up
// or fails the write it reports.
func (w *Writer) recordEvent(ctx context.Context, namespace string, regarding kubeclient.ObjectReference, reason, typ, action, note string) {
	now := w.clock.Now()
	ev := &kubeclient.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", regarding.Name, now.UnixNano()), Namespace: namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: ReportingController,
		ReportingInstance:   w.cfg.Node,
		Action:              action,
		Reason:              reason,
		Regarding:           regarding,
		Note:                note,
		Type:                typ,
	}
	if _, err := w.client.Events(namespace).Create(ctx, ev, metav1.CreateOptions{FieldManager: "edgequorum"}); err != nil {
		w.metrics.events.WithLabelValues(reason, "error").Inc()
		w.log.Info("event not recorded", "reason", reason, "regarding", regarding.Name, "err", err)
		return
	}
	w.metrics.events.WithLabelValues(reason, "ok").Inc()
}
