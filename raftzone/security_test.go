package raftzone

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/faultnet"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

func keyring(t *testing.T, pairs ...string) *zonekeys.Ring {
	t.Helper()
	var lines []string
	for i := 0; i < len(pairs); i += 2 {
		lines = append(lines, pairs[i]+":"+base64.StdEncoding.EncodeToString([]byte(strings.Repeat(pairs[i+1], 32))))
	}
	k, err := zonekeys.Parse(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

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

// peerOf reads the identity a zone member keeps in its data dir: what an
// attacker who took the node apart holds.
func peerOf(t testing.TB, n *testNode) testPeer {
	t.Helper()
	key, err := LoadOrCreateNodeKey(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := loadOrCreateServerID(n.dir)
	if err != nil {
		t.Fatal(err)
	}
	return testPeer{node: n.name, serverID: id, key: key}
}

func (p testPeer) pub() ed25519.PublicKey { return p.key.Public().(ed25519.PublicKey) }

func (p testPeer) candidate(ip string) Candidate {
	return Candidate{Node: p.node, ProbeAddress: ip, RaftAddress: ip + ":9470", PublicKey: p.pub()}
}

// peerNet is a secureNet speaking as p from host, knowing the zone from
// members.
func peerNet(t testing.TB, host *faultnet.Host, keys *zonekeys.Ring, p testPeer, members MemberSource) *secureNet {
	t.Helper()
	sn, err := newSecureNet(host, keys, p.key, p.node, p.serverID, &peerBook{candidates: members},
		host.IP()+":9470", 2*time.Second, slog.New(slog.DiscardHandler), newPortMetrics(nil))
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
	sn.raftConn = func(ac *authConn) (net.Conn, error) { return ac, nil }
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
			caller, _ := callerOf(r.Context())
			w.Write([]byte("peer " + caller.Node))
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if ac, ok := c.(*authConn); ok {
				return withCaller(ctx, ac.peer)
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
	prefix := randomPrefix(t)
	fabric := faultnet.New()
	list := &memberList{ok: true}
	serverPeer := newTestPeer(t, "server")
	server := newTestNet(t, fabric.Host(prefix+"1"), keyring(t, "k1", "a", "k2", "b"), serverPeer, list)
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
		{name: "same key", clientKeys: keyring(t, "k1", "a"), wantOK: true},
		{name: "rotation: client signs with the second key", clientKeys: keyring(t, "k2", "b", "k1", "a"), wantOK: true},
		{name: "wrong key under a known id", clientKeys: keyring(t, "k1", "x"), reason: "bad_mac"},
		{name: "unknown key id", clientKeys: keyring(t, "k9", "a"), reason: "unknown_key"},
		{name: "zone key, but claims another node", clientKeys: keyring(t, "k1", "a"), claim: "server", reason: "wrong_node_key"},
		{name: "zone key, but claims a node nobody knows", clientKeys: keyring(t, "k1", "a"), claim: "ghost", reason: "unknown_peer"},
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

// sendReport posts rep to addr over an authenticated peer connection and
// returns the rejection reason ("" when accepted).
func sendReport(t *testing.T, sn *secureNet, addr string, body []byte) (int, string) {
	t.Helper()
	resp, err := sn.httpClient().Post("https://"+addr+"/v1/reports", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb errorBody
	raw, _ := io.ReadAll(resp.Body)
	_ = jsonUnmarshal(raw, &eb)
	return resp.StatusCode, eb.Reason
}

func TestReportIntakeRejections(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	sender := z.nodes["node-2"]
	if sender == l {
		sender = z.nodes["node-3"]
	}
	// The client holds the zone key and the sender's identity, as if it had
	// taken the sender's box apart, and calls from the sender's address.
	me := peerOf(t, sender)
	client := peerNet(t, z.fabric.Host(sender.ip), z.keys, me, z.list)
	signed := func(mut func(*zone.Report), keys *zonekeys.Ring) zone.Report {
		r := zone.Report{Zone: testZoneName, From: sender.name, Seq: l.srv.store.LastSeq(sender.name), SentAt: time.Now().UTC(),
			Results: []zone.Result{{Peer: l.name, OK: true, Score: 100}}, APIReachable: true}
		mut(&r)
		id, key := keys.SigningKey()
		if err := r.Sign(id, key); err != nil {
			t.Fatal(err)
		}
		if err := r.SignNode(me.key); err != nil {
			t.Fatal(err)
		}
		return r
	}
	leaderAddr := func() string {
		l := z.waitLeader(60 * time.Second)
		return l.ip + ":9470"
	}
	cases := []struct {
		name   string
		body   func() []byte
		reason string
		status int
	}{
		{"malformed JSON", func() []byte { return []byte("{not json") }, RejectMalformed, http.StatusBadRequest},
		{"unknown field", func() []byte { return []byte(`{"zone":"zone-a","evil":1}`) }, RejectMalformed, http.StatusBadRequest},
		{"forged MAC", func() []byte {
			r := signed(func(r *zone.Report) { r.Seq += 1 << 40 }, z.keys)
			r.MAC[0] ^= 0xff
			return mustJSON(t, r)
		}, RejectBadMAC, http.StatusUnauthorized},
		{"tampered after signing", func() []byte {
			r := signed(func(r *zone.Report) { r.Seq += 1 << 40 }, z.keys)
			r.Results[0].OK = false
			return mustJSON(t, r)
		}, RejectBadMAC, http.StatusUnauthorized},
		{"unknown key id", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq += 1 << 40 }, keyring(t, "k9", "z")))
		}, RejectUnknownKey, http.StatusUnauthorized},
		{"replayed seq", func() []byte { return mustJSON(t, signed(func(*zone.Report) {}, z.keys)) }, RejectReplay, http.StatusConflict},
		{"non-member sender", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.From, r.Seq = "intruder", 1 }, z.keys))
		}, RejectNotSender, http.StatusForbidden},
		{"another member as the sender", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.From, r.Seq = l.name, r.Seq+1<<40 }, z.keys))
		}, RejectNotSender, http.StatusForbidden},
		{"node signature missing", func() []byte {
			r := signed(func(r *zone.Report) { r.Seq += 1 << 40 }, z.keys)
			r.Sig = nil
			return mustJSON(t, r)
		}, RejectBadSig, http.StatusUnauthorized},
		{"signed by another node's key", func() []byte {
			r := signed(func(r *zone.Report) { r.Seq += 1 << 40 }, z.keys)
			if err := r.SignNode(peerOf(t, l).key); err != nil {
				t.Fatal(err)
			}
			return mustJSON(t, r)
		}, RejectBadSig, http.StatusUnauthorized},
		{"seq that would lock the sender out", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq = 1 << 63 }, z.keys))
		}, RejectSeqJump, http.StatusBadRequest},
		{"stale sent-at", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq += 1 << 40; r.SentAt = r.SentAt.Add(-time.Hour) }, z.keys))
		}, RejectClockSkew, http.StatusBadRequest},
		{"signed result for an empty peer name", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) {
				r.Seq += 1 << 40
				r.Results = append([]zone.Result{{Peer: "", OK: false}}, r.Results...)
			}, z.keys))
		}, RejectMalformed, http.StatusBadRequest},
		{"signed score out of range", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq += 1 << 40; r.Results[0].Score = 1000 }, z.keys))
		}, RejectMalformed, http.StatusBadRequest},
		{"wrong zone", func() []byte {
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq += 1 << 40; r.Zone = "zone-b" }, z.keys))
		}, RejectWrongZone, http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := z.waitLeader(60 * time.Second)
			before := testutil.ToFloat64(l.srv.metrics.reportsRejected.WithLabelValues(tc.reason))
			status, reason := sendReport(t, client, leaderAddr(), tc.body())
			if status != tc.status || reason != tc.reason {
				t.Fatalf("answer %d %q, want %d %q", status, reason, tc.status, tc.reason)
			}
			if got := testutil.ToFloat64(l.srv.metrics.reportsRejected.WithLabelValues(tc.reason)); got != before+1 {
				t.Fatalf("rejections{%s} = %v, want %v", tc.reason, got, before+1)
			}
		})
	}

	t.Run("follower points at the leader", func(t *testing.T) {
		l := z.waitLeader(60 * time.Second)
		var follower *testNode
		for _, n := range z.running() {
			if n != l {
				follower = n
			}
		}
		status, reason := sendReport(t, client, follower.ip+":9470", mustJSON(t, signed(func(*zone.Report) {}, z.keys)))
		if status != http.StatusMisdirectedRequest || reason != RejectNotLeader {
			t.Fatalf("follower answered %d %q", status, reason)
		}
	})

	t.Run("replay rejected after leader restart", func(t *testing.T) {
		// A report the zone committed, captured before the restart.
		old := signed(func(*zone.Report) {}, z.keys)
		l := z.waitLeader(60 * time.Second)
		z.stop(l.name)
		z.start(l.name)
		z.waitConverged(60*time.Second, 3)
		status, reason := sendReport(t, client, leaderAddr(), mustJSON(t, old))
		if status != http.StatusConflict || reason != RejectReplay {
			t.Fatalf("replay after restart answered %d %q", status, reason)
		}
	})

	// Nothing above disturbed the zone's judgement.
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	assertNeverJudged(t, z, z.names())
}

