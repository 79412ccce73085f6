package store

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

func TestApplyCommands(t *testing.T) {
	t.Parallel()
	okCell := func(score float64, sec int) Cell {
		return Cell{OK: true, Score: score, Latency: time.Millisecond, At: at(sec)}
	}
	failCell := func(sec int) Cell { return Cell{OK: false, Score: 0, Latency: time.Second, At: at(sec)} }

	tests := []struct {
		name  string
		setup []Command
		// verdicts are stored as committed after setup.
		verdicts []zone.Verdict
		cmd      Command
		// decide builds cmd from the state after setup when cmd is nil.
		decide       func(a *applier) Command
		wantApplied  int
		wantSkipped  int
		wantMembers  []string
		wantSeq      map[string]uint64
		wantMatrix   Matrix
		wantVerdicts map[string]zone.State
	}{
		{
			name:        "report from member sets last report and cells",
			setup:       []Command{members("a", "b", "c")},
			cmd:         batch(1, report("a", 1, ok("b", 90), fail("c"))),
			wantApplied: 1,
			wantMembers: []string{"a", "b", "c"},
			wantSeq:     map[string]uint64{"a": 1},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1), "c": failCell(1)}},
		},
		{
			name:        "report from non-member is skipped",
			setup:       []Command{members("a", "b")},
			cmd:         batch(1, report("ghost", 1, ok("a", 90))),
			wantSkipped: 1,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{},
			wantMatrix:  Matrix{},
		},
		{
			name:        "report with seq zero is skipped",
			setup:       []Command{members("a", "b")},
			cmd:         batch(1, report("a", 0, ok("b", 90))),
			wantSkipped: 1,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{},
			wantMatrix:  Matrix{},
		},
		{
			name:        "replayed seq is skipped and keeps earlier cells",
			setup:       []Command{members("a", "b"), batch(1, report("a", 5, ok("b", 90)))},
			cmd:         batch(2, report("a", 5, fail("b")), report("a", 4, fail("b"))),
			wantSkipped: 2,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 5},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1)}},
		},
		{
			name:        "reports of one sender apply in order",
			setup:       []Command{members("a", "b")},
			cmd:         batch(1, report("a", 1, ok("b", 90)), report("a", 3, fail("b")), report("a", 2, ok("b", 10))),
			wantApplied: 2,
			wantSkipped: 1,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 3},
			wantMatrix:  Matrix{"a": {"b": failCell(1)}},
		},
		{
			name:        "heartbeat refreshes only the last report",
			setup:       []Command{members("a", "b"), batch(1, report("a", 1, ok("b", 90)))},
			cmd:         batch(5, report("a", 2)),
			wantApplied: 1,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 2},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1)}},
		},
		{
			name:        "results carry changes and keep unmentioned cells",
			setup:       []Command{members("a", "b", "c"), batch(1, report("a", 1, ok("b", 90), ok("c", 80)))},
			cmd:         batch(5, report("a", 2, fail("c"))),
			wantApplied: 1,
			wantMembers: []string{"a", "b", "c"},
			wantSeq:     map[string]uint64{"a": 2},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1), "c": failCell(5)}},
		},
		{
			name:        "results about self and non-members are dropped",
			setup:       []Command{members("a", "b")},
			cmd:         batch(1, report("a", 1, ok("a", 100), ok("b", 90), ok("ghost", 50))),
			wantApplied: 1,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 1},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1)}},
		},
		{
			name:  "verdicts stored for members only",
			setup: []Command{members("a", "b", "c"), batch(1, report("b", 1, ok("a", 90)), report("c", 1, ok("a", 80)))},
			decide: func(a *applier) Command {
				b := a.decide(at(2), map[string]zone.State{"a": zone.Healthy})
				ghost := verdict("ghost", zone.Healthy)
				ghost.DecidedAt = at(2)
				b.Verdicts = append(b.Verdicts, ghost)
				return b
			},
			wantApplied:  1,
			wantSkipped:  1,
			wantMembers:  []string{"a", "b", "c"},
			wantSeq:      map[string]uint64{"b": 1, "c": 1},
			wantMatrix:   Matrix{"b": {"a": okCell(90, 1)}, "c": {"a": okCell(80, 1)}},
			wantVerdicts: map[string]zone.State{"a": zone.Healthy},
		},
		{
			name:     "later verdict replaces earlier",
			setup:    []Command{members("a", "b", "c"), batch(1, report("b", 1, fail("a")), report("c", 1, fail("a")))},
			verdicts: []zone.Verdict{verdict("a", zone.Healthy), verdict("b", zone.Healthy)},
			decide: func(a *applier) Command {
				return a.decide(at(2), map[string]zone.State{"a": zone.Unhealthy})
			},
			wantApplied:  1,
			wantMembers:  []string{"a", "b", "c"},
			wantSeq:      map[string]uint64{"b": 1, "c": 1},
			wantMatrix:   Matrix{"b": {"a": failCell(1)}, "c": {"a": failCell(1)}},
			wantVerdicts: map[string]zone.State{"a": zone.Unhealthy, "b": zone.Healthy},
		},
		{
			name: "removed member takes its records, row and column along",
			setup: []Command{
				members("a", "b", "c"),
				batch(1, report("a", 1, ok("b", 90), ok("c", 80)), report("b", 1, ok("a", 70), ok("c", 60)),
					report("c", 1, ok("a", 50), ok("b", 40))),
			},
			verdicts:     []zone.Verdict{verdict("a", zone.Healthy), verdict("c", zone.Healthy)},
			cmd:          members("a", "b"),
			wantApplied:  2,
			wantMembers:  []string{"a", "b"},
			wantSeq:      map[string]uint64{"a": 1, "b": 1},
			wantMatrix:   Matrix{"a": {"b": okCell(90, 1)}, "b": {"a": okCell(70, 1)}},
			wantVerdicts: map[string]zone.State{"a": zone.Healthy},
		},
		{
			name: "new server ID resets seq and own row, keeps cells about it",
			setup: []Command{
				members("a", "b"),
				batch(1, report("a", 7, ok("b", 90)), report("b", 9, ok("a", 70))),
			},
			verdicts:     []zone.Verdict{verdict("b", zone.Healthy)},
			cmd:          MemberSet{Members: []zone.Member{member("a"), {Node: "b", ServerID: "wiped", Role: zone.Nonvoter}}},
			wantApplied:  2,
			wantMembers:  []string{"a", "b"},
			wantSeq:      map[string]uint64{"a": 7},
			wantMatrix:   Matrix{"a": {"b": okCell(90, 1)}},
			wantVerdicts: map[string]zone.State{"b": zone.Healthy},
		},
		{
			name: "same server ID keeps everything",
			setup: []Command{
				members("a", "b"),
				batch(1, report("a", 7, ok("b", 90)), report("b", 9, ok("a", 70))),
			},
			cmd:         MemberSet{Members: []zone.Member{member("a"), {Node: "b", ServerID: "id-b", Role: zone.Nonvoter}}},
			wantApplied: 2,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 7, "b": 9},
			wantMatrix:  Matrix{"a": {"b": okCell(90, 1)}, "b": {"a": okCell(70, 1)}},
		},
		{
			name: "member re-added after removal starts clean",
			setup: []Command{
				members("a", "b"),
				batch(1, report("a", 7, ok("b", 90)), report("b", 9, ok("a", 70))),
				members("a"),
			},
			cmd:         members("a", "b"),
			wantApplied: 2,
			wantMembers: []string{"a", "b"},
			wantSeq:     map[string]uint64{"a": 7},
			wantMatrix:  Matrix{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			a := newApplier(t, s)
			for _, c := range tt.setup {
				a.mustApply(c)
			}
			storeVerdicts(t, s, tt.verdicts...)
			cmd := tt.cmd
			if cmd == nil {
				cmd = tt.decide(a)
			}
			res := a.mustApply(cmd)
			if res.Applied != tt.wantApplied || res.Skipped != tt.wantSkipped || res.Index != a.index || res.AlreadyApplied {
				t.Errorf("result %+v, want applied %d skipped %d at index %d", res, tt.wantApplied, tt.wantSkipped, a.index)
			}
			st := readAPI(t, s)
			var gotMembers []string
			for _, m := range st.Members {
				gotMembers = append(gotMembers, m.Node)
			}
			if !reflect.DeepEqual(gotMembers, tt.wantMembers) {
				t.Errorf("members %v, want %v", gotMembers, tt.wantMembers)
			}
			gotSeq := map[string]uint64{}
			for n, r := range st.Reports {
				gotSeq[n] = r.Seq
			}
			if !reflect.DeepEqual(gotSeq, tt.wantSeq) {
				t.Errorf("seqs %v, want %v", gotSeq, tt.wantSeq)
			}
			for _, n := range probeNodes {
				if st.Seq[n] != tt.wantSeq[n] {
					t.Errorf("LastSeq(%s) = %d, want %d", n, st.Seq[n], tt.wantSeq[n])
				}
			}
			if !reflect.DeepEqual(st.Matrix, tt.wantMatrix) {
				t.Errorf("matrix\n got %+v\nwant %+v", st.Matrix, tt.wantMatrix)
			}
			gotVerdicts := map[string]zone.State{}
			for n, v := range st.Verdicts {
				gotVerdicts[n] = v.State
			}
			if tt.wantVerdicts == nil {
				tt.wantVerdicts = map[string]zone.State{}
			}
			if !reflect.DeepEqual(gotVerdicts, tt.wantVerdicts) {
				t.Errorf("verdicts %v, want %v", gotVerdicts, tt.wantVerdicts)
			}
			if idx, term := s.AppliedIndex(); idx != a.index || term != 1 {
				t.Errorf("AppliedIndex = %d, %d; want %d, 1", idx, term, a.index)
			}
		})
	}
}

func TestApplyStoresFullRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	// Times from another zone are stored in UTC, so every replica answers alike.
	cet := time.FixedZone("CET", 3600)
	m := member("a")
	m.JoinedAt = t0.In(cet)
	a.mustApply(MemberSet{Members: []zone.Member{m, member("b")}})
	r := report("a", 3, ok("b", 55.5))
	r.SentAt = at(-2).In(cet)
	r.APIReachable = false
	r.KeyID = "key-2"
	r = resign(r)
	a.mustApply(ReportBatch{At: at(1).In(cet), Reports: []zone.Report{r}})
	vb := a.decide(at(3), map[string]zone.State{"b": zone.Healthy})
	vb.Verdicts[0].DecidedAt = at(3).In(cet)
	if res := a.mustApply(vb); res.Applied != 1 {
		t.Fatalf("verdict batch: %+v", res)
	}

	wantMember := member("a")
	if got, err := s.Member("a"); err != nil || !reflect.DeepEqual(got, wantMember) {
		t.Errorf("Member(a) = %+v, %v; want %+v", got, err, wantMember)
	}
	wantReport := LastReport{Seq: 3, SentAt: at(-2), ReceivedAt: at(1), APIReachable: false, KeyID: "key-2"}
	if got, err := s.LastReport("a"); err != nil || !reflect.DeepEqual(got, wantReport) {
		t.Errorf("LastReport(a) = %+v, %v; want %+v", got, err, wantReport)
	}
	wantVerdict := zone.Verdict{Node: "b", State: zone.Healthy, Pros: 1, Members: 2, Term: 1, Leader: "a", DecidedAt: at(3)}
	if got, err := s.Verdict("b"); err != nil || !reflect.DeepEqual(got, wantVerdict) {
		t.Errorf("Verdict(b) = %+v, %v; want %+v", got, err, wantVerdict)
	}
	wantCell := Cell{OK: true, Score: 55.5, Latency: time.Millisecond, At: at(1)}
	if mx, err := s.Matrix(); err != nil || !reflect.DeepEqual(mx["a"]["b"], wantCell) {
		t.Errorf("Matrix[a][b] = %+v, %v; want %+v", mx["a"]["b"], err, wantCell)
	}
	if row, err := s.MatrixRow("a"); err != nil || !reflect.DeepEqual(row, map[string]Cell{"b": wantCell}) {
		t.Errorf("MatrixRow(a) = %+v, %v", row, err)
	}
	if row, err := s.MatrixRow("nobody"); err != nil || len(row) != 0 {
		t.Errorf("MatrixRow(nobody) = %+v, %v; want empty", row, err)
	}
	for _, read := range []func() error{
		func() error { _, err := s.Member("x"); return err },
		func() error { _, err := s.LastReport("b"); return err },
		func() error { _, err := s.Verdict("a"); return err },
	} {
		if err := read(); !errors.Is(err, ErrNotFound) {
			t.Errorf("read of a missing record: %v, want ErrNotFound", err)
		}
	}
}

