package suite

import (
	"math"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
)

// Report is one run of the suite.
type Report struct {
	Machine   Machine
	GoVersion string
	// Commit is the source revision, filled in by the caller.
	Commit  string
	Started time.Time
	Took    time.Duration
	Config  Config
	// WebhookAnnounced says the suite wrote the webhook's reads Lease
	// (Config.NoWebhook unset), so calm zones renewed quietly; false in
	// reports of runs from before 2026-12-02, which wrote none.
	WebhookAnnounced bool `json:",omitempty"`
	Sizes            []SizeResult
	// Signing is the cost of the node signatures on this machine.
	Signing SigningCost
	// Binaries is what each program costs before it does anything; empty
	// in reports from before it was measured.
	Binaries []Binary `json:",omitempty"`
	// BinariesFrom names the run Binaries came from when a merge
	// (-render) took them from another run than the report's own.
	BinariesFrom string `json:",omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPU     string
	Cores   int
	MemGiB  float64
	Kernel  string
	LoadAvg string // at start: other work on the machine skews every figure
}

// SizeResult is everything measured at one zone size.
type SizeResult struct {
	N    int
	Ours System
	// Base is the baseline at edgequorum's probe cadence.
	Base System
	// Defaults is the baseline at SuperEdge's own default timings; nil when
	// not run.
	Defaults *System
	// From names the run Ours and Base came from when it is not the
	// report's own (a run merged in with -render): date and commit.
	From string `json:",omitempty"`
	// BaseFrom names the run Base came from when a later run measured
	// edgequorum alone (-only-ours) and Ours was replaced: then From names
	// Ours' run only.
	BaseFrom string `json:",omitempty"`
	// Lossy is the lossy-link phase, one entry per loss level, both systems
	// side by side; kept apart from Ours and Base so that a run of this phase
	// alone (-only-lossy) merges into a full run without replacing them.
	Lossy []LossLevel
	// Live is the real-time leader phase; nil when it did not run.
	Live *Live `json:",omitempty"`
}

// LossLevel is one packet-loss rate between the zone's nodes at one size.
type LossLevel struct {
	// Percent of packets dropped between any two zone nodes, each way.
	Percent    int
	Ours, Base LossFigures
	// From names the run these figures came from when it is not the
	// report's own (a run merged in with -render): date and commit.
	From string `json:",omitempty"`
}

// LossFigures is one system under a loss level: what it got wrong while every
// node was alive, and how fast it still saw a real death. Durations are
// seconds of protocol time.
type LossFigures struct {
	Ran    bool
	Errors []string
	// Scale is the time-dilation factor the system ran at.
	Scale float64
	// Seconds is how long the loss was on: the window, the kills and the
	// revivals; NodeSeconds sums it over the nodes that were alive.
	Seconds, NodeSeconds float64
	// FalseVerdicts are non-healthy verdicts written for a node that was
	// alive at the time, while the loss was on or just after it.
	FalseVerdicts int
	// FalseNodes names the nodes those verdicts were about.
	FalseNodes []string
	// DetectAnnot is node death → unhealthy annotation with the loss on.
	DetectAnnot []float64
	// Recovery is node back → healthy annotation with the loss on.
	Recovery []float64
	// Packets and Dropped are what the loss rule saw and dropped between zone
	// nodes: Dropped/Packets is the loss that was really applied.
	Packets, Dropped int64
}

// System is one system's figures at one zone size. Durations are seconds.
type System struct {
	Name   string
	Ran    bool
	Errors []string
	// Scale is the time-dilation factor the system ran at (see Scale); every
	// figure below is already converted back to protocol time.
	Scale float64

	// FormSeconds is start to every node annotated healthy.
	FormSeconds float64

	// DetectCommit is node death → unhealthy verdict committed (the leader's
	// decidedAt); edgequorum only. Like DetectAnnot and Recovery it holds
	// reset deaths only: the processes SIGKILLed with the node's address up,
	// so probes fail at once with a TCP reset (every kill, in runs before
	// silent deaths were measured).
	DetectCommit []float64
	// DetectAnnot is node death → unhealthy annotation on the Node.
	DetectAnnot []float64
	// Recovery is node back (kubelet and agent started) → healthy annotation.
	Recovery []float64
	// DetectCommitSilent, DetectAnnotSilent and RecoverySilent are the same
	// for silent deaths: the same kills behind a drop of every packet to and
	// from the node's address, so that every probe waits out its timeout, as
	// for a powered-off node. Empty in results from before they were measured.
	DetectCommitSilent, DetectAnnotSilent, RecoverySilent []float64
	// Stalls are the follower stalls of a detection run (edgequorum only):
	// its agent stopped (SIGSTOP) for 1–3 s and continued, while its
	// kubelet and address stay up. A stalled process is not dead; StallFalse
	// lists the unhealthy verdicts written about a stalled node from its stop
	// until a vote timeout after it went on (target: none).
	Stalls     []Stall  `json:",omitempty"`
	StallFalse []string `json:",omitempty"`

	// Failover is leader death → a surviving voter leads and has passed its
	// Barrier (edgequorum_raft_is_leader = 1): from then its next verdict is
	// written within a vote period. FailoverWrite is leader death → the new
	// leader's first API write (the zone Lease, renewed on its own period);
	// FailoverVerdict is leader death → the dead leader's unhealthy annotation,
	// written by the new leader.
	Failover, FailoverWrite, FailoverVerdict []float64

	Steady Steady
	// Measured is Steady as measured on the dilated clock, before conversion:
	// at a scaled size the true rates lie between Measured and Steady (see
	// normalize). Equal to Steady at real time.
	Measured Steady
	Churn    Churn

	// CutRan, CutSeconds and FalseVerdicts: non-healthy annotations written
	// while every kubelet of the zone was cut from the cloud; CutWrites is
	// every node write in that time.
	CutRan        bool
	CutSeconds    float64
	FalseVerdicts int
	CutWrites     int
}

// Steady is the steady-state window. Byte and message rates are per second,
// CPU in CPU-seconds per minute, RSS in bytes.
type Steady struct {
	Seconds float64
	Members int // members sampled on both ends of the window
	Leader  string

	// Ordinary members: every member but the leader (every member for the
	// baseline, which has none). Node* are means over them, *Max maxima.
	NodeSent, NodeRecv, NodeMsgs float64
	NodeBytesMax                 float64
	NodeCPU, NodeCPUMax          float64
	NodeRSSMax                   float64

	LeaderSent, LeaderRecv, LeaderMsgs, LeaderCPU, LeaderRSS float64

	// Zone totals: every byte or message is sent by exactly one member.
	ZoneBytes, ZoneMsgs float64

	// Writes are the system's apiserver writes in the window; NodeWrites the
	// ones on Nodes (verdicts), LeaseWrites the zone Lease renewals.
	Writes, NodeWrites, LeaseWrites int

	// CommitP50 and CommitP99 are the leader's Raft apply-to-commit latency of
	// report batches, in seconds; edgequorum only.
	CommitP50, CommitP99 float64

	// HostBusy is the machine's CPU utilisation in the window, 0..1: above
	// ~0.9 every latency is the machine's, not the protocol's.
	HostBusy float64

	// LeaderMem is the leader's memory at the end of the window; NodeMem
	// that of the ordinary member with the largest peak RSS.
	LeaderMem, NodeMem MemFigures
}

// MemFigures is one member's memory, where it goes, and what of it the
// member needs: bytes, Goroutines a count, WindowSeconds the working set's
// window in wall-clock time. 0 is not measured (a run before these figures,
// or a process gone); none of them is ever 0 when measured.
type MemFigures struct {
	// Peak is VmHWM (start-up included); Anon and File split the RSS at
	// the end of the window into the process's own pages and the mapped
	// files (its binary), which the kernel may drop and reread.
	Peak, Anon, File float64
	// WorkingSet is the pages touched over the window.
	WorkingSet, WindowSeconds float64
	// HeapInuse and HeapGoal are the Go heap's spans in use and the heap
	// size at which the next GC runs (GOGC headroom over the live heap).
	HeapInuse, HeapGoal float64
	Goroutines          float64
}

// Churn is the kill phase: verdict changes and the writes they cost.
type Churn struct {
	Seconds float64
	// Changes are annotation state changes seen on the watch.
	Changes int
	// WriteAttempts are node write requests (any answer); WritesOK the 2xx ones.
	WriteAttempts, WritesOK int
}

// deaths are the kind's detection and recovery lists: death → committed
// verdict, death → annotation, restart → healthy annotation.
func (s *System) deaths(kind deathKind) (commit, annot, recovery *[]float64) {
	if kind == silent {
		return &s.DetectCommitSilent, &s.DetectAnnotSilent, &s.RecoverySilent
	}
	return &s.DetectCommit, &s.DetectAnnot, &s.Recovery
}

// WritesPerMinute in the steady window.
func (s Steady) WritesPerMinute() float64 { return perMinute(float64(s.Writes), s.Seconds) }

// LeaseWritesPerMinute in the steady window.
func (s Steady) LeaseWritesPerMinute() float64 { return perMinute(float64(s.LeaseWrites), s.Seconds) }

// NodeBytes is an ordinary member's mean sent+received bytes/s.
func (s Steady) NodeBytes() float64 { return s.NodeSent + s.NodeRecv }

// LeaderBytes is the leader's sent+received bytes/s.
func (s Steady) LeaderBytes() float64 { return s.LeaderSent + s.LeaderRecv }

// BusiestBytes is the busiest member's sent+received bytes/s.
func (s Steady) BusiestBytes() float64 { return maxNaN(s.LeaderBytes(), s.NodeBytesMax) }

// PeakRSS is the largest peak RSS of any member.
func (s Steady) PeakRSS() float64 { return maxNaN(s.LeaderRSS, s.NodeRSSMax) }

// LeaderCPUShare is the leader's share of one core.
func (s Steady) LeaderCPUShare() float64 { return s.LeaderCPU / 60 }

// WritesPerChange is node write requests per verdict change in the kill phase.
func (c Churn) WritesPerChange() float64 {
	if c.Changes == 0 {
		return math.NaN()
	}
	return float64(c.WriteAttempts) / float64(c.Changes)
}

// WritesPerMinute is node write requests per minute during the kill phase.
func (c Churn) WritesPerMinute() float64 { return perMinute(float64(c.WriteAttempts), c.Seconds) }

func perMinute(n, seconds float64) float64 {
	if seconds <= 0 {
		return math.NaN()
	}
	return n * 60 / seconds
}

func maxNaN(a, b float64) float64 {
	switch {
	case math.IsNaN(a):
		return b
	case math.IsNaN(b):
		return a
	}
	return math.Max(a, b)
}

// p50 and p99 of a sample list, NaN when empty.
func p50(xs []float64) float64 { return stats.Percentile(xs, 50) }
func p99(xs []float64) float64 { return stats.Percentile(xs, 99) }

// summarize turns two snapshots into the steady-state figures. leader is ""
// for the baseline.
func summarize(before, after snapshot, cs counterSet, leader string) Steady {
	st := Steady{Seconds: after.at.Sub(before.at).Seconds(), Leader: leader,
		LeaderSent: math.NaN(), LeaderRecv: math.NaN(), LeaderMsgs: math.NaN(), LeaderCPU: math.NaN(), LeaderRSS: math.NaN(),
		CommitP50: math.NaN(), CommitP99: math.NaN()}
	st.HostBusy = hostBusy(before, after)
	var sent, recv, msgs, cpu, rss, bytesPer []float64
	for name, r := range memberRates(before, after, cs) {
		st.Members++
		st.ZoneBytes += r.sent
		st.ZoneMsgs += r.msgs
		if name == leader {
			st.LeaderSent, st.LeaderRecv, st.LeaderMsgs, st.LeaderCPU = r.sent, r.received, r.msgs, r.cpuPerMin
			st.LeaderRSS = float64(r.rss)
			st.LeaderMem = r.mem
			continue
		}
		if r.mem.Peak > st.NodeMem.Peak {
			st.NodeMem = r.mem
		}
		sent, recv, msgs = append(sent, r.sent), append(recv, r.received), append(msgs, r.msgs)
		bytesPer = append(bytesPer, r.sent+r.received)
		if !math.IsNaN(r.cpuPerMin) {
			cpu = append(cpu, r.cpuPerMin)
		}
		if r.rss > 0 {
			rss = append(rss, float64(r.rss))
		}
	}
	st.NodeSent, st.NodeRecv, st.NodeMsgs = stats.Mean(sent), stats.Mean(recv), stats.Mean(msgs)
	st.NodeBytesMax = stats.Max(bytesPer)
	st.NodeCPU, st.NodeCPUMax = stats.Mean(cpu), stats.Max(cpu)
	st.NodeRSSMax = stats.Max(rss)
	return st
}

func hostBusy(before, after snapshot) float64 {
	total := after.host.Total - before.host.Total
	if total <= 0 {
		return math.NaN()
	}
	return float64(after.host.Busy-before.host.Busy) / float64(total)
}

// quantile estimates a latency quantile from histogram buckets.
func quantile(q float64, b []stats.Bucket) float64 { return stats.HistogramQuantile(q, b) }

// normalize converts figures measured at time-dilation factor k back to
// protocol time: durations shrink by k, per-second and per-minute rates grow
// by k. Counts stay; their windows shrink, so per-minute figures follow.
//
// Rates converted this way are upper bounds: work no flag slows (the Go
// runtime, informer events from kubelet heartbeats) is multiplied without
// having slowed. The measured rates are the matching lower bounds.
func (s *System) normalize(k float64) {
	s.Scale = k
	s.Measured = s.Steady
	if k == 1 {
		return
	}
	for _, xs := range [][]float64{s.DetectCommit, s.DetectAnnot, s.Recovery, s.DetectCommitSilent, s.DetectAnnotSilent, s.RecoverySilent,
		s.Failover, s.FailoverWrite, s.FailoverVerdict} {
		for i := range xs {
			xs[i] /= k
		}
	}
	s.FormSeconds /= k
	s.CutSeconds /= k
	for i := range s.Stalls {
		s.Stalls[i].Seconds /= k
	}
	s.Churn.Seconds /= k
	st := &s.Steady
	st.Seconds /= k
	for _, f := range []*float64{&st.NodeSent, &st.NodeRecv, &st.NodeMsgs, &st.NodeBytesMax, &st.NodeCPU, &st.NodeCPUMax,
		&st.LeaderSent, &st.LeaderRecv, &st.LeaderMsgs, &st.LeaderCPU, &st.ZoneBytes, &st.ZoneMsgs} {
		*f *= k
	}
}

// normalize converts a lossy-link run at time-dilation factor k back to
// protocol time, as System.normalize does.
func (f *LossFigures) normalize(k float64) {
	f.Scale = k
	if k == 1 {
		return
	}
	for _, xs := range [][]float64{f.DetectAnnot, f.Recovery} {
		for i := range xs {
			xs[i] /= k
		}
	}
	f.Seconds /= k
	f.NodeSeconds /= k
}

// Stall is one stall of a detection run.
type Stall struct {
	Node string
	// Seconds is how long the agent was stopped, in protocol time.
	Seconds float64
}
