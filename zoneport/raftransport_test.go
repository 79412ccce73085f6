package zoneport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftTestTransport is what both hashicorp/raft's NetworkTransport and ours
// offer raft.
type raftTestTransport interface {
	raft.Transport
	raft.WithPreVote
	raft.WithClose
}

// raftTestKinds make each side of a connection: members of an earlier
// release run raft's NetworkTransport, so both must speak to each other.
var raftTestKinds = []struct {
	name string
	make func(raft.StreamLayer) raftTestTransport
}{
	{"ours", func(s raft.StreamLayer) raftTestTransport {
		return NewRaftTransport(s, RaftTransportConfig{Timeout: guardTestWait})
	}},
	{"NetworkTransport", func(s raft.StreamLayer) raftTestTransport {
		return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: s, MaxPool: 2, Timeout: guardTestWait, Logger: hclog.NewNullLogger()})
	}},
}

// raftTestResponse is a follower's answer to rpc, and the snapshot data it
// read.
func raftTestResponse(rpc raft.RPC) (resp any, data []byte) {
	switch cmd := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		resp = &raft.AppendEntriesResponse{Term: cmd.Term, LastLog: cmd.PrevLogEntry + uint64(len(cmd.Entries)), Success: true}
	case *raft.RequestVoteRequest:
		resp = &raft.RequestVoteResponse{Term: cmd.Term, Granted: true}
	case *raft.RequestPreVoteRequest:
		resp = &raft.RequestPreVoteResponse{Term: cmd.Term, Granted: true}
	case *raft.InstallSnapshotRequest:
		data, _ = io.ReadAll(rpc.Reader)
		resp = &raft.InstallSnapshotResponse{Term: cmd.Term, Success: true}
	case *raft.TimeoutNowRequest:
		resp = &raft.TimeoutNowResponse{RPCHeader: cmd.RPCHeader}
	}
	return resp, data
}

// countingStream counts the connections a stream layer dials.
type countingStream struct {
	*guardTestStream
	dials atomic.Int32
}

func (s *countingStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s.dials.Add(1)
	return s.guardTestStream.Dial(address, timeout)
}

