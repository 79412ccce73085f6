package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/raftzone"
)

type fakeStatus struct{ fetches atomic.Int32 }

func (f *fakeStatus) Status() raftzone.Status { return raftzone.Status{Ready: true, Node: "edge-1"} }
func (f *fakeStatus) FetchLeaderStatus(context.Context) (raftzone.Status, error) {
	f.fetches.Add(1)
	return raftzone.Status{Node: "leader"}, nil
}

// TestStatusServerKeepsTheZoneToItsNode: kubelet probes reach /healthz and
// /readyz from anywhere; the zone's details only from this node (loopback, or
// the address the request came in on) or an allowed network.
func TestStatusServerKeepsTheZoneToItsNode(t *testing.T) {
	src := &fakeStatus{}
	h := newStatusRouter(src, prometheus.NewRegistry(), []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")})
	serve := func(path, from, to string) int {
		req := httptest.NewRequest(http.MethodGet, "http://"+to+path, nil)
		req.RemoteAddr = net.JoinHostPort(from, "40000")
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey,
			&net.TCPAddr{IP: net.ParseIP(to), Port: 9471}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	const node = "192.0.2.10"
	for _, c := range []struct {
		path, from string
		want       int
	}{
		{"/healthz", "198.51.100.7", http.StatusOK},
		{"/readyz", "198.51.100.7", http.StatusOK},
		{"/v1/status", "198.51.100.7", http.StatusForbidden},
		{"/v1/status/leader", "198.51.100.7", http.StatusForbidden},
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
