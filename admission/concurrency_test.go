package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/zone"
)

// TestConcurrentReviews answers reviews from many goroutines while the zone
// Lease the answers depend on is renewed and the clock moves: every answer must
// still be a well-formed allowed review whose patch, if any, applies. Run it
// with -race.
func TestConcurrentReviews(t *testing.T) {
	env := startWebhook(t, nil)
	fixtures := []struct{ name, path string }{
		{"node_vouched_zone_lease", "/mutate/node"},
		{"node_vouched_cut_off", "/mutate/node"},
		{"endpointslice_mixed", "/mutate/endpointslice"},
		{"endpointslice_all_not_ready", "/mutate/endpointslice"},
		{"endpoints_several", "/mutate/endpoints"},
		{"endpoints_all_not_ready", "/mutate/endpoints"},
	}
	bodies := make([][]byte, len(fixtures))
	for i, f := range fixtures {
		bodies[i] = readFixture(t, f.name+".json")
	}

	ctx, cancel := context.WithCancel(context.Background())
	var churn sync.WaitGroup
	churn.Go(func() {
		leases := env.client.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
		for i := 0; ctx.Err() == nil; i++ {
			l, err := leases.Get(ctx, zone.LeaseName("zone-a"), metav1.GetOptions{})
			if err != nil {
				return
			}
			// Alternate between fresh and stale so answers flip.
			l.Spec.RenewTime = &metav1.MicroTime{Time: env.clock.Now().Add(-time.Duration(i%2) * time.Minute)}
			if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				return
			}
			env.clock.Step(time.Millisecond)
		}
	})

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 40 {
				k := (g + i) % len(fixtures)
				rec := env.post(t, fixtures[k].path, bodies[k])
				if rec.Code != http.StatusOK {
					t.Errorf("%s: status %d", fixtures[k].name, rec.Code)
					return
				}
				// t.Fatal may not be called off the test goroutine, so no
				// decodeResponse here.
				if err := checkAnswer(bodies[k], rec.Body.Bytes()); err != nil {
					t.Errorf("%s: %v", fixtures[k].name, err)
					return
				}
			}
		})
	}
	wg.Wait()
	cancel()
	churn.Wait()
}

// checkAnswer reports what is wrong with answer as the reply to review: not an
// allowed review echoing the uid, or a patch that does not apply.
func checkAnswer(review, answer []byte) error {
	var in, out admissionv1.AdmissionReview
	if err := json.Unmarshal(review, &in); err != nil {
		return err
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	if out.Response == nil || !out.Response.Allowed || out.Response.UID != in.Request.UID {
		return fmt.Errorf("bad answer %s", answer)
	}
	if out.Response.Patch == nil {
		return nil
	}
	p, err := jsonpatch.DecodePatch(out.Response.Patch)
	if err != nil {
		return fmt.Errorf("patch does not decode: %w", err)
	}
	if _, err := p.Apply(in.Request.Object.Raw); err != nil {
		return fmt.Errorf("patch %s does not apply: %w", out.Response.Patch, err)
	}
	return nil
}
