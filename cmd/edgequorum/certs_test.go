package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestCertsWritesAPairAndPrintsTheCABundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"certs", "--out-dir", dir, "--ip-sans", "127.0.0.1, ::1", "--service", "wh", "--namespace", "ns"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	caPEM, err := base64.StdEncoding.DecodeString(strings.TrimSpace(stdout.String()))
	if err != nil {
		t.Fatalf("stdout is not base64: %v", err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil || !bytes.Equal(onDisk, caPEM) {
		t.Fatalf("printed caBundle differs from ca.crt (%v)", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	certPEM, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"wh.ns.svc", "wh.ns.svc.cluster.local", "127.0.0.1", "::1"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("certificate does not verify for %s: %v", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key mode: %v %v", fi.Mode(), err)
	}
	if got := cert.IPAddresses; len(got) != 2 || !got[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("IP SANs = %v", got)
	}
}

func TestCertsUsage(t *testing.T) {
	existing := t.TempDir()
	if code := run(context.Background(), []string{"certs", "--out-dir", existing}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("first run: exit %d", code)
	}
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"no out dir", nil, "give exactly one of --out-dir and --install"},
		{"bad ip", []string{"--out-dir", t.TempDir(), "--ip-sans", "localhost"}, "--ip-sans"},
		{"bad service", []string{"--out-dir", t.TempDir(), "--service", "No_Such"}, "--service"},
		{"zero validity", []string{"--out-dir", t.TempDir(), "--validity", "0s"}, "--validity"},
		{"files exist", []string{"--out-dir", existing}, "--force"},
		{"unknown flag", []string{"--nope"}, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"certs"}, tt.args...), &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("exit %d, stderr %q; want 2 mentioning %q", code, stderr.String(), tt.says)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q on a usage error", stdout.String())
			}
		})
	}
	if code := run(context.Background(), []string{"certs", "--out-dir", existing, "--force"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Errorf("--force over existing files: exit %d", code)
	}
}

// TestCertsDefaultNamespace: without --namespace the certificate is for the
// Service deploy/webhook installs, in the webhook's own namespace.
func TestCertsDefaultNamespace(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"certs", "--out-dir", dir, "--force"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	const want = "edgequorum-webhook.edgequorum-webhook.svc"
	if err := cert.VerifyHostname(want); err != nil {
		t.Errorf("default certificate not valid for %s: %v (DNS names %v)", want, err, cert.DNSNames)
	}
}

func TestCertsInstallFillsEveryCABundleAndAddsTheSecret(t *testing.T) {
	var out, errOut bytes.Buffer
	manifests := filepath.Join("..", "..", "deploy", "install", "webhook.yaml")
	if code := run(context.Background(), []string{"certs", "--install", manifests}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	docs := strings.Split(out.String(), "---\n")
	var ca []byte
	hooks := 0
	var secret *corev1.Secret
	for _, d := range docs {
		if strings.TrimSpace(d) == "" {
			continue
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var mwc admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.UnmarshalStrict([]byte(d), &mwc); err != nil {
				t.Fatal(err)
			}
			for _, h := range mwc.Webhooks {
				hooks++
				if ca == nil {
					ca = h.ClientConfig.CABundle
				}
				if len(h.ClientConfig.CABundle) == 0 || !bytes.Equal(h.ClientConfig.CABundle, ca) {
					t.Errorf("webhook %s: caBundle not set to the one CA", h.Name)
				}
			}
		case "Secret":
			secret = &corev1.Secret{}
			if err := yaml.UnmarshalStrict([]byte(d), secret); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hooks == 0 || secret == nil {
		t.Fatalf("output has %d webhooks and Secret %v", hooks, secret)
	}
	if secret.Namespace != "edgequorum-webhook" || secret.Name != "edgequorum-webhook-tls" || secret.Type != corev1.SecretTypeTLS {
		t.Fatalf("Secret %s/%s type %s", secret.Namespace, secret.Name, secret.Type)
	}
	if got, _ := verifyCABundles([]admissionregistrationv1.MutatingWebhook{{Name: "x", ClientConfig: admissionregistrationv1.WebhookClientConfig{CABundle: ca,
		Service: &admissionregistrationv1.ServiceReference{Namespace: "edgequorum-webhook", Name: "edgequorum-webhook"}}}}, mustCert(t, secret.Data[corev1.TLSCertKey])); got != checkOK {
		t.Fatal("the caBundle does not verify the Secret's certificate for the webhook Service")
	}
	if !strings.HasSuffix(strings.TrimSpace(docs[len(docs)-1]), "type: kubernetes.io/tls") {
		t.Error("the Secret must come last, after its Namespace")
	}
}

func mustCert(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	c, err := firstCert(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
