package suite

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// writeSmallAgent judges the small-agent targets of issue 40 at every size:
// the memory of edgequorum's members in the full-zone run at small sizes,
// and the real-time leader phase's leader and spares at TargetSize.
func writeSmallAgent(b *strings.Builder, rep *Report) {
	row(b, "N", fmt.Sprintf("every member's peak RSS ≤ %g× a baseline node's", SmallAgentBaselineRatio),
		fmt.Sprintf("every member's peak RSS ≤ %d MiB", SmallAgentRSS>>20),
		fmt.Sprintf("working set ≤ %d MiB at N = 3", SmallAgentWorkingSet>>20),
		fmt.Sprintf("real-time leader peak RSS ≤ %d MiB", SmallAgentLeaderRSS>>20),
		fmt.Sprintf("real-time spare peak RSS ≤ %d MiB", SmallAgentSpareRSS>>20),
		fmt.Sprintf("real-time spare CPU ≤ %g %% of a core", 100*SmallAgentSpareCPU),
		fmt.Sprintf("real-time leader CPU ≤ %g %% of a core", 100*SmallAgentLeaderCPU))
	rule(b, 8)
	for _, r := range rep.Sizes {
		out := []string{sizeLabel(r)}
		for _, c := range smallAgentFor(r) {
			out = append(out, c.String())
		}
		row(b, out...)
	}
	fmt.Fprintf(b, "\nIssue 40's targets, for edge boxes of 1–2 GiB that run the real workload beside the agent. "+
		"✅ met, ❌ missed, (…) measured where the target does not apply, — not measured. "+
		"The first three columns are from the full-zone run and take the larger of edgequorum's leader and largest follower: "+
		"peak RSS (VmHWM, start-up included) against the baseline's largest node at N = 3…%d in real time and in MiB at N ≤ %d, "+
		"and the working set, the pages touched in 20 s of the steady window, at N = 3. "+
		"The others are from the real-time leader phase at N = %d (\"Leader in real time\"): the peak RSS of the leader and "+
		"the largest spare, and CPU as a share of one core, the leader's and the spares' mean.", SmallZoneMax, SmallZoneMax, TargetSize)
	if len(rep.Binaries) > 0 {
		b.WriteString(" Binary sizes and start-up RSS are in \"Binaries\".")
	}
	b.WriteString("\n")
}

// smallAgentFor evaluates the small-agent targets at one size, in the order
// of writeSmallAgent's columns.
func smallAgentFor(r SizeResult) []target {
	small := r.N <= SmallZoneMax
	realTime := small && r.Ours.Scale <= 1
	atTarget := r.N == TargetSize
	out := make([]target, 0, 7)

	os := sv(r.Ours)
	who, worst := "leader", measuredOrNaN(os.LeaderMem.Peak)
	if f := measuredOrNaN(os.NodeMem.Peak); f > worst || math.IsNaN(worst) {
		who, worst = "follower", f
	}
	base := measuredOrNaN(sv(r.Base).NodeMem.Peak)
	ratio := worst / base
	wsWho, ws := "leader", measuredOrNaN(os.LeaderMem.WorkingSet)
	if f := measuredOrNaN(os.NodeMem.WorkingSet); f > ws || math.IsNaN(ws) {
		wsWho, ws = "follower", f
	}
	out = append(out,
		target{applies: realTime, ok: ratio <= SmallAgentBaselineRatio,
			value: orNaN(ratio, fmt.Sprintf("%s× (%s %s / %s MiB)", closeCall(ratio, SmallAgentBaselineRatio, 2), who, mib(worst), mib(base)))},
		target{applies: small, ok: worst <= SmallAgentRSS,
			value: orNaN(worst, fmt.Sprintf("%s MiB (%s)", closeCall(worst/(1<<20), SmallAgentRSS>>20, 1), who))},
		target{applies: r.N == 3, ok: ws <= SmallAgentWorkingSet,
			value: orNaN(ws, fmt.Sprintf("%s MiB (%s)", closeCall(ws/(1<<20), SmallAgentWorkingSet>>20, 1), wsWho))})
	if r.Ours.Ran && r.Ours.FormSeconds == 0 {
		// The zone never formed: where a target applies it is missed, not
		// unmeasured (the notes give the error).
		for i := range out {
			out[i].value = "—"
			if out[i].applies {
				out[i].value = notFormed
			}
		}
	}

	l := r.Live
	switch {
	case l == nil || !l.Ran:
		return append(out, target{value: "—"}, target{value: "—"}, target{value: "—"}, target{value: "—"})
	case !l.measured():
		// A phase that ran and measured nothing did not form: a miss
		// where the targets apply.
		t := target{value: "—"}
		if atTarget {
			t = target{applies: true, value: notFormed}
		}
		return append(out, t, t, t, t)
	}
	leaderRSS, spareRSS := measuredOrNaN(l.LeaderRSS), measuredOrNaN(l.SpareRSS)
	leaderCPU, spareCPU := l.LeaderCPUShare(), l.SpareCPU/60
	if l.Spares == 0 {
		spareRSS, spareCPU = math.NaN(), math.NaN()
	}
	mibCell := func(v float64, limit int) string {
		return orNaN(v, closeCall(v/(1<<20), float64(limit>>20), 1)+" MiB")
	}
	cpuCell := func(share, limitPercent float64) string {
		return orNaN(share, closeCall(100*share, limitPercent, 1)+" %")
	}
	return append(out,
		target{applies: atTarget, ok: leaderRSS <= SmallAgentLeaderRSS, value: mibCell(leaderRSS, SmallAgentLeaderRSS)},
		target{applies: atTarget, ok: spareRSS <= SmallAgentSpareRSS, value: mibCell(spareRSS, SmallAgentSpareRSS)},
		target{applies: atTarget, ok: spareCPU <= SmallAgentSpareCPU, value: cpuCell(spareCPU, 100*SmallAgentSpareCPU)},
		target{applies: atTarget, ok: leaderCPU <= SmallAgentLeaderCPU, value: cpuCell(leaderCPU, 100*SmallAgentLeaderCPU)})
}

// closeCall prints v with prec decimals, or more when prec would round it
// onto limit and hide which side of the target it is on (as targetTimes
// does for ratios judged against 1).
func closeCall(v, limit float64, prec int) string {
	for p := prec; ; p++ {
		s := strconv.FormatFloat(v, 'f', p, 64)
		if x, err := strconv.ParseFloat(s, 64); v == limit || p >= prec+4 || err != nil || x != limit {
			return s
		}
	}
}
