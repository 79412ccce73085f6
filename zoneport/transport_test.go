package zoneport

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/faultnet"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testkeys"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// testPeer is a zone-port identity for transport tests.
type testPeer struct {
	node, serverID string
	key            ed25519.PrivateKey
}

func newTestPeer(t testing.TB, node string) testPeer {
	t.Helper()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return testPeer{node: node, serverID: uuid.NewString(), key: key}
}

func (p testPeer) pub() ed25519.PublicKey { return p.key.Public().(ed25519.PublicKey) }

func (p testPeer) candidate(ip string) Candidate {
	return Candidate{Node: p.node, ProbeAddress: ip, RaftAddress: ip + ":9470", PublicKey: p.pub()}
}

// peerNet is a secureNet speaking as p from host, knowing the zone from
// members.
func peerNet(t testing.TB, host *faultnet.Host, keys *zonekeys.Ring, p testPeer, members MemberSource) *secureNet {
	t.Helper()
	return peerNetOn(t, host, host.IP(), keys, p, members)
}

// peerNetOn is peerNet on any network, advertising ip's zone port.
func peerNetOn(t testing.TB, nw Network, ip string, keys *zonekeys.Ring, p testPeer, members MemberSource) *secureNet {
	t.Helper()
	sn, err := newSecureNet(nw, keys, p.key, p.node, p.serverID, &peerBook{candidates: members},
		ip+":9470", 2*time.Second, slog.New(slog.DiscardHandler), newPortMetrics(nil))
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

// newTestNet starts a secureNet that echoes everything on the Raft channel and
// answers 200 on the peer-API channel with the caller's node name.
func newTestNet(t *testing.T, host *faultnet.Host, keys *zonekeys.Ring, p testPeer, members MemberSource) *secureNet {
	t.Helper()
	sn := peerNet(t, host, keys, p, members)
	sn.raftConn = func(ac *Conn) (net.Conn, error) { return ac, nil }
	if err := sn.listen(host.IP() + ":9470"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := sn.raft.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			caller, _ := CallerOf(r.Context())
			w.Write([]byte("peer " + caller.Node))
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if ac, ok := c.(*Conn); ok {
				return withCaller(ctx, ac.Peer)
			}
			return ctx
		},
	}
	go srv.Serve(sn.peerAPI)
	t.Cleanup(func() {
		srv.Close()
		sn.close()
		<-done
	})
	return sn
}

