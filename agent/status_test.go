package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

type fakeStatus struct {
	fetches, matrixFetches atomic.Int32
	// matrixErr, when set, is what both matrix reads fail with.
	matrixErr error
}

func (f *fakeStatus) Status() raftzone.Status { return raftzone.Status{Ready: true, Node: "edge-1"} }
func (f *fakeStatus) FetchLeaderStatus(context.Context) (raftzone.Status, error) {
	f.fetches.Add(1)
	return raftzone.Status{Node: "leader"}, nil
}

func (f *fakeStatus) Matrix() (raftzone.MatrixView, error) {
	return testMatrix("edge-1"), f.matrixErr
}

func (f *fakeStatus) FetchLeaderMatrix(context.Context) (raftzone.MatrixView, error) {
	f.matrixFetches.Add(1)
	return testMatrix("edge-2"), f.matrixErr
}

// testMatrix is a zone of two that reach each other, seen from node.
func testMatrix(node string) raftzone.MatrixView {
	age := 1.0
	ok := raftzone.MatrixCell{State: raftzone.CellReached, OK: true, Score: 100, AgeSeconds: &age}
	none := raftzone.MatrixCell{State: raftzone.CellNone}
	return raftzone.MatrixView{Zone: "shop-1", Node: node, Term: 3, Leader: "edge-2", At: time.Now(), VoteTimeoutSeconds: 17,
		Members: []string{"edge-1", "edge-2"},
		Rows: []raftzone.MatrixRow{
			{Checker: "edge-1", Verdict: zone.Healthy, Pros: 1, Cells: []raftzone.MatrixCell{none, ok}},
			{Checker: "edge-2", Verdict: zone.Healthy, Pros: 1, Cells: []raftzone.MatrixCell{ok, none}},
		}}
}

// serveFrom has h answer a GET of path sent from the address from to the
// address to, port 9471, as a status server sees it.
func serveFrom(h http.Handler, path, from, to string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://"+to+path, nil)
	req.RemoteAddr = net.JoinHostPort(from, "40000")
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
		&net.TCPAddr{IP: net.ParseIP(to), Port: 9471}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestStatusServerKeepsTheZoneToItsNode: kubelet probes reach /healthz and
// /readyz from anywhere; the zone's details only from this node (loopback, or
// the address the request came in on) or an allowed network.
func TestStatusServerKeepsTheZoneToItsNode(t *testing.T) {
	src := &fakeStatus{}
	h := newStatusRouter(src, prometheus.NewRegistry(), []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, false)
	serve := func(path, from, to string) int { return serveFrom(h, path, from, to).Code }
	const node = "192.0.2.10"
	for _, c := range []struct {
		path, from string
		want       int
	}{
		{"/healthz", "198.51.100.7", http.StatusOK},
		{"/readyz", "198.51.100.7", http.StatusOK},
		{"/v1/status", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/leader", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/matrix", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/matrix.svg", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/leader/matrix", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/leader/matrix.svg", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/matrix.svg", node, http.StatusOK},
		{"/v1/status/leader/matrix", "10.9.3.4", http.StatusOK},
		{"/metrics", "198.51.100.7", http.StatusForbidden},
		{"/v1/status", "127.0.0.1", http.StatusOK},
		{"/metrics", "::1", http.StatusOK},
		{"/v1/status", node, http.StatusOK}, // kubectl exec … edgequorum status in the hostNetwork pod
		{"/metrics", "10.9.3.4", http.StatusOK},
	} {
		if got := serve(c.path, c.from, node); got != c.want {
			t.Errorf("GET %s from %s: %d, want %d", c.path, c.from, got, c.want)
		}
	}
	// The leader's view is fetched at most once a second, however often it
	// is asked for.
	before := src.fetches.Load()
	for range 20 {
		if got := serve("/v1/status/leader", "127.0.0.1", node); got != http.StatusOK {
			t.Fatalf("leader status: %d", got)
		}
	}
	if got := src.fetches.Load() - before; got > 2 {
		t.Errorf("20 requests made %d leader fetches, want at most 2", got)
	}
}

// TestStatusServerServesTheMatrix: this member's matrix and the leader's, as
// JSON and as a picture the browser shows as SVG and may run nothing of; the
// leader's fetched at most once a second; a failed read a 503 that says why.
func TestStatusServerServesTheMatrix(t *testing.T) {
	src := &fakeStatus{}
	h := newStatusRouter(src, prometheus.NewRegistry(), nil, false)
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9471"+path, nil)
		req.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for path, node := range map[string]string{"/v1/status/matrix": "edge-1", "/v1/status/leader/matrix": "edge-2"} {
		rec := get(path)
		var v raftzone.MatrixView
		if err := json.Unmarshal(rec.Body.Bytes(), &v); rec.Code != http.StatusOK || err != nil || v.Node != node || len(v.Rows) != 2 {
			t.Errorf("GET %s: %d, %v, view of %q with %d rows; want 200 and %s's view", path, rec.Code, err, v.Node, len(v.Rows), node)
		}
		rec = get(path + ".svg")
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/svg+xml" ||
			!strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("GET %s.svg: %d, headers %v; want 200, image/svg+xml and a CSP that allows no script", path, rec.Code, rec.Header())
		}
		dec := xml.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("GET %s.svg: not well-formed: %v", path, err)
			}
		}
		if body := rec.Body.String(); !strings.Contains(body, "seen from "+node) || !strings.Contains(body, ">edge-1</text>") {
			t.Errorf("GET %s.svg does not show %s's view naming its members:\n%s", path, node, body)
		}
	}
	before := src.matrixFetches.Load()
	for range 20 {
		if rec := get("/v1/status/leader/matrix.svg"); rec.Code != http.StatusOK {
			t.Fatalf("leader's matrix: %d", rec.Code)
		}
	}
	if got := src.matrixFetches.Load() - before; got > 2 {
		t.Errorf("20 requests made %d leader matrix fetches, want at most 2", got)
	}

	failing := newStatusRouter(&fakeStatus{matrixErr: errors.New("no zone leader is known")}, prometheus.NewRegistry(), nil, false)
	for _, path := range []string{"/v1/status/matrix", "/v1/status/leader/matrix.svg"} {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9471"+path, nil)
		req.RemoteAddr = "127.0.0.1:40000"
		rec := httptest.NewRecorder()
		failing.ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no zone leader is known") {
			t.Errorf("GET %s with the read failing: %d %q, want 503 saying why", path, rec.Code, rec.Body.String())
		}
	}
}

