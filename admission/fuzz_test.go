package admission

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	sigsjson "sigs.k8s.io/json"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

// The fuzz targets feed arbitrary bodies to one route each, the way anyone who
// reaches the webhook's port could. Whatever the body, the answer is 200 with
// an allowed review echoing the uid, or a 4xx; never a panic, a 5xx or a
// denial; and a patch, if any, applies to the object under review.

var (
	fuzzOnce sync.Once
	fuzzEnv  *testEnv
	fuzzErr  error
)

// fuzzWebhook is one running webhook shared by every fuzz input: starting one
// per input would make the fuzzer measure informer start-up. It lives as long
// as the test process, so it cannot hang off any one input's *testing.T.
func fuzzWebhook(t *testing.T) *testEnv {
	t.Helper()
	fuzzOnce.Do(func() {
		env, err := startShared()
		if err != nil {
			fuzzErr = err
			return
		}
		fuzzEnv = env
	})
	if fuzzErr != nil {
		t.Fatalf("fuzz webhook: %v", fuzzErr)
	}
	return fuzzEnv
}

func startShared() (*testEnv, error) {
	dir, err := os.MkdirTemp("", "edgequorum-fuzz-")
	if err != nil {
		return nil, err
	}
	b, err := webhookcerts.Generate(webhookcerts.Options{Service: "s", Namespace: "n", Validity: time.Hour})
	if err != nil {
		return nil, err
	}
	if err := b.WriteFiles(dir, true); err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, webhookcerts.CertFile), filepath.Join(dir, webhookcerts.KeyFile)
	cfg.Repair = false
	cfg.Clock = clocktesting.NewFakeClock(testNow)
	cfg.MaxRequestBytes = 256 << 10
	if cfg.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	w, err := New(cfg, fake.NewClientset(testCluster()...))
	if err != nil {
		return nil, err
	}
	go func() { _ = w.Run(context.Background()) }()
	deadline := time.Now().Add(30 * time.Second)
	for !w.Ready() {
		if time.Now().After(deadline) {
			return nil, errors.New("caches did not sync")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return &testEnv{w: w, cfg: cfg}, nil
}

func addSeeds(f *testing.F, prefix string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		if strings.HasSuffix(p, ".want.json") {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && strings.HasPrefix(filepath.Base(p), prefix) {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Node"},"operation":"UPDATE","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"discovery.k8s.io","version":"v1","kind":"EndpointSlice"},"operation":"CREATE","object":{"endpoints":[{"conditions":{"ready":false},"nodeName":"edge-a1","targetRef":{"kind":"Pod","name":"web-a1-1"}}]}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Endpoints"},"operation":"UPDATE","object":{"subsets":[{"notReadyAddresses":[{"ip":"1.2.3.4","nodeName":"edge-a1","targetRef":{"kind":"Pod","name":"web-a1-1"}}]}]}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})
}

func fuzzRoute(f *testing.F, path, prefix string) {
	fuzzGuardedRoute(f, path, prefix, false)
}

// fuzzGuardedRoute is fuzzRoute for a route that may deny (mayDeny): a
// denial must be a 403 that says why.
func fuzzGuardedRoute(f *testing.F, path, prefix string, mayDeny bool) {
	addSeeds(f, prefix)
	f.Fuzz(func(t *testing.T, body []byte) {
		env := fuzzWebhook(t)
		rec := httptestDo(env, http.MethodPost, path, string(body))
		switch {
		case rec.Code == http.StatusOK:
		case rec.Code >= 400 && rec.Code < 500:
			return
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		var in admissionv1.AdmissionReview
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil || in.Request == nil {
			t.Fatalf("200 for a body that is no AdmissionReview (%v): %q", err, body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("answer is no review: %v %s", err, rec.Body)
		}
		if out.Response.UID != in.Request.UID {
			t.Fatalf("answer %+v for uid %q", out.Response, in.Request.UID)
		}
		if !out.Response.Allowed {
			if !mayDeny || out.Response.Patch != nil || out.Response.Result == nil ||
				out.Response.Result.Code != http.StatusForbidden || out.Response.Result.Message == "" {
				t.Fatalf("denied %+v for uid %q", out.Response, in.Request.UID)
			}
			return
		}
		if out.Response.Patch == nil {
			return
		}
		p, err := jsonpatch.DecodePatch(out.Response.Patch)
		if err != nil {
			t.Fatalf("patch does not decode: %v %s", err, out.Response.Patch)
		}
		if _, err := p.Apply(in.Request.Object.Raw); err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", out.Response.Patch, in.Request.Object.Raw, err)
		}
	})
}

func FuzzNodeReview(f *testing.F)          { fuzzRoute(f, "/mutate/node", "node_") }
func FuzzEndpointSliceReview(f *testing.F) { fuzzRoute(f, "/mutate/endpointslice", "endpointslice_") }
func FuzzEndpointsReview(f *testing.F)     { fuzzRoute(f, "/mutate/endpoints", "endpoints_") }
func FuzzPodStatusReview(f *testing.F)     { fuzzRoute(f, "/mutate/podstatus", "podstatus_") }

// FuzzNodeStatusReview: the agents' verdict writes, the one route that
// denies. Seeds: the leader's write of a signed verdict with its condition,
// and one that also changes an address.
func FuzzNodeStatusReview(f *testing.F) {
	old := testNode("edge-a4", "zone-a", zone.Healthy, corev1.ConditionTrue)
	a := zone.Annotation{State: zone.Unhealthy, Zone: "zone-a", Term: testTerm, Leader: testLeaders["zone-a"], At: testNow, Cons: 2, Members: 3}
	n := old.DeepCopy()
	n.Annotations[zone.AnnotationKey] = signedVerdict("edge-a4", a)
	n.Status.Conditions = append(n.Status.Conditions, corecond.Condition(a, nil))
	moved := n.DeepCopy()
	moved.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.9"}}
	for _, obj := range []*corev1.Node{n, moved} {
		f.Add(nodeStatusReviewBody(f, DefaultAgentUser, obj, old))
	}
	fuzzGuardedRoute(f, "/mutate/nodestatus", "nodestatus_", true)
}
