package raftzone

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	dialled := a.srv.metrics.handshakes.WithLabelValues("client")
	ctx := context.Background()
	if err := a.srv.callPeer(ctx, b.ip+":9470", "/healthz", nil, nil); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(dialled)
	for range 10 {
		if err := a.srv.callPeer(ctx, b.ip+":9470", "/healthz", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(dialled) - before; got != 0 {
		t.Errorf("10 sequential peer calls dialled %v new connections, want 0", got)
	}

	srv := a.srv.peerServer()
	if srv.IdleTimeout <= peerIdleClient || srv.IdleTimeout <= srv.ReadTimeout {
		t.Errorf("peer server IdleTimeout %s must exceed the client's %s and ReadTimeout %s", srv.IdleTimeout, peerIdleClient, srv.ReadTimeout)
	}
}
