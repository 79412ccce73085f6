package benchmarks

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/baseline"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

var sizes = []int{9, 33, 129}

// BenchmarkTally is the leader's verdict round: every member's opinion of
// every other, O(N²) per vote period.
func BenchmarkTally(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			now := time.Now()
			members := make([]zone.Member, n)
			last := map[string]store.LastReport{}
			matrix := store.Matrix{}
			for i := range members {
				members[i] = zone.Member{Node: fmt.Sprintf("n-%d", i)}
				last[members[i].Node] = store.LastReport{Seq: 1, ReceivedAt: now}
			}
			for _, c := range members {
				row := map[string]store.Cell{}
				for _, x := range members {
					if x.Node != c.Node {
						row[x.Node] = store.Cell{OK: true, Score: 100, At: now}
					}
				}
				matrix[c.Node] = row
			}
			b.ReportAllocs()
			for b.Loop() {
				if v := store.Tally(members, last, matrix, now, 10*time.Second); len(v) != n {
					b.Fatalf("%d verdicts", len(v))
				}
			}
		})
	}
}

// BenchmarkBaselineTally is the same round in the baseline, which every node
// runs, not only a leader.
func BenchmarkBaselineTally(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			now := time.Now()
			rows := map[string]baseline.Row{}
			for c := range n {
				row := baseline.Row{}
				for x := range n {
					row[fmt.Sprintf("127.0.%d.%d", x/250, x%250+1)] = baseline.Detail{Normal: true, Time: now}
				}
				rows[fmt.Sprintf("127.0.%d.%d", c/250, c%250+1)] = row
			}
			b.ReportAllocs()
			for b.Loop() {
				baseline.Tally(rows, n, now, 10*time.Second)
			}
		})
	}
}

// BenchmarkReportSign is one member's report: a full row of results, as sent
// after a restart (steady-state reports carry only changes).
func BenchmarkReportSign(b *testing.B) {
	key := make([]byte, 32)
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			r := zone.Report{Zone: "z", From: "n-0", Seq: 1, SentAt: time.Now(), APIReachable: true}
			for i := 1; i < n; i++ {
				r.Results = append(r.Results, zone.Result{Peer: fmt.Sprintf("n-%03d", i), OK: true, Score: 100})
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Sign("k1", key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBaselineSign is one baseline exchange message: SuperEdge signs and
// encodes its whole row once per destination, N−1 times per period.
func BenchmarkBaselineSign(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			row := baseline.Row{}
			for x := range n {
				row[fmt.Sprintf("127.0.%d.%d", x/250, x%250+1)] = baseline.Detail{Normal: true, Time: time.Now()}
			}
			info := baseline.CommunInfo{SourceIP: "127.0.0.1", CheckDetail: row}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := baseline.Sign(info, []byte("key")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
