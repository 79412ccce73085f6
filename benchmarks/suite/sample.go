package suite

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
)

// member is one process the suite samples: an agent or a baseline daemon.
type member struct {
	name       string
	metricsURL string
	// pidArg is a command-line argument only this process carries.
	pidArg string
}

// memberSample is one process at one instant.
type memberSample struct {
	pid     int
	metrics scrape.Sample
	cpu     time.Duration
	rss     uint64
	rssFile uint64 // RssFile now
	mem     procstat.Mem
	// ws is the working set, the bytes of pages touched since the window's
	// first snapshot cleared the referenced bits (readWorkingSets), over
	// wsWindow; wsErr says why it is missing. clearedAt is when that
	// snapshot cleared them (wsStart only).
	ws        uint64
	wsWindow  time.Duration
	wsErr     error
	clearedAt time.Time
	err       error
}

// WorkingSetWindow is how long the working set is measured: issue 40's
// definition, the pages a member touches in 20 s, whatever the length of the
// steady window around it (the full run's is 30 s), so that every run reads
// the same figure.
const WorkingSetWindow = 20 * time.Second

// wsStep is a snapshot's part in the working-set measurement: the window's
// first snapshot clears every member's referenced bits.
type wsStep int

const (
	wsNone  wsStep = iota
	wsStart        // clear the referenced bits after sampling
)

type snapshot struct {
	at      time.Time
	host    procstat.HostCPU
	members map[string]memberSample
}

// pidPrefix is the flag prefix that identifies processes; both systems are
// started with a per-node address flag.
func takeSnapshot(ctx context.Context, members []member, pidPrefix string, step wsStep) snapshot {
	s := snapshot{at: time.Now(), members: map[string]memberSample{}}
	s.host, _ = procstat.ReadHostCPU()
	pids, _ := procstat.Index(pidPrefix)
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ms := memberSample{pid: pids[m.pidArg]}
			ms.metrics, ms.err = scrape.Fetch(ctx, m.metricsURL)
			if ms.pid != 0 {
				ms.cpu, _ = procstat.CPU(ms.pid)
				ms.rss, _ = procstat.PeakRSS(ms.pid)
				ms.rssFile, _ = procstat.FileRSS(ms.pid)
				ms.mem, _ = procstat.Memory(ms.pid)
				if step == wsStart && procstat.ClearRefs(ms.pid) == nil {
					ms.clearedAt = time.Now()
				}
			}
			mu.Lock()
			s.members[m.name] = ms
			mu.Unlock()
		})
	}
	wg.Wait()
	return s
}

// steadyWindow samples members over a steady window of length d: a snapshot
// that clears their referenced bits, their working sets WorkingSetWindow
// later (or at the end of a shorter window) read before anything scrapes
// them, and a snapshot at the end. during runs right after the first.
func steadyWindow(ctx context.Context, members []member, pidPrefix string, d time.Duration, during func()) (before, after snapshot, err error) {
	before = takeSnapshot(ctx, members, pidPrefix, wsStart)
	if during != nil {
		during()
	}
	ws := min(d, WorkingSetWindow)
	if err := sleep(ctx, ws); err != nil {
		return before, after, err
	}
	sets := readWorkingSets(before)
	if err := sleep(ctx, d-ws); err != nil {
		return before, after, err
	}
	after = takeSnapshot(ctx, members, pidPrefix, wsNone)
	for name, r := range sets {
		if ms, ok := after.members[name]; ok && ms.pid == r.pid {
			ms.ws, ms.wsWindow, ms.wsErr = r.ws, r.wsWindow, r.wsErr
			after.members[name] = ms
		}
	}
	return before, after, nil
}

// readWorkingSets reads the working set of every member whose referenced
// bits before cleared, by the process it cleared: reading smaps touches
// none of the member's pages, so they are read before any scrape.
func readWorkingSets(before snapshot) map[string]memberSample {
	out := map[string]memberSample{}
	for name, ms := range before.members {
		if ms.pid == 0 || ms.clearedAt.IsZero() {
			continue
		}
		r := memberSample{pid: ms.pid}
		r.ws, r.wsErr = procstat.WorkingSet(ms.pid)
		r.wsWindow = time.Since(ms.clearedAt)
		out[name] = r
	}
	return out
}

// rates is one member's cost between two snapshots.
type rates struct {
	sent, received float64 // bytes/s
	msgs           float64 // messages sent/s
	cpuPerMin      float64 // CPU seconds per minute
	rss            uint64  // peak RSS at the later snapshot
	rssFile        uint64  // file-backed RSS at the later snapshot
	mem            MemFigures
}

// counterSet names the metrics of one system.
type counterSet struct {
	bytes string
	// msgs lists the counters (name, label filter) whose sum is messages sent.
	msgs []metricRef
}

type metricRef struct {
	name  string
	match map[string]string
}

// memberRates computes rates for every member present, with the same PID, in
// both snapshots: a process that restarted has reset its counters.
func memberRates(before, after snapshot, cs counterSet) map[string]rates {
	out := map[string]rates{}
	for name, a := range after.members {
		b, ok := before.members[name]
		if !ok || a.err != nil || b.err != nil {
			continue
		}
		secs := a.metrics.At.Sub(b.metrics.At).Seconds()
		if secs <= 0 {
			continue
		}
		delta := func(n string, m map[string]string) float64 {
			return (a.metrics.Sum(n, m) - b.metrics.Sum(n, m)) / secs
		}
		r := rates{
			sent:     delta(cs.bytes, map[string]string{"direction": "sent"}),
			received: delta(cs.bytes, map[string]string{"direction": "received"}),
			rss:      a.rss,
			rssFile:  a.rssFile,
		}
		for _, m := range cs.msgs {
			r.msgs += delta(m.name, m.match)
		}
		r.cpuPerMin = math.NaN()
		if a.pid != 0 && a.pid == b.pid {
			r.cpuPerMin = (a.cpu - b.cpu).Seconds() / after.at.Sub(before.at).Minutes()
		}
		r.mem = memFigures(b, a)
		out[name] = r
	}
	return out
}

// histogramDelta is the named histogram's observations between two samples
// of one member.
func histogramDelta(before, after memberSample, name string, match map[string]string) []stats.Bucket {
	return stats.SubBuckets(after.metrics.Buckets(name, match), before.metrics.Buckets(name, match))
}

// Go runtime gauges every Go process's default Prometheus collector exports,
// edgequorum's and the baseline's alike.
const (
	heapInuseMetric  = "go_memstats_heap_inuse_bytes"
	heapGoalMetric   = "go_memstats_next_gc_bytes"
	goroutinesMetric = "go_goroutines"
)

// memFigures is one member's memory at the end of a window from its two
// snapshots; the working set only when the same process was cleared at the
// start and read WorkingSetWindow later.
func memFigures(before, after memberSample) MemFigures {
	f := MemFigures{Peak: float64(after.mem.Peak), Anon: float64(after.mem.Anon), File: float64(after.mem.File),
		HeapInuse: after.metrics.Sum(heapInuseMetric, nil), HeapGoal: after.metrics.Sum(heapGoalMetric, nil),
		Goroutines: after.metrics.Sum(goroutinesMetric, nil)}
	if after.pid != 0 && after.pid == before.pid && !before.clearedAt.IsZero() && after.wsErr == nil && after.ws > 0 {
		f.WorkingSet, f.WindowSeconds = float64(after.ws), after.wsWindow.Seconds()
	}
	return f
}
