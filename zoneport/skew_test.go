package zoneport

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/faultnet"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testkeys"
	"github.com/edgequorum/edgequorum/skew"
)

// TestHandshakeCarriesEachSidesRelease: a member of the next release is
// admitted and known by what it announced; one that announces a level older
// than this build shares a zone with is refused, and says why on both sides.
func TestHandshakeCarriesEachSidesRelease(t *testing.T) {
	prefix := "127.0.10."
	fabric := faultnet.New()
	list := &memberList{ok: true}
	keys := testkeys.Ring(t, "k1", "a")
	serverPeer := newTestPeer(t, "server")
	server := newTestNet(t, fabric.Host(prefix+"1"), keys, serverPeer, list)
	got := make(chan Peer, 4)
	server.raftConn = func(ac *Conn) (net.Conn, error) { got <- ac.Peer; return ac, nil }
	newer, older := newTestPeer(t, "newer"), newTestPeer(t, "older")
	list.set([]Candidate{serverPeer.candidate(prefix + "1"), newer.candidate(prefix + "2"), older.candidate(prefix + "3")}, true)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	next := peerNet(t, fabric.Host(prefix+"2"), keys, newer, list)
	next.self = skew.Announcement{Release: "v9.0.0", Level: skew.Current() + 1}
	c, err := next.dial(ctx, server.advertise, channelRaft)
	if err != nil {
		t.Fatalf("a member of the next release was refused: %v", err)
	}
	c.Close()
	if p := <-got; p.Release != "v9.0.0" || p.Level != skew.Current()+1 {
		t.Errorf("server knows the newer peer as %q at %v, want v9.0.0 at %v", p.Release, p.Level, skew.Current()+1)
	}

	before := testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues("release_skew"))
	old := peerNet(t, fabric.Host(prefix+"3"), keys, older, list)
	old.self = skew.Announcement{Level: skew.Oldest() - 1}
	if c, err := old.dial(ctx, server.advertise, channelRaft); err == nil {
		c.Close()
		t.Fatal("a member older than N−1 was admitted")
	}
	requireCounted(t, server, "release_skew", before+1)

	// A release that is no version (a stolen box's terminal escape) is
	// refused, under the zone key or not.
	before = testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues("bad_mac"))
	old.self = skew.Announcement{Release: "v1\x1b[2J", Level: skew.Current()}
	if c, err := old.dial(ctx, server.advertise, channelRaft); err == nil {
		c.Close()
		t.Fatal("a peer announcing a release with control characters was admitted")
	}
	requireCounted(t, server, "bad_mac", before+1)

	// The other way round: this build dialling a peer too old for it says
	// what to do.
	server.self = skew.Announcement{Level: skew.Oldest() - 1}
	_, err = next.dial(ctx, server.advertise, channelRaft)
	if err == nil || !strings.Contains(err.Error(), "upgrade the peer") {
		t.Errorf("dialling a too old peer: %v, want advice to upgrade the peer", err)
	}
}

// requireCounted waits until the server has counted want handshake failures
// of reason: it counts after the dialer has seen the connection close.
func requireCounted(t *testing.T, server *secureNet, reason string, want float64) {
	t.Helper()
	poll.Until(t, 5*time.Second, reason+" counted", func() (bool, string) {
		n := testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues(reason))
		return n == want, fmt.Sprintf("%v", n)
	})
}
