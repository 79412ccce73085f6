package zoneport

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestPeerServerOutlivesTheClient: the server keeps an idle connection
// longer than the client and than its own read timeout, so that the client
// always lets go first.
func TestPeerServerOutlivesTheClient(t *testing.T) {
	srv := NewPeerServer(http.NotFoundHandler(), nil)
	if srv.IdleTimeout <= PeerIdleClient || srv.IdleTimeout <= srv.ReadTimeout {
		t.Errorf("peer server IdleTimeout %s must exceed the client's %s and ReadTimeout %s", srv.IdleTimeout, PeerIdleClient, srv.ReadTimeout)
	}
}

// TestPeerAPIShutdownSkipsFreshConnections checks that a stopping member's
// peer API does not wait for connections that never sent a request:
// http.Server.Shutdown counts those as busy for five seconds, and a peer's
// client often holds one, so the member would lie dead that long.
func TestPeerAPIShutdownSkipsFreshConnections(t *testing.T) {
	api := NewPeerServer(http.NotFoundHandler(), nil)
	accepted := make(chan struct{}, 1)
	track := api.ConnState
	api.ConnState = func(c net.Conn, st http.ConnState) {
		track(c, st)
		if st == http.StateNew {
			accepted <- struct{}{}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