// TestRaftTransportSpeaksNetworkTransport sends every RPC between each pair
// of transports, ours and raft's: each arrives as sent, the answer comes
// back, an error answer reaches the caller as the error's text, and a
// heartbeat goes to the heartbeat handler, not the consumer.
func TestRaftTransportSpeaksNetworkTransport(t *testing.T) {
	for _, sk := range raftTestKinds {
		for _, rk := range raftTestKinds {
			t.Run(sk.name+" to "+rk.name, func(t *testing.T) {
				guardNoLeaks(t)
				recvStream := newGuardTestStream(guardTestLocalAddr, nil)
				sendStream := &countingStream{guardTestStream: newGuardTestStream(guardTestCallerAddr, nil)}
				sendStream.peers[guardTestLocalAddr] = recvStream
				recv, send := rk.make(recvStream), sk.make(sendStream)

				type seen struct {
					cmd  any
					data []byte
				}
				got := make(chan seen, 1)
				heartbeats := make(chan *raft.AppendEntriesRequest, 1)
				recv.SetHeartbeatHandler(func(rpc raft.RPC) {
					heartbeats <- rpc.Command.(*raft.AppendEntriesRequest)
					resp, _ := raftTestResponse(rpc)
					rpc.Respond(resp, nil)
				})
				refuse := errors.New("refused: not the leader")
				var failNext atomic.Bool
				stop, done := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(done)
					for {
						select {
						case rpc := <-recv.Consumer():
							var err error
							if failNext.Swap(false) {
								err = refuse
							}
							resp, data := raftTestResponse(rpc)
							got <- seen{rpc.Command, data}
							rpc.Respond(resp, err)
						case <-stop:
							return
						}
					}
				}()
				t.Cleanup(func() {
					if nt, ok := send.(*raft.NetworkTransport); ok {
						nt.CloseStreams() // its Close leaves pooled connections open
					}
					send.Close()
					recv.Close()
					close(stop)
					<-done
				})

				const target = raft.ServerAddress(guardTestLocalAddr)
				const id = raft.ServerID("member-2")
				arrived := func(what string, sent any) seen {
					t.Helper()
					select {
					case s := <-got:
						if !reflect.DeepEqual(s.cmd, sent) {
							t.Fatalf("%s arrived as %+v, sent %+v", what, s.cmd, sent)
						}
						return s
					case <-time.After(guardTestWait):
						t.Fatalf("%s: answered but the consumer saw nothing", what)
					}
					return seen{}
				}

				ae := guardTestAppend()
				var aeResp raft.AppendEntriesResponse
				if err := send.AppendEntries(id, target, ae, &aeResp); err != nil {
					t.Fatalf("append entries: %v", err)
				}
				if s := arrived("append entries", ae); s.cmd.(*raft.AppendEntriesRequest).Entries[0].AppendedAt.UnixNano() != ae.Entries[0].AppendedAt.UnixNano() {
					t.Fatalf("append time arrived as %v", s.cmd.(*raft.AppendEntriesRequest).Entries[0].AppendedAt)
				}
				if !aeResp.Success || aeResp.LastLog != 9 || aeResp.Term != ae.Term {
					t.Fatalf("append entries answer %+v", aeResp)
				}

				hb := guardTestHeartbeat()
				if err := send.AppendEntries(id, target, hb, &aeResp); err != nil {
					t.Fatalf("heartbeat: %v", err)
				}
				select {
				case h := <-heartbeats:
					if !reflect.DeepEqual(h, hb) {
						t.Fatalf("heartbeat arrived as %+v", h)
					}
				default:
					t.Fatal("heartbeat answered without the heartbeat handler")
				}

				vote := guardTestVote()
				var voteResp raft.RequestVoteResponse
				if err := send.RequestVote(id, target, vote, &voteResp); err != nil || !voteResp.Granted {
					t.Fatalf("request vote: %v, answer %+v", err, voteResp)
				}
				arrived("request vote", vote)

				pre := guardTestPreVote()
				var preResp raft.RequestPreVoteResponse
				if err := send.RequestPreVote(id, target, pre, &preResp); err != nil || !preResp.Granted {
					t.Fatalf("request pre-vote: %v, answer %+v", err, preResp)
				}
				arrived("request pre-vote", pre)

				tn := guardTestTimeoutNow()
				var tnResp raft.TimeoutNowResponse
				if err := send.TimeoutNow(id, target, tn, &tnResp); err != nil || string(tnResp.ID) != guardTestCaller {
					t.Fatalf("timeout now: %v, answer %+v", err, tnResp)
				}
				arrived("timeout now", tn)

				// A snapshot larger than any buffer of either transport.
				data := bytes.Repeat([]byte{1, 2, 3, 4, 5}, 100000)
				snap := guardTestSnapshot(int64(len(data)))
				var snapResp raft.InstallSnapshotResponse
				if err := send.InstallSnapshot(id, target, snap, &snapResp, bytes.NewReader(data)); err != nil || !snapResp.Success {
					t.Fatalf("install snapshot: %v, answer %+v", err, snapResp)
				}
				if s := arrived("install snapshot", snap); !bytes.Equal(s.data, data) {
					t.Fatalf("snapshot data arrived as %d bytes, sent %d", len(s.data), len(data))
				}

				// An error answer is the error's text, and the connection
				// that carried it stays in use.
				failNext.Store(true)
				err := send.AppendEntries(id, target, ae, &aeResp)
				if err == nil || err.Error() != refuse.Error() {
					t.Fatalf("append entries answered with an error: got %v, want %q", err, refuse)
				}
				arrived("refused append entries", ae)
				dials := sendStream.dials.Load()
				if err := send.AppendEntries(id, target, ae, &aeResp); err != nil {
					t.Fatalf("append entries after an error answer: %v", err)
				}
				arrived("append entries after an error answer", ae)
				if d := sendStream.dials.Load(); d != dials {
					t.Fatalf("dialled %d more connections after an error answer, want the pooled one", d-dials)
				}
			})
		}
	}
}

// TestRaftTransportClose: after Close, RPCs fail at once, the connections
// it served are closed (the caller sees it), and nothing is left running.
func TestRaftTransportClose(t *testing.T) {
	guardNoLeaks(t)
	recvStream := newGuardTestStream(guardTestLocalAddr, nil)
	sendStream := newGuardTestStream(guardTestCallerAddr, nil)
	sendStream.peers[guardTestLocalAddr] = recvStream
	recv := NewRaftTransport(recvStream, RaftTransportConfig{Timeout: guardTestWait})
	send := NewRaftTransport(sendStream, RaftTransportConfig{Timeout: guardTestWait})
	defer send.Close()
	recv.SetHeartbeatHandler(func(rpc raft.RPC) {
		resp, _ := raftTestResponse(rpc)
		rpc.Respond(resp, nil)
	})

	const target = raft.ServerAddress(guardTestLocalAddr)
	var resp raft.AppendEntriesResponse
	if err := send.AppendEntries("member-2", target, guardTestHeartbeat(), &resp); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := recv.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := recv.AppendEntries("leader-1", guardTestCallerAddr, guardTestHeartbeat(), &resp); !errors.Is(err, errRaftTransportShutdown) {
		t.Fatalf("rpc of a closed transport: %v, want %v", err, errRaftTransportShutdown)
	}
	// The pooled connection was closed by the receiver: the next RPC fails
	// on it, and the one after cannot dial a closed stream.
	if err := send.AppendEntries("member-2", target, guardTestHeartbeat(), &resp); err == nil {
		t.Fatal("heartbeat on a connection its server closed succeeded")
	}
	if err := send.AppendEntries("member-2", target, guardTestHeartbeat(), &resp); err == nil {
		t.Fatal("heartbeat to a closed transport succeeded")
	}
}

