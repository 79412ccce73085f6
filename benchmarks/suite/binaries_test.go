package suite

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestMeasureBinaries measures the test binary as if it were the agent: a
// real file, real ELF sections, a real run's peak RSS; the binaries that
// are not there are left out.
func TestMeasureBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "edgequorum-agent")); err != nil {
		t.Fatal(err)
	}
	bins := measureBinaries(dir, filepath.Join(dir, "edgehealth-baseline"))
	if len(bins) != 1 || bins[0].File != "edgequorum-agent" {
		t.Fatalf("measured %+v, want the agent alone (the CLI and the baseline are missing)", bins)
	}
	b := bins[0]
	fi, err := os.Stat(self)
	if err != nil {
		t.Fatal(err)
	}
	if b.Bytes != fi.Size() || b.Text <= 0 || b.Text >= b.Bytes {
		t.Fatalf("file %d bytes, text %d; want the file's size %d and a text part of it", b.Bytes, b.Text, fi.Size())
	}
	// `--help` makes a test binary print its flags and exit: it ran, so it
	// was resident at least a megabyte.
	if b.InitPeak < 1<<20 {
		t.Fatalf("peak RSS after init %d bytes, want a measured run", b.InitPeak)
	}
	var out strings.Builder
	writeBinaries(&out, &Report{Binaries: bins})
	if !strings.Contains(out.String(), "`edgequorum-agent`") || strings.Contains(out.String(), "| — |") {
		t.Fatalf("table:\n%s\nwant the agent's row with every figure", out.String())
	}
}

func TestInitPeakOfMissingBinary(t *testing.T) {
	if got := initPeak(filepath.Join(t.TempDir(), "nope")); got != 0 {
		t.Fatalf("initPeak of a missing file = %d, want 0", got)
	}
}

// TestInitPeakIsTheChildsOwn: a child's peak is measured in its own image,
// not inherited from this process: with 96 MiB touched here, the test
// binary's `--help` must still show far less. (A child's ru_maxrss would
// not: Linux carries the high-water mark of the memory a vfork child shares
// with its parent across the exec.)
func TestInitPeakIsTheChildsOwn(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ballast := make([]byte, 96<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	got := initPeak(self, "-test.run=^$", "-h")
	runtime.KeepAlive(ballast)
	if got < 1<<20 || got >= 64<<20 {
		t.Fatalf("init peak of the test binary %d MiB with 96 MiB resident in its parent; want its own (1–64 MiB)", got>>20)
	}
}

// TestInitPeakOfSilentProgram: a program that exits without writing was
// never caught after its init, so it is not measured rather than misread.
func TestInitPeakOfSilentProgram(t *testing.T) {
	if got := initPeak("/bin/true"); got != 0 {
		t.Fatalf("initPeak of a silent program = %d, want 0", got)
	}
}
