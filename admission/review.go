package admission

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but its controller still writes it and the webhook keeps serving it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
)

// Sentinel errors of the admit step; each becomes an errors_total reason.
var (
	errDecodeObject = errors.New("cannot decode the object under review")
	errCache        = errors.New("cannot read the informer cache")
	errPatch        = errors.New("cannot compute the JSON patch")
)

// reviewAPIVersion is the only AdmissionReview version the webhook speaks; the
// MutatingWebhookConfiguration asks for it alone.
var reviewAPIVersion = admissionv1.SchemeGroupVersion.String()

// admitter answers AdmissionReviews. It is safe for concurrent use.
type admitter struct {
	mut *mutator
	// events records what was changed on the Nodes it was for; nil records
	// nothing (dry-run).
	events   *eventer
	metrics  *metrics
	log      *slog.Logger
	clock    clock.PassiveClock
	dryRun   bool
	maxBytes int64
	// synced reports whether the informer caches have synced; before that
	// every node would look unknown, so nothing is judged.
	synced func() bool
}

// reviewKind describes one route: the resource label, the object kind it
// accepts, the operations it judges (others are allowed unchanged), and how to
// mutate one object.
type reviewKind struct {
	resource string
	kind     metav1.GroupVersionKind
	ops      []admissionv1.Operation
	mutate   func(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error)
	// guard: the route checks what an edge credential writes, under
	// failurePolicy Fail. When it cannot judge it refuses rather than
	// allows, and it may deny.
	guard bool
}

// mutation is the outcome of mutating one object: its JSON before and after
// (both encoded from the same Go types, so the diff holds only our change), how
// many taints or endpoints changed, and what to log.
type mutation struct {
	original, mutated []byte
	changed           int
	attrs             []any
	// events are recorded on Nodes once the change is returned.
	events []nodeEvent
	// ops, when set, is the patch itself, built by the route instead of
	// diffing original and mutated.
	ops []jsonpatch.Operation
	// deny, if set, refuses the write (guarded routes), saying why.
	deny string
}

var (
	nodeReview = reviewKind{
		resource: resNode,
		kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		// The node lifecycle controller taints existing nodes; a node that
		// registers is not the zone's business yet.
		ops:    []admissionv1.Operation{admissionv1.Update},
		mutate: mutateNode,
	}
	endpointSliceReview = reviewKind{
		resource: resEndpointSlice,
		kind:     metav1.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"},
		// The EndpointSlice controller creates slices as often as it updates
		// them (a service scaling out, a slice split).
		ops:    []admissionv1.Operation{admissionv1.Create, admissionv1.Update},
		mutate: mutateEndpointSlice,
	}
	endpointsReview = reviewKind{
		resource: resEndpoints,
		kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Endpoints"},
		ops:      []admissionv1.Operation{admissionv1.Update},
		mutate:   mutateEndpoints,
	}
	podStatusReview = reviewKind{
		resource: resPodStatus,
		kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		// The node lifecycle controller's MarkPodsNotReady updates the
		// status subresource; the route is registered for nothing else.
		ops:    []admissionv1.Operation{admissionv1.Update},
		mutate: mutatePodStatus,
	}
	nodeStatusReview = reviewKind{
		resource: resNodeStatus,
		kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
		// The zone leader's verdict writes update the status subresource.
		ops:    []admissionv1.Operation{admissionv1.Update},
		mutate: mutateNodeStatus,
		guard:  true,
	}
)

// serve returns the HTTP handler of one route. A body that is no AdmissionReview
// gets a 4xx status, which the apiserver treats as a failed call and, with
// failurePolicy Ignore, lets the object through; everything else gets 200 and
// a response that allows, unless a guarded route denies (see admit).
func (a *admitter) serve(k reviewKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := a.clock.Now()
		defer func() { a.metrics.duration.WithLabelValues(k.resource).Observe(a.clock.Since(start).Seconds()) }()

		if r.Method != http.MethodPost {
			a.reject(w, k, http.StatusMethodNotAllowed, "method", fmt.Errorf("method %s not allowed: AdmissionReviews are POSTed", r.Method))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				a.reject(w, k, http.StatusRequestEntityTooLarge, "too_large", fmt.Errorf("request body exceeds %d bytes", tooLarge.Limit))
				return
			}
			a.reject(w, k, http.StatusBadRequest, "read", fmt.Errorf("read request body: %w", err))
			return
		}
		review, err := decodeReview(body)
		if err != nil {
			a.reject(w, k, http.StatusBadRequest, "bad_review", err)
			return
		}
		out := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: reviewAPIVersion, Kind: "AdmissionReview"},
			Response: a.admit(k, review.Request),
		}
		b, err := json.Marshal(&out)
		if err != nil {
			// Cannot happen with these types; answer rather than panic.
			a.reject(w, k, http.StatusInternalServerError, "encode", fmt.Errorf("encode response: %w", err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}
}

// reject answers a request that carried no usable AdmissionReview.
func (a *admitter) reject(w http.ResponseWriter, k reviewKind, code int, reason string, err error) {
	a.metrics.errors.WithLabelValues(k.resource, reason).Inc()
	a.log.Warn("rejected admission request", "resource", k.resource, "status", code, "err", err)
	http.Error(w, "edgequorum webhook: "+err.Error(), code)
}

// decodeReview parses an admission.k8s.io/v1 AdmissionReview that carries a
// request with a uid, which is all the response needs to echo.
func decodeReview(body []byte) (*admissionv1.AdmissionReview, error) {
	var review admissionv1.AdmissionReview
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, fmt.Errorf("body is not an AdmissionReview in JSON: %w", err)
	}
	if review.APIVersion != reviewAPIVersion || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("got apiVersion %q kind %q, want %s AdmissionReview", review.APIVersion, review.Kind, reviewAPIVersion)
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, errors.New("AdmissionReview request has no uid")
	}
	return &review, nil
}

