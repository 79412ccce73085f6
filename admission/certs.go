package admission

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
)

// Values of the step label of edgequorum_admission_certificate_rotations_total.
const (
	certStepCABundle = "ca_bundle_published"
)

// certKeeper keeps the webhook's own certificates (--manage-certs): run by the
// repair loop's leader, it creates the Secret that every replica serves from
// (--tls-secret), renews its CA and serving certificate a third of their
// validity before they expire (webhookcerts.Policy.Next), and keeps the
// caBundle of every webhook in the configuration --webhook-configuration equal
// to the Secret's trust bundle. A new CA enters the bundle beside the old one,
// and signs what the replicas serve only once the configuration has trusted it
// for Policy.Settle: the apiserver verifies every replica at every moment. Its
// rights are bounded by resourceNames: that one Secret, that one configuration.
type certKeeper struct {
	client    kubernetes.Interface
	namespace string
	secret    string
	config    string
	secrets   corelisters.SecretNamespaceLister
	configs   admissionlisters.MutatingWebhookConfigurationLister
	policy    webhookcerts.Policy
	clock     clock.WithTicker
	period    time.Duration
	metrics   *metrics
	log       *slog.Logger

	// trusted is when this leader first saw every caBundle hold a bundle
	// with the current signer, by the signer's serial; a new leader starts
	// from nothing, and so waits a Settle more than it might have.
	trusted map[string]time.Time
}

// run keeps the certificates until ctx is done.
func (k *certKeeper) run(ctx context.Context) {
	k.trusted = map[string]time.Time{}
	for {
		busy, err := k.sync(ctx)
		if err != nil && ctx.Err() == nil {
			k.metrics.certRotations.WithLabelValues(repairError).Inc()
			k.log.Warn("webhook certificates not kept; retried next period", "err", err)
		}
		// In the middle of a rotation (a step just taken, a bundle just
		// published) the next step is due within seconds, not a period.
		wait := k.period
		if busy {
			wait = min(wait, certBusyPeriod)
		}
		select {
		case <-ctx.Done():
			return
		case <-k.clock.After(wait):
		}
	}
}

// certBusyPeriod is how soon the keeper looks again in the middle of a
// rotation.
const certBusyPeriod = time.Second

// sync publishes the Secret's bundle in the configuration, then takes the
// next step of the policy, if any. busy says it wrote something, or waits for
// a bundle to be trusted: a next step is near.
func (k *certKeeper) sync(ctx context.Context) (busy bool, err error) {
	now := k.clock.Now()
	sec, err := k.secrets.Get(k.secret)
	if apierrors.IsNotFound(err) {
		sec, err = nil, nil
	}
	if err != nil {
		return false, fmt.Errorf("read Secret %s/%s from cache: %w", k.namespace, k.secret, err)
	}
	var data map[string][]byte
	if sec != nil {
		data = sec.Data
	}
	var trusted time.Time
	if len(data[webhookcerts.CAFile]) > 0 {
		published, err := k.publish(ctx, data[webhookcerts.CAFile])
		if err != nil {
			return true, err
		}
		busy = !published
		if signer, err := webhookcerts.ParseCA(data[webhookcerts.SignerCertKey], data[webhookcerts.SignerKeyKey]); err == nil && published &&
			webhookcerts.BundleTrusts(data[webhookcerts.CAFile], signer.Cert) {
			id := signer.Cert.SerialNumber.String()
			if _, ok := k.trusted[id]; !ok {
				k.trusted[id] = now
			}
			trusted = k.trusted[id]
			busy = busy || now.Sub(trusted) < k.policy.Settle
		}
	}
	step, err := k.policy.Next(data, now, trusted)
	if err != nil || step.Data == nil {
		return busy, err
	}
	if err := k.write(ctx, sec, step.Data); err != nil {
		return true, err
	}
	k.metrics.certRotations.WithLabelValues(stepLabel(step.Reason)).Inc()
	k.log.Info("webhook certificates: "+step.Reason, "secret", k.namespace+"/"+k.secret, "notAfter", certNotAfter(step.Data[webhookcerts.CertFile]))
	return true, nil
}

// stepLabel is the metric label of a step's reason.
func stepLabel(reason string) string {
	for _, s := range []string{webhookcerts.StepCreated, webhookcerts.StepCARotated, webhookcerts.StepBundle, webhookcerts.StepCertIssued} {
		if len(reason) >= len(s) && reason[:len(s)] == s {
			return s
		}
	}
	return reason
}

// certNotAfter is when the first certificate of pemData expires, zero if
// none parses.
func certNotAfter(pemData []byte) time.Time {
	blk, _ := pem.Decode(pemData)
	if blk == nil {
		return time.Time{}
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}

// publish makes every webhook of the configuration trust bundle, and reports
// whether each already did (false: it wrote them now, and the apiserver has
// yet to pick the change up).
func (k *certKeeper) publish(ctx context.Context, bundle []byte) (bool, error) {
	cfg, err := k.configs.Get(k.config)
	if err != nil {
		return false, fmt.Errorf("read MutatingWebhookConfiguration %s from cache: %w", k.config, err)
	}
	stale := false
	for _, h := range cfg.Webhooks {
		if !bytes.Equal(h.ClientConfig.CABundle, bundle) {
			stale = true
		}
	}
	if !stale {
		return true, nil
	}
	cfg = cfg.DeepCopy()
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].ClientConfig.CABundle = bundle
	}
	if _, err := k.client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, cfg,
		metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return false, fmt.Errorf("write the caBundle of MutatingWebhookConfiguration %s: %w", k.config, err)
	}
	k.metrics.certRotations.WithLabelValues(certStepCABundle).Inc()
	k.log.Info("published the webhook's trust bundle", "configuration", k.config,
		"bundle", base64.StdEncoding.EncodeToString(bundle)[:min(16, base64.StdEncoding.EncodedLen(len(bundle)))]+"…")
	return false, nil
}

// write stores data as the Secret, created if sec is nil.
func (k *certKeeper) write(ctx context.Context, sec *corev1.Secret, data map[string][]byte) error {
	secrets := k.client.CoreV1().Secrets(k.namespace)
	if sec == nil {
		_, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.secret, Namespace: k.namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "edgequorum-webhook"}},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("create Secret %s/%s: %w", k.namespace, k.secret, err)
		}
		return nil
	}
	sec = sec.DeepCopy()
	sec.Data = data
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("update Secret %s/%s: %w", k.namespace, k.secret, err)
	}
	return nil
}
