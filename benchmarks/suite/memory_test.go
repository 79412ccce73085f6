package suite

import (
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
)

func memSample(pid int, peak uint64, heap float64, ws uint64) memberSample {
	return memberSample{pid: pid, ws: ws, wsWindow: WorkingSetWindow, clearedAt: time.Unix(100, 0),
		mem: procstat.Mem{Peak: peak, RSS: peak - 1<<20, Anon: peak / 2, File: peak/2 - 1<<20},
		metrics: scrape.Sample{At: time.Unix(100, 0), Series: []scrape.Series{
			{Name: heapInuseMetric, Value: heap}, {Name: heapGoalMetric, Value: 2 * heap}, {Name: goroutinesMetric, Value: 40},
			{Name: "edgequorum_zone_port_bytes_total", Labels: map[string]string{"direction": "sent"}, Value: 1}}}}
}

// The working set counts only for the process whose referenced bits the
// window's first snapshot cleared: a member that restarted meanwhile has
// none, rather than a figure from a process that was never cleared.
func TestMemFiguresWorkingSetOnlyForTheSameProcess(t *testing.T) {
	before, after := memSample(7, 30<<20, 8<<20, 0), memSample(7, 32<<20, 9<<20, 11<<20)
	f := memFigures(before, after)
	want := MemFigures{Peak: 32 << 20, Anon: 16 << 20, File: 15 << 20, WorkingSet: 11 << 20, WindowSeconds: 20,
		HeapInuse: 9 << 20, HeapGoal: 18 << 20, Goroutines: 40}
	if f != want {
		t.Fatalf("memFigures = %+v, want %+v", f, want)
	}
	restarted := memSample(8, 20<<20, 4<<20, 3<<20)
	if f := memFigures(before, restarted); f.WorkingSet != 0 || f.WindowSeconds != 0 || f.Peak != 20<<20 {
		t.Errorf("a restarted member: %+v, want its memory and no working set", f)
	}
	unread := after
	unread.wsErr = errors.New("permission denied")
	if f := memFigures(before, unread); f.WorkingSet != 0 {
		t.Errorf("an unread working set became %v", f.WorkingSet)
	}
	if f := memFigures(before, memberSample{pid: 7}); f.HeapInuse != 0 || f.Goroutines != 0 {
		t.Errorf("a failed scrape: %+v, want no heap or goroutines", f)
	}
}

func TestSummarizeKeepsTheLeaderAndTheLargestFollower(t *testing.T) {
	at := time.Unix(100, 0)
	before := snapshot{at: at, members: map[string]memberSample{
		"n-1": memSample(1, 40<<20, 10<<20, 0), "n-2": memSample(2, 30<<20, 6<<20, 0), "n-3": memSample(3, 35<<20, 7<<20, 0)}}
	after := snapshot{at: at.Add(time.Minute), members: map[string]memberSample{}}
	for name, ms := range before.members {
		ms.metrics.At = ms.metrics.At.Add(time.Minute)
		ms.ws = 5 << 20
		after.members[name] = ms
	}
	st := summarize(before, after, oursCounters, "n-1")
	if st.LeaderMem.Peak != 40<<20 || st.NodeMem.Peak != 35<<20 || st.NodeMem.HeapInuse != 7<<20 || st.NodeMem.WindowSeconds != 20 {
		t.Fatalf("leader %+v, node %+v: want the leader's 40 MiB and n-3's 35 MiB, the working set over 20 s of the 60 s window", st.LeaderMem, st.NodeMem)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back Steady
	if err := json.Unmarshal(b, &back); err != nil || back.NodeMem != st.NodeMem || back.LeaderMem != st.LeaderMem {
		t.Errorf("JSON round trip: %+v, %v; want %+v", back.NodeMem, err, st.NodeMem)
	}
}

func TestMarkdownSplitsMemory(t *testing.T) {
	rep := deathsReport()
	o := &rep.Sizes[0].Ours.Steady
	o.Members = 5
	o.LeaderMem = MemFigures{Peak: 38 << 20, Anon: 12 << 20, File: 24 << 20, WorkingSet: 9 << 20, WindowSeconds: 60, HeapInuse: 8 << 20, HeapGoal: 14 << 20, Goroutines: 120}
	o.NodeMem = MemFigures{Peak: 36 << 20, Anon: 11 << 20, File: 23 << 20, HeapInuse: 7 << 20, HeapGoal: 12 << 20, Goroutines: 90}
	var b strings.Builder
	if err := WriteMarkdown(&b, rep); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"## Where the memory goes",
		"| 5 | ours: leader | 38.0 | 12.0 / 24.0 | 9.0 (60 s) | 8.0 / 14.0 | 120 |",
		// No working set read: a dash, never 0.
		"| 5 | ours: largest follower | 36.0 | 11.0 / 23.0 | — | 7.0 / 12.0 | 90 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	// A member never measured gets no row; a run before the split, no section.
	if strings.Contains(md, "baseline: largest node |") {
		t.Errorf("a row for the baseline, which measured no memory:\n%s", md)
	}
	b.Reset()
	if err := WriteMarkdown(&b, deathsReport()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Where the memory goes") {
		t.Error("a run without the memory split has a memory section")
	}
	var csv strings.Builder
	if err := WriteCSV(&csv, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(csv.String(), "ours_leader_working_set_bytes") || !strings.Contains(csv.String(), "live_spare_goroutines") {
		t.Errorf("results.csv lacks the memory columns:\n%s", csv.String())
	}
}

// readWorkingSets reads, for each member the first snapshot cleared, that
// process's pages touched since and how long that was; a member it did not
// clear has no reading, and one that is gone an error.
func TestReadWorkingSetsReadsWhatWasCleared(t *testing.T) {
	self := os.Getpid()
	if err := procstat.ClearRefs(self); err != nil {
		t.Skipf("cannot clear this process's referenced bits: %v", err)
	}
	cleared := time.Now()
	before := snapshot{members: map[string]memberSample{
		"self":      {pid: self, clearedAt: cleared},
		"uncleared": {pid: self},
		"gone":      {pid: 1 << 30, clearedAt: cleared},
	}}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	runtime.KeepAlive(buf)
	got := readWorkingSets(before)
	if r, ok := got["self"]; !ok || r.wsErr != nil || r.ws < 1<<20 || r.pid != self || r.wsWindow <= 0 {
		t.Errorf("self: %+v, want at least the 1 MiB touched since the clear, over a positive window", r)
	}
	if _, ok := got["uncleared"]; ok {
		t.Error("a member the snapshot did not clear got a working set")
	}
	if r := got["gone"]; r.wsErr == nil {
		t.Errorf("a member that is gone: %+v, want an error", r)
	}
}