func TestApplyIsIdempotentPerIndex(t *testing.T) {
	t.Parallel()
	cmds := []Command{
		members("a", "b", "c"),
		batch(1, report("a", 1, ok("b", 90)), report("b", 1, fail("a"))),
		VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Unhealthy)}},
		members("a", "b"),
	}
	logs := make([]*raft.Log, len(cmds))
	for i, c := range cmds {
		logs[i] = &raft.Log{Index: uint64(10 + i), Term: 2, Type: raft.LogCommand, Data: mustEncode(t, c)}
	}
	// A replayed log that would change the state if it were applied again: its
	// member set would bring c back.
	tests := []struct {
		name   string
		replay []*raft.Log
	}{
		{"same log again", logs[len(logs)-1:]},
		{"earlier log", logs[1:2]},
		{"whole log", logs},
		{"earlier log with other data at its index", []*raft.Log{{Index: 11, Term: 2, Type: raft.LogCommand,
			Data: mustEncode(t, members("a", "b", "c"))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			for i, resp := range s.ApplyBatch(logs) {
				if _, ok := resp.(*ApplyResult); !ok {
					t.Fatalf("log %d: %v", i, resp)
				}
			}
			before := readState(t, s)
			for _, l := range tt.replay {
				resp := s.Apply(l)
				if res, ok := resp.(*ApplyResult); !ok || !res.AlreadyApplied || res.Index != l.Index {
					t.Errorf("replay of %d: %+v, want AlreadyApplied", l.Index, resp)
				}
			}
			if after := readState(t, s); !reflect.DeepEqual(before, after) {
				t.Errorf("replay changed state\nbefore %+v\n after %+v", before, after)
			}
		})
	}
}

