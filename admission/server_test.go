package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
	"github.com/edgequorum/edgequorum/internal/poll"
)

// tlsClient trusts only the CA whose PEM is given.
func tlsClient(t *testing.T, caPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func TestServerRoutes(t *testing.T) {
	env := startWebhook(t, nil)
	c := tlsClient(t, env.caPool)
	base := "https://" + env.addr

	review := readFixture(t, "node_vouched_zone_lease.json")
	resp, err := c.Post(base+"/mutate/node", "application/json", bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /mutate/node over TLS: %d %s", resp.StatusCode, body)
	}
	if r := decodeResponse(t, body, "uid-node_vouched_zone_lease"); r.Patch == nil {
		t.Error("no patch over TLS")
	}

	tests := []struct {
		path string
		code int
		has  string
	}{
		{"/healthz", http.StatusOK, "ok"},
		{"/readyz", http.StatusOK, "ok"},
		{"/metrics", http.StatusOK, `edgequorum_admission_requests_total{decision="mutated",resource="node"} 1`},
		{"/metrics", http.StatusOK, "edgequorum_admission_duration_seconds_bucket"},
		{"/metrics", http.StatusOK, "edgequorum_admission_errors_total"},
		{"/nope", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		resp, err := c.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.has) {
			t.Errorf("GET %s: %d, want %d containing %q; body:\n%.300s", tt.path, resp.StatusCode, tt.code, tt.has, b)
		}
	}
}

func TestReadyzBeforeSync(t *testing.T) {
	env := newWebhook(t, nil)
	rec := httptestDo(env, http.MethodGet, "/readyz", "")
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync: %d, want 503", rec.Code)
	}
	if rec := httptestDo(env, http.MethodGet, "/healthz", ""); rec.Code != http.StatusOK {
		t.Errorf("/healthz before sync: %d, want 200", rec.Code)
	}
}

