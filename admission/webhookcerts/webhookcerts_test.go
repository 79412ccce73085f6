package webhookcerts

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestGenerate(t *testing.T) {
	clk := clocktesting.NewFakeClock(testNow)
	b, err := Generate(Options{Service: "wh", Namespace: "ns", Validity: 48 * time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatalf("cert and key do not match: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CACert) {
		t.Fatal("CA does not parse")
	}
	for _, tt := range []struct {
		name string
		at   time.Time
		ok   bool
	}{
		{"wh.ns.svc", testNow, true},
		{"wh.ns.svc.cluster.local", testNow.Add(47 * time.Hour), true},
		{"wh.ns.svc", testNow.Add(-10 * time.Minute), false},
		{"wh.ns.svc", testNow.Add(48*time.Hour + time.Second), false},
		{"other.ns.svc", testNow, false},
	} {
		_, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: tt.name, Roots: pool, CurrentTime: tt.at})
		if (err == nil) != tt.ok {
			t.Errorf("verify %s at %s: %v, want ok=%v", tt.name, tt.at, err, tt.ok)
		}
	}
	if ca, _ := base64.StdEncoding.DecodeString(b.CABundle()); string(ca) != string(b.CACert) {
		t.Error("CABundle is not the base64 CA")
	}
	for _, bad := range []Options{
		{Service: "", Namespace: "ns", Validity: time.Hour},
		{Service: "wh", Namespace: "NS", Validity: time.Hour},
		{Service: "wh", Namespace: "ns"},
	} {
		if _, err := Generate(bad); err == nil {
			t.Errorf("Generate(%+v) succeeded", bad)
		}
	}
}

func TestWriteFilesRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	b, err := Generate(Options{Service: "wh", Namespace: "ns", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFiles(dir, false); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFiles(dir, false); !errors.Is(err, ErrExists) {
		t.Errorf("second WriteFiles: %v, want ErrExists", err)
	}
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v (%v), want 0600", fi.Mode(), err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// testNow is the fake clock's start.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
