package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// recorder is an HTTP test handler that records the requests it serves.
type recorder struct {
	mu       sync.Mutex
	paths    []string
	requests []*http.Request
}

func (r *recorder) record(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paths = append(r.paths, req.URL.Path)
	r.requests = append(r.requests, req.Clone(context.Background()))
}

func (r *recorder) hits(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, p := range r.paths {
		if p == path {
			n++
		}
	}
	return n
}

func (r *recorder) last() *http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.requests) == 0 {
		return nil
	}
	return r.requests[len(r.requests)-1]
}

// newTestMux serves the paths the HTTP prober tests need:
//
//	/status?code=N   answers N
//	/redirect?to=U   redirects (302) to U
//	/chain?n=N       redirects N times on the same host, then answers 200
//	/healthz         answers 200
func newTestMux(rec *recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.record(r)
		switch r.URL.Path {
		case "/status":
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			w.WriteHeader(code)
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/chain":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if n == 0 {
				w.WriteHeader(http.StatusOK)
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/chain?n=%d", n-1), http.StatusFound)
		case "/healthz":
			_, _ = w.Write([]byte("ok"))
		default:
			http.NotFound(w, r)
		}
	})
}

func serverPort(t *testing.T, ts *httptest.Server) string {
	t.Helper()
	return strconv.Itoa(ts.Listener.Addr().(*net.TCPAddr).Port)
}

func TestHTTPProberStatus(t *testing.T) {
	rec := &recorder{}
	ts := httptest.NewServer(newTestMux(rec))
	t.Cleanup(ts.Close)
	port := serverPort(t, ts)
	tests := []struct {
		code int
		want Result
	}{
		{200, Success}, {204, Success}, {299, Success},
		{300, Success}, {304, Success}, {399, Success},
		{400, Failure}, {403, Failure}, {404, Failure},
		{500, Failure}, {503, Failure},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			p, err := NewProber(mustParse(t, "http:port="+port+",path=/status?code="+strconv.Itoa(tt.code)), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second)
			if got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			if tt.want == Failure && !errors.Is(err, errHTTPStatus) {
				t.Fatalf("Probe error %v, want the status named", err)
			}
		})
	}
}

func TestHTTPProberRedirects(t *testing.T) {
	rec := &recorder{}
	ts := httptest.NewServer(newTestMux(rec))
	t.Cleanup(ts.Close)
	port := serverPort(t, ts)
	// The same server under another host name: a redirect there must not be
	// followed, so /status must not be hit through it.
	elsewhere := "http://localhost:" + port + "/status?code=500"
	tests := []struct {
		name     string
		path     string
		want     Result
		wantHits map[string]int
	}{
		{"same host followed to success", "/redirect?to=/healthz", Success, map[string]int{"/healthz": 1}},
		{"same host followed to failure", "/redirect?to=/status?code=500", Failure, map[string]int{"/status": 1}},
		{"same host absolute URL followed", "/redirect?to=http://127.0.0.1:" + port + "/healthz", Success, map[string]int{"/healthz": 1}},
		{"ten redirects are followed", "/chain?n=10", Success, map[string]int{"/chain": 11}},
		{"eleven redirects are too many", "/chain?n=11", Failure, map[string]int{"/chain": 11}},
		{"other host not followed and the 3xx counts as success", "/redirect?to=" + elsewhere, Success, map[string]int{"/status": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]int{}
			for path := range tt.wantHits {
				before[path] = rec.hits(path)
			}
			p, err := NewProber(mustParse(t, "http:port="+port+",path="+tt.path), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second)
			if got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			for path, want := range tt.wantHits {
				if n := rec.hits(path) - before[path]; n != want {
					t.Errorf("%s hit %d times, want %d", path, n, want)
				}
			}
		})
	}
}

