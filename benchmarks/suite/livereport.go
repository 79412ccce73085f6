package suite

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

func hasLive(rep *Report) bool {
	return slices.ContainsFunc(rep.Sizes, func(r SizeResult) bool { return r.Live != nil && r.Live.Ran })
}

// liveOf is a size's real-time leader phase, nil when it did not run.
// measured reports whether the phase got as far as its window: a phase whose
// zone did not form has no formation time, no leader and no figure.
func (l *Live) measured() bool { return l.FormSeconds > 0 || l.Leader != "" }

func liveOf(r SizeResult) *Live {
	if r.Live != nil && r.Live.Ran {
		return r.Live
	}
	return nil
}

// writeLive is the real-time leader phase: one row per size it ran at, then
// the scale targets at TargetSize, each with the run its figure comes from.
func writeLive(b *strings.Builder, rep *Report) {
	b.WriteString("The Raft servers (voters and stand-bys) and a few spares run as agents in real time; every other member is a " +
		"stand-in (`bin/standins`): the member code itself — join with its own node key, signed reports at the real cadence, " +
		"answers to every probe, view copies from a server — except that it probes only the agents and reports the other " +
		"stand-ins healthy. The leader so gets all a zone of N sends it, undilated; a stand-in's own bytes lack the probes of " +
		"other stand-ins, so the spare figures are the spare agents'.\n\n")
	row(b, "N", "agents: servers + spares / stand-ins", "formed (s)", "leader CPU (% core)", "leader peak RSS (MiB)",
		"leader sent / recv", "leader ÷ baseline node", "spare sent / recv", "spare ÷ baseline node", "spare peak RSS (MiB)",
		"stand-in sent / recv", "stand-ins' process CPU (% core) / peak RSS (MiB)", "host busy", "seats held by the server agents")
	rule(b, 14)
	var froms []string
	for _, r := range rep.Sizes {
		l := liveOf(r)
		if l == nil {
			continue
		}
		if !l.measured() {
			why := notFormed
			if len(l.Errors) > 0 {
				why += ": " + l.Errors[0]
			}
			row(b, strconv.Itoa(r.N), fmt.Sprintf("%d + %d / %d", l.Servers, l.Spares, l.StandIns), "❌ "+why,
				"—", "—", "—", "—", "—", "—", "—", "—", "—", "—", "—")
			continue
		}
		node := sv(r.Base).NodeBytes()
		held := "✅"
		if !l.RolesHeld {
			held = "❌ " + orDash(l.Roles)
		}
		label := strconv.Itoa(r.N)
		if l.From != "" {
			label += " †"
			froms = append(froms, fmt.Sprintf("N = %d † comes from a separate run (%s), merged with `-render`.", r.N, l.From))
		}
		row(b, label, fmt.Sprintf("%d + %d / %d", l.Servers, l.Spares, l.StandIns), sec(l.FormSeconds),
			num(100*l.LeaderCPUShare(), 1), withFilePages(l.LeaderRSS, l.LeaderRSSFile),
			pair(humanRate(l.LeaderSent), humanRate(l.LeaderRecv)), ratioX(l.LeaderBytes(), node),
			pair(humanRate(l.SpareSent), humanRate(l.SpareRecv)), fraction(l.SpareBytes(), node), withFilePages(l.SpareRSS, l.SpareRSSFile),
			pair(humanRate(l.StandInSent), humanRate(l.StandInRecv)),
			pair(num(100*l.StandInCPU/60, 1), num(l.StandInRSS/(1<<20), 0)), pct(l.HostBusy), held)
	}
	b.WriteString("\n\"Formed\" is the stand-ins and spare agents started → every member annotated healthy (the servers had " +
		"formed before). \"Baseline node\" is a baseline node's bytes at the same size from the full-zone run (time-dilated at the " +
		"largest sizes, so an upper bound). Host busy near 100 % would make every figure the machine's; CPU time is the process's own. " +
		"\"(f MiB in file pages)\" is how much of that RSS was the agent binary's code and data mapped from its file at the end of the " +
		"window: counted in RSS, but shared and clean, so the kernel drops it under memory pressure; the rest is the process's own memory.\n")
	for _, f := range froms {
		b.WriteString("\n" + f + "\n")
	}
	for _, r := range rep.Sizes {
		if r.N == TargetSize {
			b.WriteString(fmt.Sprintf("\n### Targets at N = %d\n\n", TargetSize))
			writeScaleTargets(b, rep, r)
		}
	}
}