func TestApplyBatchMixedLogs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("a", "b"))
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: mustEncode(t, members("x"))}, // already applied
		{Index: 2, Term: 1, Type: raft.LogConfiguration, Data: []byte("raft's own")},
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: mustEncode(t, batch(1, report("a", 1, ok("b", 50))))},
		{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte{FormatVersion, 99}},
		{Index: 5, Term: 2, Type: raft.LogCommand, Data: mustEncode(t, batch(2, report("b", 1, ok("a", 40))))},
		{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("junk")},
	}
	resp := s.ApplyBatch(logs)
	if len(resp) != len(logs) {
		t.Fatalf("%d responses for %d logs", len(resp), len(logs))
	}
	if r, ok := resp[0].(*ApplyResult); !ok || !r.AlreadyApplied {
		t.Errorf("log 1: %v, want AlreadyApplied", resp[0])
	}
	if resp[1] != nil {
		t.Errorf("configuration log: %v, want nil", resp[1])
	}
	for _, i := range []int{2, 4} {
		if r, ok := resp[i].(*ApplyResult); !ok || r.Applied != 1 || r.Index != logs[i].Index {
			t.Errorf("log %d: %+v, want one applied report", logs[i].Index, resp[i])
		}
	}
	if !isErr(resp[3], ErrUnknownType) || !isErr(resp[5], ErrUnknownVersion) {
		t.Errorf("bad logs: %v, %v; want ErrUnknownType, ErrUnknownVersion", resp[3], resp[5])
	}
	// The rejected log at 6 changed nothing, so the applied index stays at 5.
	if idx, term := s.AppliedIndex(); idx != 5 || term != 2 {
		t.Errorf("AppliedIndex = %d, %d; want 5, 2", idx, term)
	}
	if got := s.LastSeq("a") + s.LastSeq("b"); got != 2 {
		t.Errorf("seqs sum to %d, want 2", got)
	}

	// Non-command logs alone still advance the index.
	s.ApplyBatch([]*raft.Log{{Index: 7, Term: 4, Type: raft.LogConfiguration}})
	if idx, term := s.AppliedIndex(); idx != 7 || term != 4 {
		t.Errorf("after configuration log AppliedIndex = %d, %d; want 7, 4", idx, term)
	}
}