func TestHTTPProberHeaders(t *testing.T) {
	rec := &recorder{}
	ts := httptest.NewServer(newTestMux(rec))
	t.Cleanup(ts.Close)
	port := serverPort(t, ts)
	tests := []struct {
		name        string
		headers     string
		wantHost    string
		wantHeaders map[string][]string
	}{
		{"defaults", "", "127.0.0.1:" + port,
			map[string][]string{"User-Agent": {userAgent}, "Accept": {"*/*"}}},
		{"custom headers, repeated and Host", ",header=X-Probe:yes,header=X-Multi:1,header=X-Multi:2,header=Host:example.test",
			"example.test",
			map[string][]string{"X-Probe": {"yes"}, "X-Multi": {"1", "2"}, "User-Agent": {userAgent}}},
		{"caller overrides user agent", ",header=User-Agent:mine,header=Accept:text/plain", "127.0.0.1:" + port,
			map[string][]string{"User-Agent": {"mine"}, "Accept": {"text/plain"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewProber(mustParse(t, "http:port="+port+",path=/healthz"+tt.headers), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); got != Success {
				t.Fatalf("Probe = %v (%v), want Success", got, err)
			}
			req := rec.last()
			if req.Host != tt.wantHost {
				t.Errorf("Host = %q, want %q", req.Host, tt.wantHost)
			}
			for name, want := range tt.wantHeaders {
				if got := req.Header.Values(name); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("header %s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestHTTPSProber(t *testing.T) {
	rec := &recorder{}
	ts := newTLSServer(t, newTestMux(rec))
	port := serverPort(t, ts)
	tests := []struct {
		spec string
		want Result
	}{
		{"https:port=" + port + ",path=/healthz,insecure-skip-verify=true", Success},
		{"https:port=" + port + ",path=/status?code=503,insecure-skip-verify=true", Failure},
		// The test server's certificate is self-signed, like a kubelet's.
		{"https:port=" + port + ",path=/healthz", Failure},
		// Plain HTTP to a TLS port gets a 400 from the Go server.
		{"http:port=" + port + ",path=/healthz", Failure},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := NewProber(mustParse(t, tt.spec), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestHTTPProberTimeout probes a server that accepts and never answers.
func TestHTTPProberTimeout(t *testing.T) {
	port := strconv.Itoa(hangingListener(t))
	for _, kind := range []string{"http", "https"} {
		t.Run(kind, func(t *testing.T) {
			p, err := NewProber(mustParse(t, kind+":port="+port), ProberOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := probeWithin(t, p, "127.0.0.1", 200*time.Millisecond)
			if got != Failure || !isTimeout(err) {
				t.Fatalf("Probe = %v, %v; want Failure after the deadline", got, err)
			}
		})
	}
}

func TestHTTPProberUnknown(t *testing.T) {
	p, err := NewProber(Spec{Kind: KindHTTP, Port: closedPort(t)}, ProberOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"", "bad host", "bad/host", "10.0.0.1:80", "http://10.0.0.1"} {
		t.Run(host, func(t *testing.T) {
			if got, err := probeWithin(t, p, host, time.Second); got != Unknown || err == nil {
				t.Fatalf("Probe(%q) = %v, %v; want Unknown with an error", host, got, err)
			}
		})
	}
}

func TestAgentProber(t *testing.T) {
	rec := &recorder{}
	ts := newTLSServer(t, newTestMux(rec))
	port := serverPort(t, ts)
	// The injected client is the only one that trusts the server: the probe
	// succeeds only if it really goes through it.
	client := ts.Client()
	tests := []struct {
		spec     string
		want     Result
		wantPath string
	}{
		{"agent:port=" + port, Success, "/healthz"},
		{"agent:port=" + port + ",path=/status?code=503", Failure, "/status"},
		{"agent:port=" + port + ",header=X-Peer:node-a", Success, "/healthz"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			p, err := NewProber(mustParse(t, tt.spec), ProberOptions{AgentClient: client})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := probeWithin(t, p, "127.0.0.1", 5*time.Second); got != tt.want {
				t.Fatalf("Probe = %v (%v), want %v", got, err, tt.want)
			}
			if req := rec.last(); req.URL.Path != tt.wantPath || req.TLS == nil {
				t.Fatalf("server saw %s (TLS %v), want %s over TLS", req.URL.Path, req.TLS != nil, tt.wantPath)
			}
		})
	}
	if client.CheckRedirect != nil {
		t.Error("NewProber changed the caller's client")
	}
	if _, err := NewProber(mustParse(t, "agent"), ProberOptions{}); !errors.Is(err, ErrNoAgentTransport) {
		t.Errorf("NewProber(agent, nil client) = %v, want ErrNoAgentTransport", err)
	}
}
