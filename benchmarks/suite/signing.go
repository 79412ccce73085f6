package suite

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// SigningCost is what one report's node signature costs on this machine,
// measured with testing.Benchmark at the start of a run. A heartbeat (no
// results) is what almost every report is in a steady zone; a full report (a
// result for each of 128 peers) is the worst case, sent when a member starts.
type SigningCost struct {
	SignNs, VerifyNs         float64 // heartbeat
	SignFullNs, VerifyFullNs float64 // 128 results
}

// measureSigning times SignNode and VerifySig on this machine.
func measureSigning() SigningCost {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	heartbeat := zone.Report{Zone: "bench", From: "edge-1", Seq: 1, SentAt: time.Now(), KeyID: "k1", MAC: make([]byte, 32)}
	full := heartbeat
	for i := range 128 {
		full.Results = append(full.Results, zone.Result{Peer: fmt.Sprintf("edge-%03d", i), OK: true, Score: 100})
	}
	cost := func(r zone.Report, verify bool) float64 {
		if err := r.SignNode(priv); err != nil {
			panic(err)
		}
		res := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				if verify {
					r.VerifySig(pub)
				} else {
					r.SignNode(priv)
				}
			}
		})
		return float64(res.NsPerOp())
	}
	return SigningCost{SignNs: cost(heartbeat, false), VerifyNs: cost(heartbeat, true),
		SignFullNs: cost(full, false), VerifyFullNs: cost(full, true)}
}

// writeSigning estimates the node signatures' share of a core at each size from
// the measured cost and the default report rate: every member reports every
// ReportPeriod; the leader verifies each report twice (intake, then apply) and
// signs its own; a follower verifies each once on apply and signs its own.
func writeSigning(b *strings.Builder, rep *Report) {
	c := rep.Signing
	if c.VerifyNs == 0 {
		b.WriteString("Not measured in this run.\n")
		return
	}
	period := raftzone.DefaultConfig().ReportPeriod.Seconds()
	fmt.Fprintf(b, "Measured here: sign %.0f µs, verify %.0f µs per heartbeat; %.0f µs and %.0f µs for a report of 128 results.\n\n",
		c.SignNs/1e3, c.VerifyNs/1e3, c.SignFullNs/1e3, c.VerifyFullNs/1e3)
	row(b, "N", "reports/s", "leader: signatures, % of a core", "leader CPU measured (% of a core)",
		"follower: signatures, % of a core", "node CPU measured (% of a core)")
	rule(b, 6)
	for _, r := range rep.Sizes {
		rate := float64(r.N) / period
		leader := (rate*2*c.VerifyNs + c.SignNs/period) / 1e9
		follower := (rate*c.VerifyNs + c.SignNs/period) / 1e9
		o := sv(r.Ours)
		row(b, sizeLabel(r), num(rate, 1), pct2(leader), pct(o.LeaderCPUShare()), pct2(follower), pct(o.NodeCPU/60))
	}
	fmt.Fprintf(b, "\nHeartbeats at the default report period (%s); the measured CPU columns come from the steady window above and "+
		"already include the signatures.\n", raftzone.DefaultConfig().ReportPeriod)
}

// pct2 shows a small share of a core with two decimals.
func pct2(v float64) string { return fmt.Sprintf("%.2f %%", 100*v) }
