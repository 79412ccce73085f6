package admission

import (
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
)

// Reasons of the Events the webhook records on a Node. The values are stable:
// operators filter on them.
const (
	EventTaintKeptOff    = "UnreachableTaintKeptOff"
	EventPodsKeptReady   = "PodsKeptReady"
	EventEndpointsRevive = "EndpointsRevived"
	EventPodsHandedBack  = "PodsHandedBack"
)

// reportingController names the webhook in the Events it records.
const reportingController = "edgequorum.io/webhook"

// nodeEvent is one Event the webhook records on a Node for a change it made.
type nodeEvent struct {
	node   string
	uid    types.UID
	reason string
	note   string
	// typ is Normal when empty.
	typ string
	// action is the Event's action, "Admit" when empty.
	action string
}

// eventer records what the webhook did on the Nodes it did it for, through
// the events.k8s.io/v1 broadcaster: repeats of the same Event (the node
// lifecycle controller retries a protected node every few seconds through a
// long cut) fold into one Event whose series count grows, written again at
// most every few minutes. A token bucket in front keeps a storm of reviews
// from turning into a storm of Event writes; what it drops is counted.
type eventer struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	limiter     *rate.Limiter
	metrics     *metrics
}

// newEventer returns an eventer writing through client; start begins the
// writes.
func newEventer(client kubernetes.Interface, m *metrics) *eventer {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	return &eventer{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, reportingController),
		// Ten a second, bursts of fifty: a whole zone going Unknown at once
		// is recorded; a review storm is not.
		limiter: rate.NewLimiter(10, 50),
		metrics: m,
	}
}

// start writes recorded Events until stop is closed.
func (e *eventer) start(stop <-chan struct{}) { e.broadcaster.StartRecordingToSink(stop) }

// shutdown stops the broadcaster's goroutines.
func (e *eventer) shutdown() { e.broadcaster.Shutdown() }

func (e *eventer) record(ev nodeEvent) {
	if !e.limiter.Allow() {
		e.metrics.events.WithLabelValues(ev.reason, "rate_limited").Inc()
		return
	}
	e.metrics.events.WithLabelValues(ev.reason, "recorded").Inc()
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: ev.node, UID: ev.uid},
	}
	typ, action := ev.typ, ev.action
	if typ == "" {
		typ = corev1.EventTypeNormal
	}
	if action == "" {
		action = "Admit"
	}
	e.recorder.Eventf(node, nil, typ, ev.reason, action, "%s", ev.note)
}

// recordOn records an Event on obj, an object of the webhook's own (an
// EdgeZone), under the same bucket as the Node Events.
func (e *eventer) recordOn(obj runtime.Object, typ, reason, action, note string) {
	if !e.limiter.Allow() {
		e.metrics.events.WithLabelValues(reason, "rate_limited").Inc()
		return
	}
	e.metrics.events.WithLabelValues(reason, "recorded").Inc()
	e.recorder.Eventf(obj, nil, typ, reason, action, "%s", note)
}