// raftTestAnswerer accepts one connection on stream at a time and answers
// every request read off it with answer's bytes.
func raftTestAnswerer(t *testing.T, stream *guardTestStream, answer []byte) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() {
		stream.Close()
		<-done
	})
	go func() {
		defer close(done)
		for {
			conn, err := stream.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(conn)
			for {
				if _, err := r.ReadByte(); err != nil {
					break
				}
				sc := msgpackScanner{r: r, budget: 1 << 20, items: 1 << 10}
				if sc.scan() != nil {
					break
				}
				if _, err := conn.Write(answer); err != nil {
					break
				}
			}
			conn.Close()
		}
	}()
}

// TestRaftTransportRefusesHostileAnswers: an answer whose value declares
// more bytes than an answer can have, more items, or is not msgpack costs
// the caller the connection (counted by reason), not an allocation of what
// the length declares or a panic; an honest answer after it works.
func TestRaftTransportRefusesHostileAnswers(t *testing.T) {
	emptyString := []byte{0xa0}
	for _, tc := range []struct {
		name   string
		answer []byte
		reason string
	}{
		{"a 4 GiB binary", append(slices.Clone(emptyString), 0xc6, 0xff, 0xff, 0xff, 0xf0), RejectAnswerSize},
		{"a 4 GiB error string", []byte{0xdb, 0xff, 0xff, 0xff, 0xf0}, RejectAnswerSize},
		{"an array of 1100 nils", append(append(slices.Clone(emptyString), 0xdc, 0x04, 0x4c), bytes.Repeat([]byte{0xc0}, 1100)...), RejectAnswerItems},
		{"a byte msgpack never uses", append(slices.Clone(emptyString), 0xc1), RejectAnswerDecode},
		{"a string where a struct goes", append(slices.Clone(emptyString), 0xa3, 'a', 'b', 'c'), RejectAnswerDecode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guardNoLeaks(t)
			recvStream := newGuardTestStream(guardTestLocalAddr, nil)
			sendStream := newGuardTestStream(guardTestCallerAddr, nil)
			sendStream.peers[guardTestLocalAddr] = recvStream
			var refused []string
			send := NewRaftTransport(sendStream, RaftTransportConfig{Timeout: guardTestWait, Refused: func(r string) { refused = append(refused, r) }})
			defer send.Close()
			raftTestAnswerer(t, recvStream, tc.answer)

			var resp raft.AppendEntriesResponse
			err := send.AppendEntries("member-2", guardTestLocalAddr, guardTestHeartbeat(), &resp)
			var r *Refusal
			if !errors.As(err, &r) || r.reason != tc.reason {
				t.Fatalf("hostile answer: %v, want a refusal for %s", err, tc.reason)
			}
			if want := "raft append entries to " + guardTestLocalAddr; !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
			if len(refused) != 1 || refused[0] != tc.reason {
				t.Fatalf("counted %v, want [%s]", refused, tc.reason)
			}
		})
	}
}

// FuzzRaftTransportAnswer feeds arbitrary bytes as a member's answer to
// each kind of RPC: reading it must not panic, and whatever it accepts must
// be whole values within the answer bounds.
func FuzzRaftTransportAnswer(f *testing.F) {
	for _, resp := range []any{
		&raft.AppendEntriesResponse{RPCHeader: guardTestHeader(), Term: 11, LastLog: 9, Success: true},
		&raft.RequestVoteResponse{Term: 11, Granted: true},
		&raft.InstallSnapshotResponse{Term: 11, Success: true},
		nil,
	} {
		f.Add(guardTestResponse(f, resp))
	}
	f.Add([]byte{0xa3, 'b', 'a', 'd', 0xc0})
	f.Fuzz(func(t *testing.T, answer []byte) {
		for _, resp := range []any{&raft.AppendEntriesResponse{}, &raft.RequestVoteResponse{}, &raft.RequestPreVoteResponse{},
			&raft.InstallSnapshotResponse{}, &raft.TimeoutNowResponse{}} {
			c := &raftConn{r: bufio.NewReader(bytes.NewReader(answer))}
			err := c.receive(resp)
			var remote remoteError
			if err == nil || errors.As(err, &remote) {
				if read := len(answer) - c.r.Buffered(); read > 2*raftMaxAnswerBytes {
					t.Fatalf("accepted an answer of %d bytes", read)
				}
			}
		}
	})
}
