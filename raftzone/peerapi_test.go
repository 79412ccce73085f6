package raftzone

import (
	"context"
	"net/http/httptrace"
	"testing"
	"time"
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
}
