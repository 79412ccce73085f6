package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// benchZone is the largest zone the benchmarks model: 129 members, so each
// member checks 128 peers.
const benchZone = 129

func benchNodes() []string {
	nodes := make([]string, benchZone)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("edge-node-%03d", i)
	}
	return nodes
}

// fullBatch is a batch in which every member reports a changed opinion of every
// peer: the worst case, since results normally carry only changes. Each report
// carries its sender's node signature, which every replica checks.
func fullBatch(nodes []string, seq uint64) ReportBatch {
	b := ReportBatch{At: t0.Add(time.Duration(seq) * time.Second)}
	for _, from := range nodes {
		r := zone.Report{Zone: "z1", From: from, Seq: seq, SentAt: b.At, APIReachable: true, KeyID: "k1",
			MAC: make([]byte, 32)}
		for _, peer := range nodes {
			if peer == from {
				continue
			}
			r.Results = append(r.Results, zone.Result{
				Peer: peer, OK: seq%2 == 0, Score: float64(seq % 101), Latency: time.Duration(seq) * time.Microsecond,
			})
		}
		b.Reports = append(b.Reports, resign(r))
	}
	return b
}

func benchStore(b *testing.B, opts Options) (*Store, *applier, []string) {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "fsm.db"), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	nodes := benchNodes()
	a := newApplier(b, s)
	a.mustApply(members(nodes...))
	return s, a, nodes
}

// BenchmarkApplyReportBatch129 measures one full batch through Apply: decode,
// 129 seq checks and last reports, 16,512 cells, one commit.
func BenchmarkApplyReportBatch129(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{{"fsync", Options{}}, {"nosync", Options{NoSync: true}}} {
		b.Run(bc.name, func(b *testing.B) {
			s, a, nodes := benchStore(b, bc.opts)
			data := mustEncode(b, fullBatch(nodes, 1))
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			seq := uint64(1)
			for b.Loop() {
				b.StopTimer()
				data = mustEncode(b, fullBatch(nodes, seq))
				a.index++
				l := &raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: data}
				b.StartTimer()
				res, ok := s.Apply(l).(*ApplyResult)
				if !ok || res.Applied != benchZone {
					b.Fatalf("apply: %+v", res)
				}
				seq++
			}
		})
	}
}

// BenchmarkSnapshotRestore129 measures Snapshot + Persist of a 129-member zone
// with a full matrix, and Restore of it into another store.
func BenchmarkSnapshotRestore129(b *testing.B) {
	src, a, nodes := benchStore(b, Options{})
	a.mustApply(fullBatch(nodes, 1))
	var verdicts VerdictBatch
	for _, n := range nodes {
		verdicts.Verdicts = append(verdicts.Verdicts, zone.Verdict{Node: n, State: zone.Healthy,
			Pros: benchZone - 1, Members: benchZone, Term: 1, Leader: nodes[0], DecidedAt: t0})
	}
	a.mustApply(verdicts)
	dst, _, _ := benchStore(b, Options{})

	b.ReportAllocs()
	var size int
	for b.Loop() {
		data := snapshotBytes(b, src)
		size = len(data)
		if err := dst.Restore(readCloser(data)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size), "snapshot-bytes")
}

// BenchmarkExportView129 measures what a server's store does for one spare's
// view request in a zone of 129 with a verdict for every member: "copy" when
// the spare needs every part, "unchanged" when it holds them all already (the
// common case, which only sums the stored bytes).
func BenchmarkExportView129(b *testing.B) {
	s, a, nodes := benchStore(b, Options{NoSync: true})
	a.mustApply(fullBatch(nodes, 1))
	var vb VerdictBatch
	for _, n := range nodes {
		vb.Verdicts = append(vb.Verdicts, verdict(n, zone.Healthy))
	}
	a.mustApply(vb)
	for _, bc := range []struct {
		name string
		want bool
	}{{"copy", true}, {"unchanged", false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v, err := s.ExportViewParts(nodes[7], func(ViewSums) (bool, bool) { return bc.want, bc.want })
				if err != nil || (len(v.Members) == benchZone) != bc.want {
					b.Fatalf("export: %d members, %v", len(v.Members), err)
				}
			}
		})
	}
}

// BenchmarkMatrix129 measures a read of every committed opinion of a zone of
// 129, 16,512 cells, decoded afresh: what status and snapshots read, and what
// every tally read before tallyRows.
func BenchmarkMatrix129(b *testing.B) {
	s, a, nodes := benchStore(b, Options{NoSync: true})
	a.mustApply(fullBatch(nodes, 1))
	b.ReportAllocs()
	for b.Loop() {
		m, err := s.Matrix()
		if err != nil || len(m) != benchZone {
			b.Fatalf("matrix: %d rows, %v", len(m), err)
		}
	}
}

// BenchmarkTallyInput129 measures what a leader's verdict round and each
// replica's check of a verdict batch read in a zone of 129: with no row
// changed since the last tally (a vote tick), and with one member's report
// applied since (a round kicked by a changed result), the common cases.
func BenchmarkTallyInput129(b *testing.B) {
	for _, tc := range []struct {
		name    string
		changed bool
	}{{"unchanged", false}, {"one-report", true}} {
		b.Run(tc.name, func(b *testing.B) {
			s, a, nodes := benchStore(b, Options{NoSync: true})
			a.mustApply(fullBatch(nodes, 1))
			one := fullBatch(nodes, 2).Reports[0]
			seq := uint64(1)
			if _, err := s.TallyInput(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if tc.changed {
					b.StopTimer()
					seq++
					r := one
					r.Results = append([]zone.Result(nil), one.Results...)
					r.Seq, r.Results[0].OK = seq, seq%2 == 0
					a.mustApply(ReportBatch{At: t0.Add(time.Duration(seq) * time.Second), Reports: []zone.Report{resign(r)}})
					b.StartTimer()
				}
				in, err := s.TallyInput()
				if err != nil || len(in.Matrix) != benchZone {
					b.Fatalf("tally input: %d rows, %v", len(in.Matrix), err)
				}
			}
		})
	}
}