func TestTransportAuthentication(t *testing.T) {
	prefix := "127.0.9."
	fabric := faultnet.New()
	list := &memberList{ok: true}
	serverPeer := newTestPeer(t, "server")
	server := newTestNet(t, fabric.Host(prefix+"1"), testkeys.Ring(t, "k1", "a", "k2", "b"), serverPeer, list)
	cands := []Candidate{serverPeer.candidate(prefix + "1")}
	tests := []struct {
		name       string
		clientKeys *zonekeys.Ring
		// claim, when set, is the node the client claims to be instead of
		// its own.
		claim  string
		wantOK bool
		reason string
	}{
		{name: "same key", clientKeys: testkeys.Ring(t, "k1", "a"), wantOK: true},
		{name: "rotation: client signs with the second key", clientKeys: testkeys.Ring(t, "k2", "b", "k1", "a"), wantOK: true},
		{name: "wrong key under a known id", clientKeys: testkeys.Ring(t, "k1", "x"), reason: "bad_mac"},
		{name: "unknown key id", clientKeys: testkeys.Ring(t, "k9", "a"), reason: "unknown_key"},
		{name: "zone key, but claims another node", clientKeys: testkeys.Ring(t, "k1", "a"), claim: "server", reason: "wrong_node_key"},
		{name: "zone key, but claims a node nobody knows", clientKeys: testkeys.Ring(t, "k1", "a"), claim: "ghost", reason: "unknown_peer"},
	}
	peers := make([]testPeer, len(tests))
	for i := range tests {
		peers[i] = newTestPeer(t, fmt.Sprintf("client-%d", i))
		cands = append(cands, peers[i].candidate(fmt.Sprintf("%s%d", prefix, 2+i)))
	}
	list.set(cands, true)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clientHost := fabric.Host(fmt.Sprintf("%s%d", prefix, 2+i))
			p := peers[i]
			if tc.claim != "" {
				p.node = tc.claim
			}
			client := peerNet(t, clientHost, tc.clientKeys, p, list)
			before := 0.0
			if tc.reason != "" {
				before = testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues(tc.reason))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := client.dial(ctx, server.advertise, channelRaft)
			if !tc.wantOK {
				if err == nil {
					c.Close()
					t.Fatal("handshake succeeded without the zone key")
				}
				poll.Until(t, 5*time.Second, "failure counted", func() (bool, string) {
					return testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues(tc.reason)) > before, "not counted"
				})
				// The peer API is closed to it as well.
				resp, err := client.httpClient().Get("https://" + server.advertise + "/")
				if err == nil {
					resp.Body.Close()
					t.Fatal("peer API answered a client without the zone key")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			msg := []byte("append entries")
			c.Write(msg)
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("echo %q, %v", got, err)
			}
			resp, err := client.httpClient().Get("https://" + server.advertise + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := "peer " + p.node; string(body) != want {
				t.Fatalf("peer API body %q, want %q: the server must know its caller", body, want)
			}
		})
	}

	t.Run("plaintext is closed", func(t *testing.T) {
		before := testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues("tls"))
		c, err := fabric.Host(prefix+"2").DialContext(t.Context(), "tcp", server.advertise)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		if bytes.Contains(buf[:n], []byte("HTTP/1.1 200")) {
			t.Fatal("plaintext HTTP answered")
		}
		poll.Until(t, 5*time.Second, "failure counted", func() (bool, string) {
			return testutil.ToFloat64(server.metrics.handshakeFailures.WithLabelValues("tls")) > before, "not counted"
		})
	})
}

// memberList is a MemberSource whose list the test sets.
type memberList struct {
	mu    sync.Mutex
	cands []Candidate
	ok    bool
}

func (l *memberList) Candidates() ([]Candidate, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.cands), l.ok
}

func (l *memberList) set(cs []Candidate, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cands, l.ok = slices.Clone(cs), ok
}

// TestZonePortSlotsPerSource: a source that holds its handshake slots without
// speaking — a hostile pod in a member's host network — gets four at a time,
// each for the first-bytes second, and every other member still gets through.
func TestZonePortSlotsPerSource(t *testing.T) {
	prefix := "127.0.10."
	fabric := faultnet.New()
	list := &memberList{ok: true}
	server, member, squatter := newTestPeer(t, "server"), newTestPeer(t, "member"), newTestPeer(t, "squatter")
	list.set([]Candidate{server.candidate(prefix + "1"), member.candidate(prefix + "2"), squatter.candidate(prefix + "3")}, true)
	keys := testkeys.Ring(t, "k1", "a")
	sn := newTestNet(t, fabric.Host(prefix+"1"), keys, server, list)
	held := fabric.Host(prefix + "3")
	var conns []io.Closer
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range maxHandshakesPerSource + 3 {
		c, err := held.DialContext(t.Context(), "tcp", sn.advertise)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	poll.Until(t, 10*time.Second, "slots beyond the per-source limit refused", func() (bool, string) {
		got := testutil.ToFloat64(sn.metrics.handshakeFailures.WithLabelValues("source_limit"))
		return got == 3, fmt.Sprintf("%v refused", got)
	})
	// Another member is not shut out meanwhile.
	client := peerNet(t, fabric.Host(prefix+"2"), keys, member, list)
	c, err := client.dial(t.Context(), sn.advertise, channelRaft)
	if err != nil {
		t.Fatalf("a member dialling while another source holds its slots: %v", err)
	}
	c.Close()
	// The silent ones are closed after the first-bytes deadline.
	poll.Until(t, 10*time.Second, "silent connections closed", func() (bool, string) {
		got := testutil.ToFloat64(sn.metrics.handshakeFailures.WithLabelValues("silent"))
		return got == maxHandshakesPerSource, fmt.Sprintf("%v closed as silent", got)
	})
}