func TestIntakeRejectsWithoutLeadership(t *testing.T) {
	z := newTestZone(t, 1)
	n := z.nodes["node-1"]
	srv, err := New(testConfig(n), Deps{Members: z.list, Genesis: z.genesis})
	if err != nil {
		t.Fatal(err)
	}
	// A member that does not lead refuses reports and says so.
	err = newIntake(srv).submit(t.Context(), zone.Report{From: "x"})
	var rj *RejectError
	if !errors.As(err, &rj) || rj.Reason != RejectNotLeader || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("submit without leadership: %v", err)
	}
}

// TestIntakeRefusesOnceStopped checks that a leader on its way out answers a
// report at once instead of queueing it for a commit loop that is gone: the
// sender would wait out its deadline, and the member's peer API, shutting
// down, would wait for that request while its peers judge it dead.
func TestIntakeRefusesOnceStopped(t *testing.T) {
	z := newTestZone(t, 1)
	z.startAll()
	l := z.waitLeader(60 * time.Second)
	l.srv.intake.stop()
	rep, err := l.srv.buildReport()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = l.srv.intake.submit(ctx, rep)
	var rj *RejectError
	if !errors.As(err, &rj) || rj.Reason != RejectNotLeader {
		t.Fatalf("report to a stopped intake: %v, want a not_leader rejection", err)
	}
}
