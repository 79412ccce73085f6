package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
)

// Certificates short enough to rotate several times in a test: the serving
// certificate is renewed every 40 s, the CA every 80 s.
var shortCerts = []string{"--tls-secret=edgequorum-webhook-tls", "--manage-certs", "--cert-validity=60s", "--ca-validity=120s"}

// certWatch records every serving certificate and signing CA the webhook's
// Secret held when it was looked at.
type certWatch struct {
	client  kubernetes.Interface
	serving map[string]time.Time // serial → NotAfter
	cas     map[string]bool
}

func (w *certWatch) look(t *testing.T) (bool, string) {
	t.Helper()
	sec, err := w.client.CoreV1().Secrets("edgequorum-webhook").Get(context.Background(), "edgequorum-webhook-tls", metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	for key, into := range map[string]func(*x509.Certificate){
		webhookcerts.CertFile:      func(c *x509.Certificate) { w.serving[c.SerialNumber.String()] = c.NotAfter },
		webhookcerts.SignerCertKey: func(c *x509.Certificate) { w.cas[c.SerialNumber.String()] = true },
	} {
		blk, _ := pem.Decode(sec.Data[key])
		if blk == nil {
			return false, "no " + key + " in the Secret"
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return false, err.Error()
		}
		into(c)
	}
	return true, ""
}

// admissionFailures sums what the apiserver could not get from the
// edgequorum webhooks: calls skipped under failurePolicy Ignore, and writes
// refused because calling the webhook failed (the nodestatus hook, Fail).
// Refusals the webhook itself decided are not failures.
func admissionFailures(t *testing.T, c kubernetes.Interface) float64 {
	t.Helper()
	raw, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("apiserver /metrics: %v", err)
	}
	total := 0.0
	for line := range strings.Lines(string(raw)) {
		if !strings.Contains(line, `webhook.edgequorum.io"`) {
			continue
		}
		failed := strings.HasPrefix(line, "apiserver_admission_webhook_fail_open_count{") ||
			strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{") && strings.Contains(line, `error_type="calling_webhook_error"`)
		if !failed {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64); err == nil {
			total += v
		}
	}
	return total
}

// TestWebhookKeepsItsOwnCertificate runs the webhook as deploy/webhook does,
// keeping its own CA and serving certificate, with validities of a minute or
// two: the serving certificate is renewed and the CA replaced several times
// while the whole zone is cut from the cloud and while a second replica takes
// over from the first. Through all of it the apiserver verifies every call
// (no call skipped, no agent write refused for want of one), the zone stays
// protected, and the expiry gauge shows what is served.
func TestWebhookKeepsItsOwnCertificate(t *testing.T) {
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-r", Nodes: 3})
	ctx := context.Background()
	client := c.Client()
	all := names(z)
	waitHealthy(t, client, 2*time.Minute, all)
	first := startWebhookWith(t, c, z, append([]string{"--repair-period=10s"}, shortCerts...)...)
	web := deployApp(t, client, "web", all)
	taints := watchTaints(t, client, all)
	certs := &certWatch{client: client, serving: map[string]time.Time{}, cas: map[string]bool{}}
	if ok, detail := certs.look(t); !ok {
		t.Fatalf("the webhook made no certificates: %s", detail)
	}
	failures := admissionFailures(t, client)
	verified := func() (bool, string) {
		if ok, detail := certs.look(t); !ok {
			return false, detail
		}
		if f := admissionFailures(t, client); f != failures {
			return false, fmt.Sprintf("%v admission calls failed (the apiserver could not verify the webhook?)", f-failures)
		}
		return true, ""
	}
	// rotated holds the zone to check while at least n more serving
	// certificates and a new CA are issued.
	rotated := func(what string, n int, check func() (bool, string)) {
		t.Helper()
		servingBefore, casBefore := len(certs.serving), len(certs.cas)
		holdFor(t, 100*time.Second, what, check)
		if got := len(certs.serving) - servingBefore; got < n || len(certs.cas) == casBefore {
			t.Errorf("%s: %d serving certificates and %d CAs issued, want at least %d and 1", what, got, len(certs.cas)-casBefore, n)
		}
		t.Logf("%s: %d serving certificates and %d CAs issued", what, len(certs.serving)-servingBefore, len(certs.cas)-casBefore)
	}

	t.Run("rotations during a whole-zone cut", func(t *testing.T) {
		z.CutCloud()
		waitAllUnknown(t, client, all, 2*time.Minute)
		protected := zoneProtected(t, client, web, all, verified)
		settleProtection(t, protected)
		rotated("zone protection through rotations", 2, protected)
		if seen := taints.seen(); len(seen) > 0 {
			t.Errorf("unreachable:NoExecute was stored on %v", seen)
		}
		if err := z.ReconnectCloud(ctx); err != nil {
			t.Fatal(err)
		}
		waitNodesReady(t, client, "zone", all)
	})

	t.Run("rotations while a second replica takes over", func(t *testing.T) {
		// The new replica starts, the configuration points at it, the
		// first stops: the repair loop, and the certificates with it,
		// pass to the second.
		second := startWebhookWith(t, c, z, append([]string{"--repair-period=10s", "--leader-election-identity=webhook-1"}, shortCerts...)...)
		first.Stop()
		rotated("the zone's verdicts through a handover and rotations", 2, func() (bool, string) {
			if ok, detail := verified(); !ok {
				return false, detail
			}
			return podsReady(t, client, web.name)
		})
		// The expiry gauge shows the certificate served now: at most a
		// minute away.
		waitGauges(t, second, "the expiry of the served certificate", func(g map[string]float64) (bool, string) {
			got := g["edgequorum_admission_certificate_expiry_timestamp_seconds"]
			left := time.Until(time.Unix(int64(got), 0))
			return left > 0 && left <= time.Minute+time.Second, fmt.Sprintf("expires in %s", left)
		})
	})
}
