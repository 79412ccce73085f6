package store

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/edgequorum/edgequorum/zone"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the base of every time in the tests; fixed so expectations are literal.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// newStore opens a store in a fresh temporary directory and closes it at the end
// of the test.
func newStore(t testing.TB) *Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "fsm.db"))
}

func openStore(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// applier feeds commands to a store as consecutive raft logs, the way raft does.
type applier struct {
	t     testing.TB
	s     *Store
	index uint64
}

func newApplier(t testing.TB, s *Store) *applier {
	idx, _ := s.AppliedIndex()
	return &applier{t: t, s: s, index: idx}
}

// apply appends cmd as the next log and returns Apply's response.
func (a *applier) apply(cmd Command) any {
	a.t.Helper()
	a.index++
	return a.s.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: mustEncode(a.t, cmd)})
}

// mustApply applies cmd and fails the test unless it yields an *ApplyResult.
func (a *applier) mustApply(cmd Command) *ApplyResult {
	a.t.Helper()
	resp := a.apply(cmd)
	res, ok := resp.(*ApplyResult)
	if !ok {
		a.t.Fatalf("apply %v at %d: response %v, want *ApplyResult", cmd.Type(), a.index, resp)
	}
	return res
}

func mustEncode(t testing.TB, cmd Command) []byte {
	t.Helper()
	var (
		b   []byte
		err error
	)
	switch c := cmd.(type) {
	case ReportBatch:
		b, err = EncodeReportBatch(c)
	case VerdictBatch:
		b, err = EncodeVerdictBatch(c)
	case MemberSet:
		b, err = EncodeMemberSet(c)
	default:
		t.Fatalf("unknown command %T", cmd)
	}
	if err != nil {
		t.Fatalf("encode %v: %v", cmd.Type(), err)
	}
	return b
}

// rawEncode encodes cmd without validating it, as a buggy or hostile leader
// might.
func rawEncode(t testing.TB, cmd Command) []byte {
	t.Helper()
	b, err := marshal(cmd)
	if err != nil {
		t.Fatalf("marshal %v: %v", cmd.Type(), err)
	}
	return b
}

// nodeKey is node's test node key, derived from its name so that every test
// agrees on it.
func nodeKey(node string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("test node key " + node))
	return ed25519.NewKeyFromSeed(seed[:])
}

func member(node string) zone.Member {
	return zone.Member{
		Node: node, ServerID: "id-" + node, Zone: "z1",
		ProbeAddress: "10.0.0.1", RaftAddress: "10.0.0.1:7946",
		Role: zone.Voter, JoinedAt: t0,
		PublicKey: zone.EncodeNodeKey(nodeKey(node).Public().(ed25519.PublicKey)),
	}
}

func members(nodes ...string) MemberSet {
	var m MemberSet
	for _, n := range nodes {
		m.Members = append(m.Members, member(n))
	}
	return m
}

// report is a report signed by from's test node key. The MAC is a stand-in:
// the store never sees the zone key.
func report(from string, seq uint64, results ...zone.Result) zone.Report {
	zone.SortResults(results)
	r := zone.Report{
		Zone: "z1", From: from, Seq: seq, SentAt: t0.Add(-time.Second),
		Results: results, APIReachable: true, KeyID: "k1", MAC: []byte{1, 2, 3},
	}
	return resign(r)
}

// resign signs r again after a test changed it.
func resign(r zone.Report) zone.Report {
	if err := r.SignNode(nodeKey(r.From)); err != nil {
		panic(err)
	}
	return r
}

func ok(peer string, score float64) zone.Result {
	return zone.Result{Peer: peer, OK: true, Score: score, Latency: time.Millisecond}
}

func fail(peer string) zone.Result {
	return zone.Result{Peer: peer, OK: false, Score: 0, Latency: time.Second}
}

func batch(sec int, reports ...zone.Report) ReportBatch {
	return ReportBatch{At: at(sec), Reports: reports}
}

func verdict(node string, state zone.State) zone.Verdict {
	return zone.Verdict{Node: node, State: state, Pros: 2, Cons: 0, Members: 3, Term: 1, Leader: "a", DecidedAt: t0}
}

// state is every answer of the read API. Per-node reads are taken for a fixed set
// of names, members or not, so "gone" is compared as carefully as "present".
type state struct {
	Members    []zone.Member
	Member     map[string]string // node → member or error text
	Reports    map[string]LastReport
	Report     map[string]string
	Seq        map[string]uint64
	Matrix     Matrix
	Verdicts   map[string]zone.Verdict
	Verdict    map[string]string
	Index      uint64
	Term       uint64
	Raw        map[string]string
	FileDigest string
}

var probeNodes = []string{"a", "b", "c", "d", "e", "ghost"}

