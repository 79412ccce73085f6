package raftzone

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSeqAllocatorIncreasesAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seq")
	start := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return start }
	a, err := openSeqAllocator(path, now)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := a.Next()
	if first != uint64(start.UnixMicro()) {
		t.Fatalf("a fresh allocator starts at %d, want the clock %d", first, start.UnixMicro())
	}
	last := first
	for i := 0; i < seqBlock+10; i++ {
		v, err := a.Next()
		if err != nil {
			t.Fatal(err)
		}
		if v <= last {
			t.Fatalf("seq %d after %d", v, last)
		}
		last = v
	}
	// A restart (even a crash mid-block) continues above every seq handed out.
	b, err := openSeqAllocator(path, func() time.Time { return start.Add(-time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Next(); v <= last {
		t.Fatalf("after restart seq %d, last before %d", v, last)
	}
	if err := b.atLeast(last + 5*seqBlock); err != nil {
		t.Fatal(err)
	}
	if v, _ := b.Next(); v != last+5*seqBlock {
		t.Fatalf("atLeast moved to %d", v)
	}
}

func TestSeqAllocatorCorruptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seq")
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := openSeqAllocator(path, time.Now); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want one naming %s", err, path)
	}
}

func TestServerIDPersists(t *testing.T) {
	// On first start the data dir may not exist yet: the server ID is the
	// first thing written into it.
	dir := filepath.Join(t.TempDir(), "data")
	a, err := loadOrCreateServerID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadOrCreateServerID(dir)
	if err != nil || a != b {
		t.Fatalf("second load %q, %v; want %q", b, err, a)
	}
	os.WriteFile(filepath.Join(dir, serverIDFile), []byte("node-1\n"), 0o600)
	if _, err := loadOrCreateServerID(dir); err == nil {
		t.Fatal("accepted a server ID that is not a UUID")
	}
}