// admit decides one request. On an unguarded route it always allows; what it
// may add is a patch, or a warning when it could not judge. A guarded route
// (nodestatus) also denies a write it finds wrong or cannot judge, because
// checking that write is its point. Even a bug that panics while judging ends
// in an answer (allowed unchanged, or denied on a guarded route) rather than
// a dropped connection.
func (a *admitter) admit(k reviewKind, req *admissionv1.AdmissionRequest) (out *admissionv1.AdmissionResponse) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	fail := func(reason string, err error) *admissionv1.AdmissionResponse {
		a.metrics.errors.WithLabelValues(k.resource, reason).Inc()
		a.metrics.requests.WithLabelValues(k.resource, decisionError).Inc()
		a.log.Warn("allowed unchanged after an error", "resource", k.resource, "reason", reason,
			"name", req.Name, "namespace", req.Namespace, "uid", req.UID, "err", err)
		if k.guard {
			// Checking is the point of the route: the writer tries again.
			return a.deny(k, resp, fmt.Sprintf("edgequorum webhook could not check this write (%s): %v", reason, err), false)
		}
		resp.Warnings = []string{"edgequorum webhook allowed this unchanged: " + reason}
		return resp
	}
	unchanged := func() *admissionv1.AdmissionResponse {
		a.metrics.requests.WithLabelValues(k.resource, decisionUnchanged).Inc()
		return resp
	}
	defer func() {
		if p := recover(); p != nil {
			resp.Patch, resp.PatchType = nil, nil
			out = fail("panic", fmt.Errorf("panic: %v", p))
		}
	}()

	if req.Kind != k.kind {
		return fail("wrong_kind", fmt.Errorf("route %s got kind %s", k.resource, req.Kind.String()))
	}
	if !slices.Contains(k.ops, req.Operation) {
		return unchanged()
	}
	if !a.synced() {
		return fail("not_synced", errors.New("informer caches have not synced yet"))
	}
	m, err := k.mutate(a.mut, req)
	if err != nil {
		return fail(reasonOf(err), err)
	}
	if m.deny != "" {
		a.log.Warn("denied", append([]any{"resource", k.resource, "name", req.Name, "user", req.UserInfo.Username,
			"why", m.deny, "dryRun", a.dryRun}, m.attrs...)...)
		return a.deny(k, resp, m.deny, true)
	}
	if m.changed == 0 {
		return unchanged()
	}
	ops := m.ops
	if ops == nil {
		if ops, err = jsonpatch.CreatePatch(m.original, m.mutated); err != nil {
			return fail(reasonOf(errPatch), fmt.Errorf("%w: %w", errPatch, err))
		}
	}
	if len(ops) == 0 {
		return unchanged()
	}
	attrs := append([]any{"resource", k.resource, "operation", req.Operation, "changed", m.changed, "dryRun", a.dryRun}, m.attrs...)
	if a.dryRun {
		a.metrics.requests.WithLabelValues(k.resource, decisionDryRun).Inc()
		a.log.Info("would mutate (dry-run)", attrs...)
		return resp
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return fail(reasonOf(errPatch), fmt.Errorf("%w: %w", errPatch, err))
	}
	resp.Patch = patch
	resp.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
	a.metrics.requests.WithLabelValues(k.resource, decisionMutated).Inc()
	switch k.resource {
	case resNode:
		a.metrics.taintsStripped.Add(float64(m.changed))
	case resPodStatus:
		a.metrics.podsKeptReady.Add(float64(m.changed))
	case resNodeStatus:
		// Counted in requests_total{decision="mutated"} alone.
	default:
		a.metrics.endpoints.WithLabelValues(k.resource).Add(float64(m.changed))
	}
	a.log.Info("mutated", attrs...)
	if a.events != nil {
		for _, ev := range m.events {
			a.events.record(ev)
		}
	}
	return resp
}

// deny refuses the write on a guarded route; counted (when counted is false
// the caller counted an error already). In dry-run it is logged above and
// allowed.
func (a *admitter) deny(k reviewKind, resp *admissionv1.AdmissionResponse, why string, counted bool) *admissionv1.AdmissionResponse {
	if counted {
		decision := decisionDenied
		if a.dryRun {
			decision = decisionDryRun
		}
		a.metrics.requests.WithLabelValues(k.resource, decision).Inc()
	}
	if a.dryRun {
		return resp
	}
	resp.Allowed = false
	resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: why}
	return resp
}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, errDecodeObject):
		return "decode_object"
	case errors.Is(err, errCache):
		return "cache"
	case errors.Is(err, errPatch):
		return "patch"
	}
	return "internal"
}