func TestApplyRejectsBadCommands(t *testing.T) {
	t.Parallel()
	valid := mustEncode(t, batch(9, report("a", 9, fail("b"))))
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrBadCommand},
		{"header only version", []byte{FormatVersion}, ErrBadCommand},
		{"unknown version", append([]byte{2}, valid[1:]...), ErrUnknownVersion},
		{"version zero", append([]byte{0}, valid[1:]...), ErrUnknownVersion},
		{"unknown type", append([]byte{FormatVersion, 0}, valid[2:]...), ErrUnknownType},
		{"type mismatch", append([]byte{FormatVersion, byte(TypeMemberSet)}, valid[2:]...), ErrBadCommand},
		{"truncated body", valid[:len(valid)/2], ErrBadCommand},
		{"empty body", valid[:2], ErrBadCommand},
		{"trailing data", append(append([]byte{}, valid...), "{}"...), ErrBadCommand},
		{"unknown field", []byte("\x01\x03{\"members\":[],\"extra\":1}"), ErrBadCommand},
		{"member without name", []byte("\x01\x03{\"members\":[{\"serverID\":\"x\",\"role\":\"voter\"}]}"), ErrBadCommand},
		{"invalid state", []byte("\x01\x02{\"verdicts\":[{\"node\":\"a\",\"state\":\"fine\"}]}"), ErrBadCommand},
		{"NaN score", rawEncode(t, batch(9, report("a", 9, zone.Result{Peer: "b", Score: math.NaN()}))), ErrBadCommand},
		{"duplicate peer", rawEncode(t, batch(9, zone.Report{From: "a", Seq: 9, SentAt: t0,
			Results: []zone.Result{ok("b", 1), ok("b", 2)}})), ErrBadCommand},
		{"score out of range", rawEncode(t, batch(9, report("a", 9, zone.Result{Peer: "b", OK: true, Score: 101}))), ErrBadCommand},
		{"empty sender", rawEncode(t, batch(9, report("", 9))), ErrBadCommand},
		{"too many results", rawEncode(t, batch(9, report("a", 9, tooMany()...))), ErrBadCommand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			populate(t, s)
			a := newApplier(t, s)
			before := readState(t, s)
			a.index++
			resp := s.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: tt.data})
			if !isErr(resp, tt.want) {
				t.Errorf("Apply = %v, want error wrapping %v", resp, tt.want)
			}
			if after := readState(t, s); !reflect.DeepEqual(before, after) {
				t.Errorf("rejected command changed state\nbefore %+v\n after %+v", before, after)
			}
			if err := s.Err(); err != nil {
				t.Errorf("a rejected command failed the store: %v", err)
			}
		})
	}
}

// tooMany is one result more than a report may carry, sorted by peer.
func tooMany() []zone.Result {
	out := make([]zone.Result, MaxReportResults+1)
	for i := range out {
		out[i] = ok(fmt.Sprintf("p%05d", i), 1)
	}
	return out
}

func TestApplyIsDurable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fsm.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.db.NoSync {
		t.Fatal("default options must fsync on commit")
	}
	populate(t, s)
	want := readAPI(t, s)

	// A copy taken without Close stands for a crash right after Apply returned:
	// the commit must already be in the file, not in memory.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(dir, "crashed.db")
	if err := os.WriteFile(crashed, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, p := range []string{path, crashed} {
		re := openStore(t, p)
		got := readAPI(t, re)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s after reopen\n got %+v\nwant %+v", filepath.Base(p), got, want)
		}
		// raft replays its log after a restart; everything is already there.
		idx, _ := re.AppliedIndex()
		resp := re.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: mustEncode(t, members("z"))})
		if r, ok := resp.(*ApplyResult); !ok || !r.AlreadyApplied {
			t.Errorf("replay after reopen: %+v, want AlreadyApplied", resp)
		}
	}
}

func TestFailedStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	populate(t, s)
	good := snapshotBytes(t, s)
	boom := errors.New("disk on fire")
	failure := error(&wrapped{ErrFailed, boom})
	s.failed.Store(&failure)

	resp := s.Apply(&raft.Log{Index: 100, Term: 1, Type: raft.LogCommand, Data: mustEncode(t, members("a"))})
	if !isErr(resp, ErrFailed) {
		t.Errorf("Apply on a failed store = %v, want ErrFailed", resp)
	}
	if _, err := s.Snapshot(); !errors.Is(err, ErrFailed) {
		t.Errorf("Snapshot on a failed store = %v, want ErrFailed", err)
	}
	if err := s.Restore(readCloser(good)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err after Restore = %v, want nil", err)
	}
	if _, ok := s.Apply(&raft.Log{Index: 100, Term: 1, Type: raft.LogCommand, Data: mustEncode(t, members("a"))}).(*ApplyResult); !ok {
		t.Error("Apply after Restore still refused")
	}
}

// wrapped is an error that wraps two, like fmt.Errorf("%w: %w").
type wrapped struct{ a, b error }

func (w *wrapped) Error() string   { return w.a.Error() + ": " + w.b.Error() }
func (w *wrapped) Unwrap() []error { return []error{w.a, w.b} }

