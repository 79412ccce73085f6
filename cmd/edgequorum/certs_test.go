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
		{"no out dir", nil, "--out-dir is required"},
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
