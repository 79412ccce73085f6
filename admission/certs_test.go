package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/poll"
)

// TestCertKeeperPublishesBeforeItServes: on a cluster with the webhook
// configuration and no Secret, the keeper creates the Secret, puts its CA in
// every webhook's caBundle, and puts it back when an apply resets it; a
// serving certificate due for renewal is replaced, by the CA the bundle
// holds; what the replicas serve from the Secret follows.
func TestCertKeeperPublishesBeforeItServes(t *testing.T) {
	ctx := context.Background()
	const ns, name, config = "edgequorum-webhook", "edgequorum-webhook-tls", "edgequorum-webhook"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: config},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "a.webhook.edgequorum.io"}, {Name: "b.webhook.edgequorum.io"}},
	}
	client := fake.NewClientset(mwc)
	clk := clocktesting.NewFakeClock(testNow)
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	secrets := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	configs := informers.NewSharedInformerFactory(client, 0)
	k := &certKeeper{
		client: client, namespace: ns, secret: name, config: config,
		secrets: secrets.Core().V1().Secrets().Lister().Secrets(ns),
		configs: configs.Admissionregistration().V1().MutatingWebhookConfigurations().Lister(),
		policy: webhookcerts.Policy{CAValidity: 3 * time.Hour, CertValidity: time.Hour,
			Names: webhookcerts.Names{DNS: webhookcerts.ServiceNames("edgequorum-webhook", ns)}, Settle: 30 * time.Second},
		clock: clk, period: time.Second, metrics: m, log: slog.New(slog.DiscardHandler), trusted: map[string]time.Time{},
	}
	stop := make(chan struct{})
	defer close(stop)
	secrets.Start(stop)
	configs.Start(stop)
	secrets.WaitForCacheSync(stop)
	configs.WaitForCacheSync(stop)
	secretInformer := secrets.Core().V1().Secrets().Informer()
	configInformer := configs.Admissionregistration().V1().MutatingWebhookConfigurations().Informer()
	// sync once the caches hold every write so far.
	sync := func(what string) {
		t.Helper()
		waitCaught(t, client, secretInformer, configInformer)
		if _, err := k.sync(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	served := webhookcerts.NewSecretPair(func() (map[string][]byte, bool) {
		s, err := k.secrets.Get(name)
		if err != nil {
			return nil, false
		}
		return s.Data, true
	}, slog.New(slog.DiscardHandler), m.tlsReloads, m.certExpiry)
	if _, err := served.GetCertificate(nil); err == nil {
		t.Error("a replica served a certificate before the Secret existed")
	}

	sync("create")
	sec, err := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the keeper created no Secret: %v", err)
	}
	first := sec.Data[webhookcerts.CertFile]
	sync("publish")
	requireBundle(t, client, config, sec.Data[webhookcerts.CAFile])
	waitCaught(t, client, secretInformer, configInformer)
	cert, err := served.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifiesWith(cert, sec.Data[webhookcerts.CAFile], clk.Now()); err != nil {
		t.Errorf("the served pair does not verify against the published bundle: %v", err)
	}
	if got := testutil.ToFloat64(m.certExpiry); got != float64(certNotAfter(first).Unix()) {
		t.Errorf("expiry gauge %v, want the served certificate's %v", got, certNotAfter(first).Unix())
	}

	// kubectl apply of the shipped manifest empties every caBundle.
	cfg, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, config, metav1.GetOptions{})
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = nil
	}
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sync("after an apply")
	requireBundle(t, client, config, sec.Data[webhookcerts.CAFile])
	sync("bundle seen in place") // from now on the CA counts as trusted

	// Two thirds of the hour on: a new serving pair, from the same CA.
	clk.Step(41 * time.Minute)
	sync("renewal")
	sec2, _ := client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if bytes.Equal(sec2.Data[webhookcerts.CertFile], first) {
		t.Fatal("the serving certificate was not renewed with a third of its validity left")
	}
	if !bytes.Equal(sec2.Data[webhookcerts.CAFile], sec.Data[webhookcerts.CAFile]) {
		t.Error("renewing the serving certificate changed the trust bundle")
	}
	waitCaught(t, client, secretInformer, configInformer)
	cert, _ = served.GetCertificate(nil)
	if !bytes.Equal(cert.Certificate[0], pemDER(t, sec2.Data[webhookcerts.CertFile])) {
		t.Error("the replica did not pick the renewed pair up from the Secret")
	}
	if got := testutil.ToFloat64(m.certRotations.WithLabelValues(webhookcerts.StepCertIssued)); got != 1 {
		t.Errorf("certificate_rotations_total{step=cert-issued} = %v, want 1", got)
	}
}

// waitCaught waits until the informers hold what client holds (the fake
// clientset sets no resourceVersions, so contents are compared).
func waitCaught(t *testing.T, client *fake.Clientset, secrets, configs cache.SharedIndexInformer) {
	t.Helper()
	ctx := context.Background()
	poll.UntilTrue(t, waitTimeout, "caches caught up", func() bool {
		secs, _ := client.CoreV1().Secrets("edgequorum-webhook").List(ctx, metav1.ListOptions{})
		for _, s := range secs.Items {
			c, ok, _ := secrets.GetStore().GetByKey(s.Namespace + "/" + s.Name)
			if !ok || !equality.Semantic.DeepEqual(c.(*corev1.Secret).Data, s.Data) {
				return false
			}
		}
		cfgs, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		for _, cfg := range cfgs.Items {
			c, ok, _ := configs.GetStore().GetByKey(cfg.Name)
			if !ok || !equality.Semantic.DeepEqual(c.(*admissionregistrationv1.MutatingWebhookConfiguration).Webhooks, cfg.Webhooks) {
				return false
			}
		}
		return true
	})
}

func requireBundle(t *testing.T, client *fake.Clientset, config string, bundle []byte) {
	t.Helper()
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), config, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range cfg.Webhooks {
		if !bytes.Equal(h.ClientConfig.CABundle, bundle) {
			t.Errorf("webhook %s caBundle is not the Secret's bundle", h.Name)
		}
	}
}

func verifiesWith(cert *tls.Certificate, bundle []byte, now time.Time) error {
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: "edgequorum-webhook.edgequorum-webhook.svc"})
	return err
}

func pemDER(t *testing.T, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	return blk.Bytes
}