// measuredOrNaN is v, or NaN for a figure a run did not read (0).
func measuredOrNaN(v float64) float64 {
	if v <= 0 {
		return math.NaN()
	}
	return v
}

// withFilePages is a peak RSS in MiB and, when measured, its file-backed part.
func withFilePages(rss, file float64) string {
	if !(file > 0) { // 0 or NaN: not read
		return num(rss/(1<<20), 0)
	}
	return fmt.Sprintf("%s (%.0f MiB in file pages)", num(rss/(1<<20), 0), file/(1<<20))
}

// writeScaleTargets lists every scale target at one size, the figure, and
// the run it comes from: the real-time leader phase for the leader's and
// spares' cost, the full-zone run for everything the whole zone does.
func writeScaleTargets(b *strings.Builder, rep *Report, r SizeResult) {
	row(b, "target", "measured", "from")
	rule(b, 3)
	full := "full-zone run"
	if r.Ours.Scale > 1 {
		full = fmt.Sprintf("full-zone run, ⏱×%g", r.Ours.Scale)
	}
	run := r.From
	if run == "" {
		run = fmt.Sprintf("%s UTC, commit %s", rep.Started.UTC().Format("2006-01-02 15:04"), orDash(rep.Commit))
	}
	full += " (" + run + ")"
	if r.BaseFrom != "" {
		// The zone-wide ratios divide by a baseline from another run.
		full = fmt.Sprintf("%s; baseline: run of %s", full, r.BaseFrom)
	}
	os, ss := sv(r.Ours), sv(r.Base)
	node := ss.NodeBytes()
	nan := math.NaN()
	l := liveOf(r)
	formed := true
	if l == nil || !l.measured() {
		formed = l == nil // a phase that ran and measured nothing did not form
		l = &Live{LeaderCPU: nan, LeaderRSS: nan, LeaderSent: nan, LeaderRecv: nan, SpareSent: nan, SpareRecv: nan, SpareRSS: nan, FormSeconds: nan}
	}
	live := "real-time leader phase"
	ratio := os.ZoneBytes / ss.ZoneBytes
	fail := p99(r.Ours.Failover)
	for _, t := range []struct {
		name string
		t    target
		from string
	}{
		{fmt.Sprintf("leader peak RSS ≤ %d MiB", TargetRSS>>20),
			target{applies: true, ok: l.LeaderRSS <= TargetRSS, value: orNaN(l.LeaderRSS, fmt.Sprintf("%.0f MiB", l.LeaderRSS/(1<<20)))}, live},
		{fmt.Sprintf("leader CPU ≤ %.0f %% of a core, in real time", 100*TargetLeaderCPU),
			target{applies: true, ok: l.LeaderCPUShare() <= TargetLeaderCPU, value: orNaN(l.LeaderCPU, fmt.Sprintf("%.1f %%", 100*l.LeaderCPUShare()))}, live},
		{fmt.Sprintf("zone bytes/s ≤ 1/%.0f of the baseline's", 1/TargetZoneBytesRatio),
			target{applies: true, ok: ratio <= TargetZoneBytesRatio, value: orNaN(ratio, fraction(os.ZoneBytes, ss.ZoneBytes))}, full},
		{"leader bytes/s ≤ one baseline node's",
			target{applies: true, ok: l.LeaderBytes() <= node, value: orNaN(l.LeaderBytes()/node, ratioX(l.LeaderBytes(), node))}, live + " ÷ " + full},
		{fmt.Sprintf("spare bytes/s ≤ 1/%.0f of a baseline node's", 1/TargetSpareBytesRatio),
			target{applies: true, ok: l.SpareBytes() <= TargetSpareBytesRatio*node, value: orNaN(l.SpareBytes()/node, fraction(l.SpareBytes(), node))}, live + " ÷ " + full},
		{fmt.Sprintf("spare peak RSS ≤ %d MiB", TargetSpareRSS>>20),
			target{applies: true, ok: l.SpareRSS <= TargetSpareRSS, value: orNaN(l.SpareRSS, fmt.Sprintf("%.0f MiB", l.SpareRSS/(1<<20)))}, live},
		{fmt.Sprintf("detection p99 ≤ %s, reset and silent deaths", fmtDur(TargetDetection)), detectTarget(r.Ours), full},
		{fmt.Sprintf("failover p99 ≤ %s", fmtDur(TargetFailover)),
			target{applies: true, ok: fail <= TargetFailover.Seconds(), value: orNaN(fail, sec(fail)+" s")}, full},
		{"0 false verdicts in a cloud cut",
			target{applies: r.Ours.CutRan, ok: r.Ours.FalseVerdicts == 0, value: falseVerdicts(r.Ours)}, full},
	} {
		if !formed && t.from != full {
			t.t.value = notFormed
		}
		row(b, t.name, t.t.String(), t.from)
	}
	row(b, "zone formation (reported)", pair(sec(r.Ours.FormSeconds)+" s", sec(l.FormSeconds)+" s"), full+" / "+live)
}

