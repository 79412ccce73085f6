package raftzone

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/faultnet"
	"github.com/edgequorum/edgequorum/internal/testkeys"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
	"github.com/edgequorum/edgequorum/zoneport"
)

// testPeer is a zone-port identity for transport tests.
type testPeer struct {
	node, serverID string
	key            ed25519.PrivateKey
}

// peerOf reads the identity a zone member keeps in its data dir: what an
// attacker who took the node apart holds.
func peerOf(t testing.TB, n *testNode) testPeer {
	t.Helper()
	key, err := zoneport.LoadOrCreateNodeKey(n.dir)
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

// peerNet is a zone port speaking as p from host, knowing the zone from
// members.
func peerNet(t testing.TB, host *faultnet.Host, keys *zonekeys.Ring, p testPeer, members zoneport.MemberSource) *zoneport.Port {
	t.Helper()
	port, err := zoneport.New(zoneport.Config{NodeKey: p.key, Node: p.node, ServerID: p.serverID, Advertise: host.IP() + ":9470",
		Keys: keys, Network: host, HandshakeTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}, members)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// sendReport posts rep to addr over an authenticated peer connection and
// returns the rejection reason ("" when accepted).
func sendReport(t *testing.T, sn *zoneport.Port, addr string, body []byte) (int, string) {
	t.Helper()
	resp, err := sn.HTTPClient().Post("https://"+addr+"/v1/reports", "application/json", bytes.NewReader(body))
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
			return mustJSON(t, signed(func(r *zone.Report) { r.Seq += 1 << 40 }, testkeys.Ring(t, "k9", "z")))
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
