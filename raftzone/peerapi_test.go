package raftzone

import (
	"context"
	"net"
	"net/http"
	"net/http/httptrace"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/zoneport"
)

// TestPeerConnectionsAreReused checks that peer-API calls share an
// authenticated connection instead of paying a TLS handshake and zone-key
// proof each, and that the server keeps idle connections longer than the
// client: net/http's default would close them after ReadTimeout, so every
// probe of a slower period would handshake again.
func TestPeerConnectionsAreReused(t *testing.T) {
	z := newTestZone(t, 2)
	z.startAll()
	z.waitConverged(60*time.Second, 2)
	a, b := z.nodes["node-1"], z.nodes["node-2"]
	// Count this client's own connections, not the member's handshake
	// metric: Raft replication may dial at any moment (a new voter's
	// pipeline), and that is not what this test is about.
	var fresh, calls int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			calls++
			if !info.Reused {
				fresh++
			}
		},
	})
	if err := a.srv.callPeer(ctx, b.ip+":9470", "/healthz", nil, nil); err != nil {
		t.Fatal(err)
	}
	fresh, calls = 0, 0
	for range 10 {
		if err := a.srv.callPeer(ctx, b.ip+":9470", "/healthz", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 10 || fresh != 0 {
		t.Errorf("10 sequential peer calls got %d connections, %d of them new; want 10, none new", calls, fresh)
	}

	srv := a.srv.peerServer()
	if srv.IdleTimeout <= zoneport.PeerIdleClient || srv.IdleTimeout <= srv.ReadTimeout {
		t.Errorf("peer server IdleTimeout %s must exceed the client's %s and ReadTimeout %s", srv.IdleTimeout, zoneport.PeerIdleClient, srv.ReadTimeout)
	}
}

// TestPeerAPIShutdownSkipsFreshConnections checks that a stopping member's
// peer API does not wait for connections that never sent a request:
// http.Server.Shutdown counts those as busy for five seconds, and a peer's
// client often holds one, so the member would lie dead that long.
func TestPeerAPIShutdownSkipsFreshConnections(t *testing.T) {
	z := newTestZone(t, 1)
	n := z.nodes["node-1"]
	srv, err := New(testConfig(n), Deps{Members: z.list, Genesis: z.genesis})
	if err != nil {
		t.Fatal(err)
	}
	api := srv.peerServer()
	accepted := make(chan struct{}, 1)
	track := api.ConnState
	api.ConnState = func(c net.Conn, st http.ConnState) {
		track(c, st)
		if st == http.StateNew {
			accepted <- struct{}{}
		}
	}
	ln, err := net.Listen("tcp", n.ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- api.Serve(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the server never accepted the connection")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := api.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a fresh connection open: %v", err)
	}
	<-served
}