// addLive adds the real-time leader phase's columns, empty when it did not run.
func addLive(add func(string, float64), l *Live) {
	nan := math.NaN()
	if l == nil || !l.Ran {
		l = &Live{FormSeconds: nan, LeaderSent: nan, LeaderRecv: nan, LeaderCPU: nan, LeaderRSS: nan, SpareSent: nan,
			SpareRecv: nan, SpareCPU: nan, SpareRSS: nan, StandInSent: nan, StandInRecv: nan, StandInCPU: nan, StandInRSS: nan, HostBusy: nan}
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"form_s", l.FormSeconds}, {"leader_sent_Bps", l.LeaderSent}, {"leader_recv_Bps", l.LeaderRecv},
		{"leader_cpu_s_per_min", l.LeaderCPU}, {"leader_peak_rss_bytes", l.LeaderRSS}, {"spare_sent_Bps", l.SpareSent},
		{"spare_recv_Bps", l.SpareRecv}, {"spare_cpu_s_per_min", l.SpareCPU}, {"spare_peak_rss_bytes", l.SpareRSS},
		{"leader_rss_file_bytes", measuredOrNaN(l.LeaderRSSFile)}, {"spare_rss_file_bytes", measuredOrNaN(l.SpareRSSFile)},
		{"standin_sent_Bps", l.StandInSent}, {"standin_recv_Bps", l.StandInRecv}, {"standins_cpu_s_per_min", l.StandInCPU},
		{"standins_peak_rss_bytes", l.StandInRSS}, {"host_busy", l.HostBusy}, {"errors", float64(len(l.Errors))}} {
		add("live_"+c.name, c.v)
	}
	addMem(add, "live_leader_", l.LeaderMem)
	addMem(add, "live_spare_", l.SpareMem)
}

// liveNote sums up the real-time leader phase for the README: the figures
// the dilated rows can only bound.
func liveNote(rep *Report) string {
	var out []string
	for _, r := range rep.Sizes {
		l := liveOf(r)
		if l == nil {
			continue
		}
		if !l.measured() {
			out = append(out, fmt.Sprintf("At N = %d in real time the zone did not form (results.md, \"Leader in real time\").", r.N))
			continue
		}
		out = append(out, fmt.Sprintf("At N = %d in real time (servers and %d %s as agents, the other %d members stand-ins): "+
			"leader CPU %.1f %% of a core, peak RSS %.0f MiB, %s; a spare %s, peak RSS %.0f MiB.",
			r.N, l.Spares, plural(l.Spares, "spare", "spares"), l.StandIns, 100*l.LeaderCPUShare(), l.LeaderRSS/(1<<20),
			humanRate(l.LeaderBytes()), humanRate(l.SpareBytes()), l.SpareRSS/(1<<20)))
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, " ") + " (results.md, \"Leader in real time\".)"
}
