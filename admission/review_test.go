package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/poll"
)

// decodeResponse checks the envelope every 200 answer must have and returns the
// response.
func decodeResponse(t *testing.T, body []byte, wantUID string) *admissionv1.AdmissionResponse {
	t.Helper()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Errorf("response apiVersion/kind = %q/%q", out.APIVersion, out.Kind)
	}
	if out.Response == nil {
		t.Fatalf("review has no response: %s", body)
	}
	if string(out.Response.UID) != wantUID {
		t.Errorf("response uid = %q, want the request's %q", out.Response.UID, wantUID)
	}
	if !out.Response.Allowed {
		t.Errorf("response denied: %+v", out.Response)
	}
	return out.Response
}

// applyPatch applies the response's patch to the object of the request, as
// the apiserver does, and returns the result decoded as generic JSON.
func applyPatch(t *testing.T, review []byte, resp *admissionv1.AdmissionResponse) map[string]any {
	t.Helper()
	var in admissionv1.AdmissionReview
	if err := json.Unmarshal(review, &in); err != nil {
		t.Fatal(err)
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patchType = %v, want JSONPatch", resp.PatchType)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("patch does not decode: %v\n%s", err, resp.Patch)
	}
	patched, err := p.Apply(in.Request.Object.Raw)
	if err != nil {
		t.Fatalf("patch does not apply to the request's object: %v\n%s", err, resp.Patch)
	}
	var m map[string]any
	if err := json.Unmarshal(patched, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func loadJSON(t *testing.T, name string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, name), &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestReviewFixtures(t *testing.T) {
	env := startWebhook(t, nil)
	m := env.w.metrics
	tests := []struct {
		fixture string
		path    string
		// want is the decision counted; for "mutated" the fixture's .want.json
		// is the object after applying the patch.
		want    string
		changed float64
	}{
		{"node_vouched_zone_lease", "/mutate/node", decisionMutated, 1},
		{"node_vouched_cut_off", "/mutate/node", decisionMutated, 1},
		{"node_vouched_only_noexecute", "/mutate/node", decisionMutated, 1},
		{"node_keeps_not_ready", "/mutate/node", decisionMutated, 1},
		{"node_ready_false", "/mutate/node", decisionUnchanged, 0},
		{"node_no_verdict", "/mutate/node", decisionUnchanged, 0},
		{"node_unhealthy", "/mutate/node", decisionUnchanged, 0},
		{"node_zone_not_cut_off", "/mutate/node", decisionUnchanged, 0},
		// A node moved to another zone with its old zone's verdict on.
		{"node_zone_mismatch", "/mutate/node", decisionUnchanged, 0},
		// Another zone's verdict written on a vouched node is not honoured;
		// the node is judged by its own zone's last verdict.
		{"node_foreign_verdict", "/mutate/node", decisionMutated, 1},
		{"node_create", "/mutate/node", decisionUnchanged, 0},
		{"node_bad_object", "/mutate/node", decisionError, 0},
		{"endpointslice_all_not_ready", "/mutate/endpointslice", decisionMutated, 3},
		{"endpointslice_mixed", "/mutate/endpointslice", decisionMutated, 3},
		{"endpointslice_create", "/mutate/endpointslice", decisionMutated, 1},
		{"endpointslice_unchanged", "/mutate/endpointslice", decisionUnchanged, 0},
		{"endpoints_all_not_ready", "/mutate/endpoints", decisionMutated, 3},
		{"endpoints_several", "/mutate/endpoints", decisionMutated, 3},
		{"endpoints_create", "/mutate/endpoints", decisionUnchanged, 0},
		{"podstatus_kept_ready", "/mutate/podstatus", decisionMutated, 1},
		{"podstatus_kept_ready_kcm", "/mutate/podstatus", decisionMutated, 1},
		{"podstatus_kubelet", "/mutate/podstatus", decisionUnchanged, 0},
		{"podstatus_node_unhealthy", "/mutate/podstatus", decisionUnchanged, 0},
		{"podstatus_node_ready", "/mutate/podstatus", decisionUnchanged, 0},
		{"podstatus_kept_ready_cut_off", "/mutate/podstatus", decisionMutated, 1},
		{"podstatus_zone_not_cut_off", "/mutate/podstatus", decisionUnchanged, 0},
		{"podstatus_was_not_ready", "/mutate/podstatus", decisionUnchanged, 0},
		{"podstatus_no_old_object", "/mutate/podstatus", decisionError, 0},
		// A review routed to the wrong handler is allowed unchanged.
		{"node_vouched_zone_lease", "/mutate/endpointslice", decisionError, 0},
		{"endpointslice_all_not_ready", "/mutate/endpoints", decisionError, 0},
		{"node_vouched_zone_lease", "/mutate/podstatus", decisionError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+tt.path, func(t *testing.T) {
			resource := strings.TrimPrefix(tt.path, "/mutate/")
			body := readFixture(t, tt.fixture+".json")
			before := counter(t, m.requests.WithLabelValues(resource, tt.want))
			changes := m.endpoints.WithLabelValues(resource)
			switch resource {
			case resNode:
				changes = m.taintsStripped
			case resPodStatus:
				changes = m.podsKeptReady
			}
			changedBefore := counter(t, changes)

			rec := env.post(t, tt.path, body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			resp := decodeResponse(t, rec.Body.Bytes(), "uid-"+tt.fixture)

			if got := counter(t, m.requests.WithLabelValues(resource, tt.want)) - before; got != 1 {
				t.Errorf("requests_total{%s,%s} rose by %v, want 1", resource, tt.want, got)
			}
			changed := counter(t, changes) - changedBefore
			if changed != tt.changed {
				t.Errorf("changed %v taints/endpoints, want %v", changed, tt.changed)
			}

			switch tt.want {
			case decisionMutated:
				got := applyPatch(t, body, resp)
				want := loadJSON(t, tt.fixture+".want.json")
				if !reflect.DeepEqual(got, want) {
					g, _ := json.MarshalIndent(got, "", "  ")
					t.Errorf("patched object differs from %s.want.json; got:\n%s\npatch: %s", tt.fixture, g, resp.Patch)
				}
			case decisionError:
				if len(resp.Warnings) == 0 {
					t.Error("an allowed-after-error answer carries no warning")
				}
				fallthrough
			default:
				if resp.Patch != nil || resp.PatchType != nil {
					t.Errorf("unexpected patch %s", resp.Patch)
				}
			}
		})
	}
}

// TestReviewPatchesAreDiffs checks the patch shape the apiserver receives when
// every address of a subset is not ready: no "add" into an array that does not
// exist, which is how patches built from hand-made indices fail.
func TestReviewPatchesAreDiffs(t *testing.T) {
	env := startWebhook(t, nil)
	rec := env.post(t, "/mutate/endpoints", readFixture(t, "endpoints_all_not_ready.json"))
	resp := decodeResponse(t, rec.Body.Bytes(), "uid-endpoints_all_not_ready")
	var ops []map[string]any
	if err := json.Unmarshal(resp.Patch, &ops); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, op := range ops {
		got[op["path"].(string)] = op["op"].(string)
	}
	want := map[string]string{"/subsets/0/addresses": "add", "/subsets/0/notReadyAddresses": "remove"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("patch ops = %v, want %v", got, want)
	}
}

func TestReviewDryRun(t *testing.T) {
	env := startWebhook(t, func(c *Config) { c.DryRun = true })
	m := env.w.metrics
	for _, tt := range []struct{ fixture, path, resource string }{
		{"node_vouched_zone_lease", "/mutate/node", resNode},
		{"endpointslice_mixed", "/mutate/endpointslice", resEndpointSlice},
		{"endpoints_several", "/mutate/endpoints", resEndpoints},
	} {
		rec := env.post(t, tt.path, readFixture(t, tt.fixture+".json"))
		resp := decodeResponse(t, rec.Body.Bytes(), "uid-"+tt.fixture)
		if resp.Patch != nil {
			t.Errorf("%s: dry-run returned a patch", tt.fixture)
		}
		if got := counter(t, m.requests.WithLabelValues(tt.resource, decisionDryRun)); got != 1 {
			t.Errorf("%s: requests_total{dry_run} = %v, want 1", tt.fixture, got)
		}
	}
	if got := counter(t, m.taintsStripped); got != 0 {
		t.Errorf("dry-run counted %v stripped taints", got)
	}
}

// TestReviewMalformed covers bodies that are no AdmissionReview: they get a 4xx
// with a message, and a counted error, never a panic or a 200.
func TestReviewMalformed(t *testing.T) {
	env := startWebhook(t, nil)
	big := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","object":{"pad":"` +
		strings.Repeat("x", int(env.cfg.MaxRequestBytes)) + `"}}}`
	tests := []struct {
		name, method, body string
		code               int
		reason, message    string
	}{
		{"empty", http.MethodPost, "", http.StatusBadRequest, "bad_review", "not an AdmissionReview"},
		{"not json", http.MethodPost, "hello", http.StatusBadRequest, "bad_review", "not an AdmissionReview"},
		{"json array", http.MethodPost, "[1,2]", http.StatusBadRequest, "bad_review", "not an AdmissionReview"},
		{"no apiVersion", http.MethodPost, `{"request":{"uid":"x"}}`, http.StatusBadRequest, "bad_review", "want admission.k8s.io/v1 AdmissionReview"},
		{"v1beta1", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`, http.StatusBadRequest, "bad_review", "want admission.k8s.io/v1"},
		{"no request", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest, "bad_review", "has no request"},
		{"null request", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, http.StatusBadRequest, "bad_review", "has no request"},
		{"no uid", http.MethodPost, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, http.StatusBadRequest, "bad_review", "no uid"},
		{"too large", http.MethodPost, big, http.StatusRequestEntityTooLarge, "too_large", "exceeds"},
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed, "method", "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := env.w.metrics.errors.WithLabelValues(resNode, tt.reason)
			before := counter(t, errs)
			rec := httptestDo(env, tt.method, "/mutate/node", tt.body)
			if rec.Code != tt.code {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.code, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tt.message) {
				t.Errorf("body %q does not say %q", rec.Body, tt.message)
			}
			if got := counter(t, errs) - before; got != 1 {
				t.Errorf("errors_total{node,%s} rose by %v, want 1", tt.reason, got)
			}
		})
	}
}

// TestReviewBeforeSync: a webhook whose caches have not synced knows no node,
// so it judges nothing and says so.
func TestReviewBeforeSync(t *testing.T) {
	env := newWebhook(t, nil)
	rec := env.post(t, "/mutate/node", readFixture(t, "node_vouched_zone_lease.json"))
	resp := decodeResponse(t, rec.Body.Bytes(), "uid-node_vouched_zone_lease")
	if resp.Patch != nil || len(resp.Warnings) == 0 {
		t.Errorf("before sync: patch %s, warnings %v; want no patch and a warning", resp.Patch, resp.Warnings)
	}
	if got := counter(t, env.w.metrics.errors.WithLabelValues(resNode, "not_synced")); got != 1 {
		t.Errorf("errors_total{node,not_synced} = %v, want 1", got)
	}
}

// TestReviewRecordsNodeEvents: what the webhook changes is recorded as an
// Event on the Node it was for, and the same change again (the node lifecycle
// controller retrying through a cut) is one Event, not one per review.
func TestReviewRecordsNodeEvents(t *testing.T) {
	env := startWebhook(t, nil)
	body := readFixture(t, "node_vouched_zone_lease.json")
	for range 5 {
		if rec := env.post(t, "/mutate/node", body); rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	rec := env.post(t, "/mutate/podstatus", readFixture(t, "podstatus_kept_ready.json"))
	decodeResponse(t, rec.Body.Bytes(), "uid-podstatus_kept_ready")
	var got []eventsv1.Event
	poll.Until(t, 30*time.Second, "the Events recorded", func() (bool, string) {
		list, err := env.client.EventsV1().Events("default").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = list.Items
		return len(got) == 2, fmt.Sprintf("%d Events", len(got))
	})
	reasons := map[string]eventsv1.Event{}
	for _, e := range got {
		if e.Regarding.Kind != "Node" || e.Regarding.Name != "edge-a1" || e.ReportingController != reportingController {
			t.Errorf("Event %s regards %s %s, reported by %s; want Node edge-a1 by %s", e.Name, e.Regarding.Kind, e.Regarding.Name, e.ReportingController, reportingController)
		}
		reasons[e.Reason] = e
	}
	if e, ok := reasons[EventTaintKeptOff]; !ok || !strings.Contains(e.Note, "zone zone-a vouches") {
		t.Errorf("no %s Event naming the zone: %+v", EventTaintKeptOff, reasons)
	}
	if _, ok := reasons[EventPodsKeptReady]; !ok {
		t.Errorf("no %s Event: %+v", EventPodsKeptReady, reasons)
	}
	if n := counter(t, env.w.metrics.events.WithLabelValues(EventTaintKeptOff, "recorded")); n != 5 {
		t.Errorf("events_total{%s,recorded} = %v, want 5 (folded into one Event)", EventTaintKeptOff, n)
	}
}