// TestStatusServerProfiles: with --profiling the runtime's profiles are
// served, as text with ?debug=1, to this node and allowed networks only;
// without it, not at all.
func TestStatusServerProfiles(t *testing.T) {
	const node = "192.0.2.10"
	get := func(h http.Handler, path, from string) *httptest.ResponseRecorder {
		return serveFrom(h, path, from, node)
	}
	off := newStatusRouter(&fakeStatus{}, prometheus.NewRegistry(), nil, false)
	if rec := get(off, "/debug/pprof/goroutine?debug=1", "127.0.0.1"); rec.Code != http.StatusNotFound {
		t.Fatalf("profile without --profiling: %d, want 404", rec.Code)
	}
	on := newStatusRouter(&fakeStatus{}, prometheus.NewRegistry(), []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}, true)
	rec := get(on, "/debug/pprof/goroutine?debug=1", "127.0.0.1")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine profile: total") {
		t.Fatalf("goroutine profile: %d %.200q", rec.Code, rec.Body.String())
	}
	if rec := get(on, "/debug/pprof/heap", "10.9.3.4"); rec.Code != http.StatusOK || rec.Body.Len() == 0 ||
		rec.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("heap profile from an allowed network: %d, %d bytes, %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"))
	}
	for _, c := range []struct {
		path, from string
		want       int
	}{
		{"/debug/pprof/heap", "198.51.100.7", http.StatusForbidden},
		{"/debug/pprof/goroutine?debug=7", "127.0.0.1", http.StatusBadRequest},
		{"/debug/pprof/block", "127.0.0.1", http.StatusNotFound},
		{"/debug/pprof/allocs?debug=1", node, http.StatusOK},
		{"/debug/pprof/profile?seconds=0", "127.0.0.1", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=11", "127.0.0.1", http.StatusBadRequest},
		{"/debug/pprof/profile?seconds=1", "198.51.100.7", http.StatusForbidden},
	} {
		if rec := get(on, c.path, c.from); rec.Code != c.want {
			t.Errorf("GET %s from %s: %d, want %d", c.path, c.from, rec.Code, c.want)
		}
	}
	// A CPU profile of one second, for go tool pprof; none while another
	// runs, the runtime having one profiler.
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Fatal(err)
	}
	busy := get(on, "/debug/pprof/profile?seconds=1", "127.0.0.1")
	pprof.StopCPUProfile()
	if busy.Code != http.StatusConflict {
		t.Errorf("CPU profile while another runs: %d, want 409", busy.Code)
	}
	first := get(on, "/debug/pprof/profile?seconds=1", "127.0.0.1")
	if first.Code != http.StatusOK || first.Body.Len() == 0 || first.Header().Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("CPU profile: %d, %d bytes, %q", first.Code, first.Body.Len(), first.Header().Get("Content-Type"))
	}
}
