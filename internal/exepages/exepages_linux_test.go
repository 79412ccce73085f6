//go:build linux

package exepages

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// written is in the binary's writable data: Release must leave it as set.
var written = []string{"before"}

func TestReleaseDropsExecutablePagesAndKeepsData(t *testing.T) {
	written[0] = "set at run time"
	// No collection between the drop and its measure: its code would fault
	// back in beside Release's own.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// Map every page of the binary's read-only mappings first (reading
	// /proc/self/mem faults them into this process), as a start-up that ran
	// code all over it would.
	mapped := mapWholeExecutable(t)
	st, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v, %d kB mapped", st, mapped>>10)
	if st.Mappings == 0 || st.ResidentBefore < mapped*9/10 {
		t.Fatalf("Release = %+v: want the test binary's %d kB of text and read-only data dropped", st, mapped>>10)
	}
	// What runs between the drop and the second read of smaps faults back
	// in, 64 KiB around each fault: 1.2 of this test binary's 2.8 MiB, and
	// 1.5-2.4 of 3.7 MiB built with -race. The rest is gone.
	if st.ResidentAfter > st.ResidentBefore*3/4 {
		t.Errorf("resident %d kB before, %d kB after: want a quarter of it gone at least", st.ResidentBefore>>10, st.ResidentAfter>>10)
	}
	// The code and data run on as before: the pages fault back in.
	runtime.GC()
	if written[0] != "set at run time" || !strings.HasPrefix(strings.ToUpper("abc"), "AB") {
		t.Errorf("after Release: written = %q", written)
	}
}

// mapWholeExecutable reads every page of the executable's read-only
// mappings and returns their size.
func mapWholeExecutable(t *testing.T) uint64 {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := readSmaps()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var size uint64
	page := make([]byte, 1)
	for _, m := range maps {
		if m.path != exe || m.writable {
			continue
		}
		for a := m.start; a < m.end; a += 4096 {
			if _, err := mem.ReadAt(page, int64(a)); err != nil {
				t.Fatalf("read %x of %s: %v", a, exe, err)
			}
		}
		size += uint64(m.end - m.start)
	}
	return size
}

func TestParseSmaps(t *testing.T) {
	smaps := `00400000-00c00000 r-xp 00000000 fd:01 123 /usr/bin/edge agent
Size:               8192 kB
Rss:                6000 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00c00000-01400000 r--p 00800000 fd:01 123 /usr/bin/edge agent
Rss:                2000 kB
Anonymous:             8 kB
01400000-01500000 rw-p 01000000 fd:01 123 /usr/bin/edge agent
Rss:                  64 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Rss:                1024 kB
Anonymous:          1024 kB
7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   8 kB
`
	got, err := parseSmaps(strings.NewReader(smaps))
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{
		{start: 0x400000, end: 0xc00000, private: true, path: "/usr/bin/edge agent", rss: 6000 << 10},
		{start: 0xc00000, end: 0x1400000, private: true, path: "/usr/bin/edge agent", rss: 2000 << 10, anonymous: 8 << 10},
		{start: 0x1400000, end: 0x1500000, writable: true, private: true, path: "/usr/bin/edge agent", rss: 64 << 10},
		{start: 0x7f0000000000, end: 0x7f0000100000, writable: true, private: true, rss: 1024 << 10, anonymous: 1024 << 10},
		{start: 0x7ffd00000000, end: 0x7ffd00002000, private: true, path: "[vdso]", rss: 8 << 10},
	}
	if len(got) != len(want) {
		t.Fatalf("parsed %d mappings, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d = %+v, want %+v", i, got[i], want[i])
		}
	}

	for _, bad := range []string{
		"00c00000-00400000 r--p 0 fd:01 1 /x\n", // empty range
		"zz-00400000 r--p 0 fd:01 1 /x\n",
		"00400000-00c00000 r-x 0 fd:01 1 /x\n",
		"00400000-00c00000 r-xp 0 fd:01 1 /x\nRss: many kB\n",
	} {
		if _, err := parseSmaps(strings.NewReader(bad)); err == nil {
			t.Errorf("parseSmaps(%q) accepted", bad)
		}
	}
}

// A read-only mapping with a page written before it was made read-only (as
// a position-independent binary's relocated data is) keeps its pages: only
// a clean one is dropped.
func TestReleaseLeavesWrittenMappings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "image")
	if err := os.WriteFile(path, bytes.Repeat([]byte{'f'}, 4*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	clean, err := unix.Mmap(int(f.Fd()), 0, 4*4096, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(clean)
	f2, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	written, err := unix.Mmap(int(f2.Fd()), 0, 4*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(written)
	var sum byte
	for i := 0; i < len(clean); i += 4096 {
		sum += clean[i] // map every page of the clean one
	}
	written[0] = 'w' // copied on write: this process's page now
	if err := unix.Mprotect(written, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}

	st, err := release(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mappings != 1 || st.Skipped != 1 || st.ResidentBefore != 4*4096 || st.ResidentAfter != 0 {
		t.Errorf("release = %+v (sum %d): want the clean mapping's 4 pages dropped and the written one skipped", st, sum)
	}
	if written[0] != 'w' {
		t.Errorf("the written page reads %q after release, want the 'w' written to it", written[0])
	}
}