// servedSerial returns the serial of the certificate the server presents.
func servedSerial(t *testing.T, addr string, caPEM []byte) *big.Int {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

func leafSerial(t *testing.T, b *webhookcerts.Bundle) *big.Int {
	t.Helper()
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.SerialNumber
}

func leafNotAfter(t *testing.T, b *webhookcerts.Bundle) time.Time {
	t.Helper()
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair.Leaf.NotAfter
}

// rotate writes a new pair and moves the files' mtime forward, so the change is
// seen even on a file system with coarse timestamps.
func rotate(t *testing.T, dir string, b *webhookcerts.Bundle, at time.Time) {
	t.Helper()
	if err := b.WriteFiles(dir, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{webhookcerts.CertFile, webhookcerts.KeyFile} {
		if err := os.Chtimes(filepath.Join(dir, f), at, at); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCertReload(t *testing.T) {
	env := startWebhook(t, nil)
	first := servedSerial(t, env.addr, env.caPool)
	expiry := func() float64 { return counter(t, env.w.metrics.certExpiry) }
	served, err := tls.LoadX509KeyPair(filepath.Join(env.dir, webhookcerts.CertFile), filepath.Join(env.dir, webhookcerts.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := expiry(), float64(served.Leaf.NotAfter.Unix()); got != want {
		t.Errorf("certificate_expiry_timestamp_seconds = %v, want the served certificate's %v", got, want)
	}

	next := writeTestCerts(t, t.TempDir())
	rotate(t, env.dir, next, time.Now().Add(time.Hour))
	if got, want := servedSerial(t, env.addr, next.CACert), leafSerial(t, next); got.Cmp(want) != 0 || got.Cmp(first) == 0 {
		t.Errorf("after rotation the server presents serial %v, want the new %v", got, want)
	}
	if got, want := expiry(), float64(leafNotAfter(t, next).Unix()); got != want {
		t.Errorf("after rotation certificate_expiry_timestamp_seconds = %v, want the new certificate's %v", got, want)
	}
	if got := counter(t, env.w.metrics.tlsReloads.WithLabelValues("ok")); got != 1 {
		t.Errorf("tls_reloads_total{ok} = %v, want 1", got)
	}

	// A broken pair (a key that does not match) keeps the last good one
	// in service and is counted once, not on every handshake.
	other := writeTestCerts(t, t.TempDir())
	if err := os.WriteFile(filepath.Join(env.dir, webhookcerts.KeyFile), other.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(2 * time.Hour)
	if err := os.Chtimes(filepath.Join(env.dir, webhookcerts.KeyFile), later, later); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got, want := servedSerial(t, env.addr, next.CACert), leafSerial(t, next); got.Cmp(want) != 0 {
			t.Errorf("with a broken pair on disk the server presents %v, want the last good %v", got, want)
		}
	}
	if got := counter(t, env.w.metrics.tlsReloads.WithLabelValues("error")); got != 1 {
		t.Errorf("tls_reloads_total{error} = %v, want 1", got)
	}
}

func TestNewFailsWithoutCertificate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Repair = false
	cfg.TLSCertFile = filepath.Join(t.TempDir(), "missing.crt")
	cfg.TLSKeyFile = filepath.Join(t.TempDir(), "missing.key")
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "missing.crt") {
		t.Errorf("New with missing files: %v", err)
	}
}

// TestRunStopsEverything: after Run returns, no goroutine of the webhook (server,
// informers, repair loop, leader election) is left.
func TestRunStopsEverything(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	env := newWebhook(t, func(c *Config) {
		c.Repair = true
		c.RetryPeriod, c.RenewDeadline, c.LeaseDuration = 50*time.Millisecond, 200*time.Millisecond, 300*time.Millisecond
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.w.cfg.Listener = ln
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.w.Run(ctx) }()
	poll.UntilTrue(t, waitTimeout, "caches to sync", env.w.Ready)
	poll.UntilTrue(t, waitTimeout, "the repair loop to lead", func() bool { return counter(t, env.w.metrics.repairLeader) == 1 })
	servedSerial(t, ln.Addr().String(), env.caPool)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if env.w.Ready() {
		t.Error("still ready after Run returned")
	}
}

func TestRunFailsOnBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	env := newWebhook(t, func(c *Config) { c.ListenAddress = ln.Addr().String() })
	err = env.w.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "--listen-address") {
		t.Errorf("Run on a busy address: %v", err)
	}
}

// TestShutdownAnswersReviewsWhileDraining: once its context ends, the webhook
// says it is not ready but keeps answering reviews for --shutdown-delay, as
// the apiserver keeps sending them until the Service drops the replica; only
// then does it close the port.
func TestShutdownAnswersReviewsWhileDraining(t *testing.T) {
	env := newWebhook(t, func(c *Config) { c.ShutdownDelay = time.Minute })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.w.cfg.Listener = ln
	base := "https://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.w.Run(ctx) }()
	poll.UntilTrue(t, waitTimeout, "caches to sync", env.w.Ready)

	c := tlsClient(t, env.caPool)
	get := func(path string) (int, error) {
		resp, err := c.Get(base + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// A client that keeps its connection, as the apiserver does: one
	// review before the stop leaves it idle in the client's pool.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.caPool)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(tr.CloseIdleConnections)
	keep := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	review := readFixture(t, "node_vouched_zone_lease.json")
	post := func() (*http.Response, []byte, bool) {
		t.Helper()
		reused := false
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mutate/node", bytes.NewReader(review))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := keep.Do(req)
		if err != nil {
			t.Fatalf("a review: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, body, reused
	}
	if resp, _, _ := post(); resp.Close {
		t.Fatal("a review before the stop closed its connection")
	}
	cancel()
	poll.UntilTrue(t, waitTimeout, "/readyz to fail", func() bool {
		code, err := get("/readyz")
		return err == nil && code == http.StatusServiceUnavailable
	})
	if env.w.Ready() {
		t.Error("Ready while draining")
	}
	// The connection left idle before the stop still takes a review: a
	// server that closed idle connections at the stop would race every
	// client about to reuse one (a broken pipe, a skipped review). The
	// answer asks the client to close it.
	resp, body, reused := post()
	if !reused {
		t.Error("the idle connection was closed at the stop")
	}
	if !resp.Close {
		t.Error("a review while draining did not ask the client to close its connection")
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a review while draining: %d %s", resp.StatusCode, body)
	}
	if r := decodeResponse(t, body, "uid-node_vouched_zone_lease"); r.Patch == nil {
		t.Error("a review while draining was answered without its patch: the caches stopped with the context")
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned before the delay: %v", err)
	default:
	}

	// The delay runs on the webhook's clock.
	var runErr error
	poll.UntilTrue(t, waitTimeout, "Run to return once the delay passed", func() bool {
		env.clock.Step(time.Minute)
		select {
		case runErr = <-done:
			return true
		default:
			return false
		}
	})
	if runErr != nil {
		t.Fatalf("Run: %v", runErr)
	}
	if _, err := get("/healthz"); err == nil {
		t.Error("the port still answers after Run returned")
	}
}

func TestShutdownDelayMustNotBeNegative(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = "c", "k"
	cfg.ShutdownDelay = -time.Second
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--shutdown-delay") {
		t.Errorf("Validate with a negative delay: %v", err)
	}
}
