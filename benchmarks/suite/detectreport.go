package suite

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteDetectMarkdown renders a detection run (Config.DetectOnly, `make
// bench-detect`): per size and kind of death, each system's death → verdict
// figures, p50 and tail, and the revivals.
func WriteDetectMarkdown(w io.Writer, rep *Report) error {
	var b strings.Builder
	cfg := rep.Config
	fmt.Fprintf(&b, "# edgequorum detection benchmark: reset and silent deaths\n\n")
	fmt.Fprintf(&b, "- **Date:** %s (took %s) — detection run (`make bench-detect`)\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Took.Round(time.Second))
	fmt.Fprintf(&b, "- **Machine:** %s, %d cores, %.0f GiB, Linux %s; load average at start %s\n",
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.MemGiB, rep.Machine.Kernel, rep.Machine.LoadAvg)
	fmt.Fprintf(&b, "- **Go:** %s; **commit:** %s\n", rep.GoVersion, orDash(rep.Commit))
	fmt.Fprintf(&b, "- **Settings:** %d reset and %d silent %s per system and size, alternating, each after a random part of a probe period; "+
		"only formation and the kill phase run. edgequorum at its defaults (probe period %s, probe timeout 1s, failure threshold %d, "+
		"vote period %s, vote timeout %s); baseline = SuperEdge edge-health at the same cadence (check and exchange %s, ping timeout 1s, "+
		"vote %s, votes valid %s)\n\n",
		cfg.DetectKills, cfg.DetectKills, plural(cfg.DetectKills, "death", "deaths"), ProbePeriod, FailureThreshold, VotePeriod, VoteTimeout,
		ProbePeriod, VotePeriod, VoteTimeout)

	b.WriteString("## Node death → unhealthy (seconds, p50 / tail)\n\n")
	row(&b, "N", "kind", "ours: death → committed", "ours: death → annotation", "rule's floor, p99",
		fmt.Sprintf("ours: tail ≤ %.1f× floor", TargetFloorRatio), "baseline: death → annotation",
		fmt.Sprintf("ours ÷ baseline, tail (silent: ≤ %.1f×)", TargetSilentVsBaseline),
		fmt.Sprintf("ours: tail ≤ %s (silent) / %s (reset)", fmtDur(TargetSilentDetection), fmtDur(TargetDetection)))
	rule(&b, 9)
	for _, r := range rep.Sizes {
		for _, kind := range []deathKind{reset, silent} {
			oCommit, oAnnot, _ := r.Ours.deaths(kind)
			_, sAnnot, _ := r.Base.deaths(kind)
			tail, baseTail := p99(*oAnnot), p99(*sAnnot)
			floor := Floor(r.N, kind == silent, 0.99)
			limit := TargetDetection
			if kind == silent {
				limit = TargetSilentDetection
			}
			abs := target{applies: true, ok: tail <= limit.Seconds(), value: orNaN(tail, sec(tail)+" s")}
			vsFloor := target{applies: true, ok: tail <= TargetFloorRatio*floor, value: ratioX(tail, floor)}
			vsBase := target{applies: kind == silent, ok: tail <= TargetSilentVsBaseline*baseTail, value: ratioX(tail, baseTail)}
			row(&b, sizeLabel(r), kind.String(), p50Tail(*oCommit), p50Tail(*oAnnot), orNaN(floor, sec(floor)+" s"),
				vsFloor.String(), p50Tail(*sAnnot), vsBase.String(), abs.String())
		}
	}
	b.WriteString("\n" + deathsNote(rep) + " \"Committed\" is the leader's decidedAt of the Raft-committed verdict; " +
		"\"annotation\" is when a watch on the zone's Nodes saw the verdict written. The death is timed from just before the kills, " +
		"or for a silent death just before its drop rule is installed. The rule's floor is what the verdict rule itself needs at " +
		"the p99, before any cost of the code that runs it (DESIGN.md, verdict rule; `Floor` in benchmarks/suite/floor.go): the quorum's " +
		"next probes, then for a silent death half a probe timeout without an answer and the confirmation's connections, for a reset " +
		"the failure threshold's periods, then one batch window. A tail of fewer than 100 deaths is their maximum.\n")
	if scaledAny(rep) {
		b.WriteString("\n" + dilationNote + "\n")
	}
	if n := fromNote(rep); n != "" {
		b.WriteString("\n" + n + "\n")
	}

	b.WriteString("\n## What silence costs (seconds, p50 of silent − p50 of reset)\n\n")
	row(&b, "N", "ours: death → committed", "ours: death → annotation", "baseline: death → annotation")
	rule(&b, 4)
	for _, r := range rep.Sizes {
		o, s := r.Ours, r.Base
		row(&b, sizeLabel(r), diff(o.DetectCommitSilent, o.DetectCommit), diff(o.DetectAnnotSilent, o.DetectAnnot),
			diff(s.DetectAnnotSilent, s.DetectAnnot))
	}
	b.WriteString("\nA reset death fails the next probe at once; a silent one fails it only when a timeout runs out: edgequorum's " +
		"probe timeout of 1 s, the baseline's ping timeout of 1 s and exchange timeout of 2 s (× the dilation factor at ⏱ sizes). " +
		"edgequorum judges a silent death sooner than a reset, though: silence takes its confirmation's fast path (fresh " +
		"connections that get no answer at all), while a refused port is a box that is up with a process down, which the failure " +
		"threshold judges, as a kubelet would (DESIGN.md, verdict rule). With a few deaths of each kind these differences move from " +
		"run to run; compare them at 100 of each.\n")

	b.WriteString("\n## A stalled agent is not a dead node (edgequorum)\n\n")
	row(&b, "N", "stalls", "stopped for (s, min / max)", "false unhealthy verdicts (target 0)")
	rule(&b, 4)
	for _, r := range rep.Sizes {
		st := r.Ours.Stalls
		if len(st) == 0 {
			row(&b, sizeLabel(r), "0", "—", "—")
			continue
		}
		lo, hi := st[0].Seconds, st[0].Seconds
		for _, x := range st {
			lo, hi = min(lo, x.Seconds), max(hi, x.Seconds)
		}
		f := r.Ours.StallFalse
		t := target{applies: true, ok: len(f) == 0, value: fmt.Sprint(len(f))}
		if len(f) > 0 {
			t.value += ": " + strings.Join(f, "; ")
		}
		row(&b, sizeLabel(r), fmt.Sprint(len(st)), fmt.Sprintf("%.1f / %.1f", lo, hi), t.String())
	}
	b.WriteString("\nA follower's agent is stopped (SIGSTOP) for a random 1–3 s, after its kills, and continued; its kubelet and its " +
		"address stay up, as on a box whose agent stalls (a long GC, a swap storm, a frozen cgroup). Every unhealthy verdict about it " +
		"from the stop until a vote timeout after it went on counts. Its peers' agent probes fail meanwhile; the confirmation's " +
		"fresh connections find the box's kernel answering, so the failure threshold judges, as a kubelet would.\n")

	b.WriteString("\n## Back → healthy (seconds, p50 / tail)\n\n")
	row(&b, "N", "kind", "ours", "baseline")
	rule(&b, 4)
	for _, r := range rep.Sizes {
		for _, kind := range []deathKind{reset, silent} {
			_, _, o := r.Ours.deaths(kind)
			_, _, s := r.Base.deaths(kind)
			row(&b, sizeLabel(r), kind.String(), p50Tail(*o), p50Tail(*s))
		}
	}
	b.WriteString("\nFrom the restart of the kubelet and the agent (or daemon) to the healthy annotation; a silent death's drop rule " +
		"is removed just before the restart.\n")
	writeNotes(&b, rep)
	_, err := io.WriteString(w, b.String())
	return err
}

// diff is p50(a) − p50(b), signed; "—" when either is empty.
func diff(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f", p50(a)-p50(b))
}

// scaledAny reports whether any size ran time-dilated.
func scaledAny(rep *Report) bool {
	for _, r := range rep.Sizes {
		if r.Ours.Scale > 1 || r.Base.Scale > 1 {
			return true
		}
	}
	return false
}