// TestApplyRefusesReportsTheSenderDidNotSign: every replica checks each
// report's node signature against the sender's pinned key, so a batch — even one
// a leader built — cannot make a member say what it did not sign, and a seq that
// would lock the sender out for good is refused too.
func TestApplyRefusesReportsTheSenderDidNotSign(t *testing.T) {
	t.Run("no memo", func(t *testing.T) { testApplyRefusesForgeries(t, nil) })
	// With a memo that remembered the genuine reports — as the leader's
	// does after its intake — the forgeries are refused all the same.
	t.Run("memo", func(t *testing.T) { testApplyRefusesForgeries(t, zone.NewSigMemo(16)) })
}

func testApplyRefusesForgeries(t *testing.T, memo *zone.SigMemo) {
	s, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{SigMemo: memo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a := newApplier(t, s)
	noKey := member("c")
	noKey.PublicKey = ""
	a.mustApply(MemberSet{Members: []zone.Member{member("a"), member("b"), noKey}})

	byOther := report("b", 5, fail("a"))
	if err := byOther.SignNode(nodeKey("a")); err != nil { // a speaks as b
		t.Fatal(err)
	}
	altered := report("b", 6, ok("a", 100))
	genuineA := report("a", 1, ok("b", 90))
	for _, r := range []zone.Report{altered, genuineA} {
		pub := nodeKey(r.From).Public().(ed25519.PublicKey)
		if !r.VerifySigMemo(pub, memo) {
			t.Fatalf("%s's genuine report does not verify", r.From)
		}
	}
	altered.Results[0].OK = false // changed after b signed
	unsigned := report("b", 7, fail("a"))
	unsigned.Sig = nil
	lockout := resign(zone.Report{Zone: "z1", From: "b", Seq: 1 << 63, SentAt: at(0), KeyID: "k1", MAC: []byte{1}})
	fromKeyless := report("c", 1, fail("a"))

	res := a.mustApply(batch(1, byOther, altered, unsigned, lockout, fromKeyless, genuineA))
	if res.Applied != 1 || res.Skipped != 5 {
		t.Fatalf("Applied %d, Skipped %d; want 1 and 5 (only a's own report)", res.Applied, res.Skipped)
	}
	want := map[string]int{RefuseSignature: 4, RefuseSeqJump: 1}
	if !reflect.DeepEqual(res.Refused, want) {
		t.Errorf("Refused = %v, want %v", res.Refused, want)
	}
	if got := s.RefusedReports(RefuseSignature); got != 4 {
		t.Errorf("RefusedReports(signature) = %d, want 4", got)
	}
	if got := s.RefusedReports(RefuseSeqJump); got != 1 {
		t.Errorf("RefusedReports(seq jump) = %d, want 1", got)
	}
	if _, err := s.LastReport("b"); err == nil {
		t.Error("b has a committed report although it signed none")
	}
	// b's real next report still commits: nothing above locked it out.
	if res := a.mustApply(batch(2, report("b", 2, ok("a", 100)))); res.Applied != 1 {
		t.Errorf("b's own report after the forgeries: Applied %d, want 1", res.Applied)
	}
	if got := s.LastSeq("b"); got != 2 {
		t.Errorf("LastSeq(b) = %d, want 2", got)
	}
}

// TestSeqJumpBound: a seq may run ahead of the sender's last committed seq and
// of its clock in microseconds by MaxSeqJump, no further; a sender starting from
// its clock, as every agent does, is inside the bound.
func TestSeqJumpBound(t *testing.T) {
	sent := at(0)
	us := uint64(sent.UnixMicro())
	for _, c := range []struct {
		seq, last uint64
		want      bool
	}{
		{seq: 1, last: 0, want: true},
		{seq: us, last: 0, want: true},
		{seq: us + MaxSeqJump, last: 0, want: true},
		{seq: us + MaxSeqJump + 1, last: 0, want: false},
		{seq: us + 2*MaxSeqJump, last: us + MaxSeqJump, want: true},
		{seq: 1<<64 - 1, last: us, want: false},
		{seq: 1 << 63, last: 0, want: false},
	} {
		r := zone.Report{Seq: c.seq, SentAt: sent}
		if got := SeqInReach(&r, c.last); got != c.want {
			t.Errorf("seq %d after %d (sent-at %d µs): in reach = %v, want %v", c.seq, c.last, us, got, c.want)
		}
	}
}
