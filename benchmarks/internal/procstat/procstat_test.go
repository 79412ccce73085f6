package procstat

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	line := "1234 (edge quorum) (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1000 200\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("cpu = %v, want %v", got, want)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Error("short line accepted")
	}
}

func TestParseStatusKB(t *testing.T) {
	status := "Name:\tagent\nVmPeak:\t  900 kB\nVmHWM:\t   40960 kB\nVmRSS:\t 30000 kB\n"
	got, err := parseStatusKB([]byte(status), "VmHWM:")
	if err != nil || got != 40960*1024 {
		t.Errorf("VmHWM = %d, %v", got, err)
	}
	if _, err := parseStatusKB([]byte("Name: x\n"), "VmHWM:"); err == nil {
		t.Error("missing key accepted")
	}
}

func TestParseHostCPU(t *testing.T) {
	got, err := parseHostCPU([]byte("cpu  100 0 100 700 100 0 0 0 50 0\ncpu0 1 2 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != 10*time.Second || got.Busy != 2*time.Second {
		t.Errorf("host cpu = %+v", got)
	}
	if u := Utilisation(HostCPU{}, got); u != 0.2 {
		t.Errorf("utilisation = %v", u)
	}
}

func TestSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := CPU(pid); err != nil {
		t.Error(err)
	}
	if rss, err := PeakRSS(pid); err != nil || rss == 0 {
		t.Errorf("PeakRSS = %d, %v", rss, err)
	}
	if got, err := FindPID(os.Args[0]); err != nil || got != pid {
		t.Errorf("FindPID(own argv0) = %d, %v; want %d", got, err, pid)
	}
	if _, err := FindPID("--no-such-flag-anywhere=1"); err == nil {
		t.Error("FindPID matched nothing real")
	}
}

func TestIndex(t *testing.T) {
	idx, err := Index(os.Args[0][:len(os.Args[0])-1])
	if err != nil {
		t.Fatal(err)
	}
	if idx[os.Args[0]] != os.Getpid() {
		t.Errorf("Index missed this process: %v", idx)
	}
}

func TestParseMem(t *testing.T) {
	status := "VmHWM:\t   40960 kB\nVmRSS:\t 30000 kB\nRssAnon:\t 10000 kB\nRssFile:\t 19000 kB\nRssShmem:\t 1000 kB\n"
	got, err := parseMem([]byte(status))
	want := Mem{Peak: 40960 << 10, RSS: 30000 << 10, Anon: 10000 << 10, File: 19000 << 10, Shmem: 1000 << 10}
	if err != nil || got != want {
		t.Fatalf("parseMem = %+v, %v; want %+v", got, err, want)
	}
	if _, err := parseMem([]byte("VmHWM:\t 1 kB\nVmRSS:\t 1 kB\n")); err == nil || !strings.Contains(err.Error(), "RssAnon") {
		t.Errorf("a status without RssAnon: %v, want an error naming it", err)
	}
}

// The working set counts the pages touched since ClearRefs, not every
// resident page: a buffer resident but untouched is not in it until touched.
//
// The kernel clears referenced bits on its own too (reclaim, compaction and
// page aging on a busy host), so one clear-touch-read cycle may read the
// buffer out after it was touched; the test allows a few cycles. A ClearRefs
// that cleared nothing reads the buffer in before every touch, and a
// WorkingSet that missed it reads it out after every one.
func TestWorkingSetCountsOnlyPagesTouchedSinceClear(t *testing.T) {
	pid := os.Getpid()
	const size = 64 << 20
	buf := make([]byte, size) // no pointers: the GC never reads it
	touch := func() {
		for i := 0; i < len(buf); i += 4096 {
			buf[i]++
		}
	}
	touch()
	m, err := Memory(pid)
	if err != nil {
		t.Fatal(err)
	}
	if m.Anon < size || m.Peak < m.RSS || m.RSS < m.Anon+m.File {
		t.Fatalf("memory %+v: want the %d MiB buffer in Anon, Peak ≥ RSS ≥ Anon+File", m, size>>20)
	}
	var cycles []string
	for range 5 {
		if err := ClearRefs(pid); err != nil {
			t.Fatal(err)
		}
		before, err := WorkingSet(pid)
		if err != nil {
			t.Fatal(err)
		}
		touch()
		after, err := WorkingSet(pid)
		if err != nil {
			t.Fatal(err)
		}
		if before < size && after >= before+size*9/10 {
			runtime.KeepAlive(buf)
			return
		}
		cycles = append(cycles, fmt.Sprintf("%d → %d MiB", before>>20, after>>20))
	}
	t.Fatalf("working set after the clear → after touching the %d MiB buffer, in each cycle: %s; want it out, then in",
		size>>20, strings.Join(cycles, ", "))
}