// decodeObject decodes the object under review the way the apiserver encodes
// it: case-sensitive field names, integers kept as integers.
func decodeObject(raw []byte, into any) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: request has no object", errDecodeObject)
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, into); err != nil {
		return fmt.Errorf("%w: %w", errDecodeObject, err)
	}
	return nil
}

// encodePair encodes the original (already decoded) object, lets mutate change
// it, and encodes it again. Diffing these two encodings rather than the raw
// request keeps fields our API types do not know out of the patch.
func encodePair[T any](obj *T, mutate func(*T) (int, []any, []nodeEvent, error)) (mutation, error) {
	original, err := json.Marshal(obj)
	if err != nil {
		return mutation{}, fmt.Errorf("%w: %w", errDecodeObject, err)
	}
	n, attrs, evs, err := mutate(obj)
	if err != nil || n == 0 {
		return mutation{attrs: attrs}, err
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return mutation{}, fmt.Errorf("%w: %w", errPatch, err)
	}
	return mutation{original: original, mutated: mutated, changed: n, attrs: attrs, events: evs}, nil
}

// reviewedNode is what the node route reads of a Node in a review: the
// controller manager's Node writes carry the kubelet's whole status, 10-20 KB
// of images and resources, and decoding them into a corev1.Node on every
// review was most of the route's cost. The patch is built from the taints'
// indices in the request, so nothing else is needed.
type reviewedNode struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Taints []corev1.Taint `json:"taints,omitempty"`
	} `json:"spec"`
	Status struct {
		Conditions []corev1.NodeCondition `json:"conditions,omitempty"`
	} `json:"status"`
}

func mutateNode(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error) {
	var r reviewedNode
	if err := decodeObject(req.Object.Raw, &r); err != nil {
		return mutation{}, err
	}
	n := corev1.Node{ObjectMeta: r.ObjectMeta, Spec: corev1.NodeSpec{Taints: r.Spec.Taints},
		Status: corev1.NodeStatus{Conditions: r.Status.Conditions}}
	taints := slices.Clone(n.Spec.Taints)
	stripped, dec, err := m.node(&n)
	if err != nil {
		return mutation{}, fmt.Errorf("%w: %w", errCache, err)
	}
	mut := mutation{changed: stripped, attrs: []any{"node", n.Name, "zone", dec.Zone, "because", dec.because()}}
	if stripped == 0 {
		return mut, nil
	}
	mut.events = []nodeEvent{{node: n.Name, uid: n.UID, reason: EventTaintKeptOff,
		note: fmt.Sprintf("kept node.kubernetes.io/unreachable:NoExecute off: zone %s vouches for this node (%s)", dec.Zone, dec.because())}}
	// Removed by index in the request, from the last, so that each index
	// still points where it did; no taint left, no list.
	if len(n.Spec.Taints) == 0 {
		mut.ops = []jsonpatch.Operation{jsonpatch.NewOperation("remove", "/spec/taints", nil)}
		return mut, nil
	}
	for i := len(taints) - 1; i >= 0; i-- {
		if isUnreachableNoExecute(taints[i]) {
			mut.ops = append(mut.ops, jsonpatch.NewOperation("remove", fmt.Sprintf("/spec/taints/%d", i), nil))
		}
	}
	return mut, nil
}

func mutateEndpointSlice(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error) {
	var s discoveryv1.EndpointSlice
	if err := decodeObject(req.Object.Raw, &s); err != nil {
		return mutation{}, err
	}
	// The busiest route (a slice per Service per change), and its change is
	// simple: the patch is built from the endpoints marked ready rather than
	// by encoding the slice twice and diffing.
	q := m.newQualifier()
	revived, err := m.reviveEndpoints(&s, q)
	if err != nil {
		return mutation{}, fmt.Errorf("%w: %w", errCache, err)
	}
	mut := mutation{changed: len(revived), attrs: []any{"namespace", s.Namespace, "name", s.Name}, events: q.events()}
	for _, i := range revived {
		at := fmt.Sprintf("/endpoints/%d/conditions/", i)
		mut.ops = append(mut.ops, jsonpatch.NewOperation("add", at+"ready", true), jsonpatch.NewOperation("add", at+"serving", true))
	}
	return mut, nil
}

func mutateEndpoints(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error) {
	var e corev1.Endpoints
	if err := decodeObject(req.Object.Raw, &e); err != nil {
		return mutation{}, err
	}
	return encodePair(&e, func(e *corev1.Endpoints) (int, []any, []nodeEvent, error) {
		q := m.newQualifier()
		n, err := m.endpoints(e, q)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%w: %w", errCache, err)
		}
		return n, []any{"namespace", e.Namespace, "name", e.Name}, q.events(), nil
	})
}