// readState captures every read, a raw dump of the bbolt buckets, and the
// file's bytes.
func readState(t testing.TB, s *Store) state {
	t.Helper()
	st := readAPI(t, s)
	st.Raw = rawDump(t, s)
	b, err := os.ReadFile(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	st.FileDigest = fmt.Sprintf("%x", sha256.Sum256(b))
	return st
}

// readAPI captures only what the read API answers.
func readAPI(t testing.TB, s *Store) state {
	t.Helper()
	var st state
	var err error
	if st.Members, err = s.Members(); err != nil {
		t.Fatal(err)
	}
	if st.Reports, err = s.LastReports(); err != nil {
		t.Fatal(err)
	}
	if st.Matrix, err = s.Matrix(); err != nil {
		t.Fatal(err)
	}
	if st.Verdicts, err = s.Verdicts(); err != nil {
		t.Fatal(err)
	}
	st.Index, st.Term = s.AppliedIndex()
	st.Member, st.Report, st.Verdict, st.Seq = map[string]string{}, map[string]string{}, map[string]string{}, map[string]uint64{}
	for _, n := range probeNodes {
		st.Member[n] = answer(s.Member(n))
		st.Report[n] = answer(s.LastReport(n))
		st.Verdict[n] = answer(s.Verdict(n))
		st.Seq[n] = s.LastSeq(n)
	}
	return st
}

func answer[T any](v T, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%+v", v)
}

// rawDump lists every key and value, nested buckets included.
func rawDump(t testing.TB, s *Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.view(func(tx *bbolt.Tx) error { return dumpTx(tx, out) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// dumpTx puts every key and value tx sees into out, by bucket path, values
// in hex; every bucket, empty ones included, as its path alone.
func dumpTx(tx *bbolt.Tx, out map[string]string) error {
	var walk func(prefix string, b *bbolt.Bucket) error
	walk = func(prefix string, b *bbolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				out[prefix+string(k)+"/"] = ""
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			out[prefix+string(k)] = fmt.Sprintf("%x", v)
			return nil
		})
	}
	return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
		out[string(name)+"/"] = ""
		return walk(string(name)+"/", b)
	})
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Close() error  { m.closed = true; return nil }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }

// snapshotBytes takes and persists a snapshot of s.
func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("Persist left sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// populate gives s a zone of three members with reports, cells and verdicts,
// plus a fourth member that has said nothing yet.
func populate(t testing.TB, s *Store) {
	t.Helper()
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c", "d"))
	a.mustApply(batch(1,
		report("a", 1, ok("b", 90), fail("c"), ok("d", 70)),
		report("b", 1, ok("a", 80), ok("c", 60)),
		report("c", 4, fail("a")),
	))
	a.mustApply(batch(2, report("a", 2), report("b", 2, fail("c"))))
	if res := a.mustApply(a.decide(at(3), map[string]zone.State{"c": zone.Unhealthy})); res.Applied != 1 {
		t.Fatalf("verdict for c: %+v", res)
	}
	storeVerdicts(t, s, verdict("a", zone.Healthy))
}

func isErr(resp any, target error) bool {
	err, ok := resp.(error)
	return ok && errors.Is(err, target)
}

// storeVerdicts writes verdicts into s as committed ones, without the tally a
// replica checks them with: for tests of what the store does with verdicts it
// holds (views, snapshots, removals), not of which verdicts it accepts.
func storeVerdicts(t testing.TB, s *Store, vs ...zone.Verdict) {
	t.Helper()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, v := range vs {
			val, err := json.Marshal(v)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketVerdicts).Put([]byte(v.Node), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testVoteTimeout is the vote timeout the tests' leaders tally with.
const testVoteTimeout = 10 * time.Second

// decide builds the verdict batch an honest leader would commit now: each
// node's tally at decidedAt from the store's committed evidence, which must
// give the state asked for.
func (a *applier) decide(decidedAt time.Time, want map[string]zone.State) VerdictBatch {
	a.t.Helper()
	in, err := a.s.TallyInput()
	if err != nil {
		a.t.Fatal(err)
	}
	tally := Tally(in.Members, in.Last, in.Matrix, decidedAt, testVoteTimeout)
	b := VerdictBatch{Basis: in.Applied, VoteTimeout: testVoteTimeout}
	for _, node := range sortedKeys(want) {
		v, ok := tally[node]
		if !ok {
			v = zone.Verdict{Node: node, State: want[node]}
		} else if v.State != want[node] {
			a.t.Fatalf("the evidence judges %s %s, not %s", node, v.State, want[node])
		}
		v.Term, v.Leader, v.DecidedAt = 1, "a", decidedAt
		b.Verdicts = append(b.Verdicts, v)
	}
	return b
}
