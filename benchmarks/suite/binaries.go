package suite

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Binary is what one program costs before it does anything: its file, the
// part of it that is mapped read-only (code and constants, the pages an
// idle process keeps only as far as it touched them), and the peak RSS of a
// run that only initialises every package and prints its usage.
type Binary struct {
	// Name says what the binary is for in the report.
	Name string
	// File is its base name in the bin directory.
	File string
	// Bytes is its size on disk (not stripped: the image's are).
	Bytes int64
	// Text is the size of its allocated read-only sections, as size(1)
	// counts text.
	Text int64
	// InitPeak is the peak RSS of `File Args`, in bytes: the Go runtime and
	// every linked package's init; 0 when it could not be measured.
	InitPeak int64
	// Args is what InitPeak ran it with.
	Args []string
}

// measureBinaries reports the agent edge nodes run, the CLI that hands over
// to it, and the baseline daemon. A binary that is missing is left out: a
// tree without the narrow agent runs the agent in the CLI.
func measureBinaries(binDir, baseline string) []Binary {
	specs := []Binary{
		{Name: "edgequorum agent (what an edge node runs)", File: "edgequorum-agent", Args: []string{"--help"}},
		{Name: "edgequorum CLI (webhook and tools; runs the agent only without edgequorum-agent beside it)", File: "edgequorum", Args: []string{"--help"}},
		{Name: "baseline: edge-health daemon", File: filepath.Base(baseline), Args: []string{"-h"}},
	}
	var out []Binary
	for _, b := range specs {
		path := filepath.Join(binDir, b.File)
		if b.File == filepath.Base(baseline) {
			path = baseline
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		b.Bytes = fi.Size()
		b.Text, _ = elfText(path)
		b.InitPeak = initPeak(path, b.Args...)
		out = append(out, b)
	}
	return out
}

// elfText sums the sizes of the allocated, read-only sections that occupy
// the file: size(1)'s "text".
func elfText(path string) (int64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	var n int64
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Flags&elf.SHF_WRITE == 0 && s.Type != elf.SHT_NOBITS {
			n += int64(s.Size)
		}
	}
	return n, nil
}

// initPeak runs path with args and returns its peak RSS in bytes (the
// kernel's ru_maxrss), whatever its exit status; 0 if it did not run.
func initPeak(path string, args ...string) int64 {
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	_ = cmd.Run()
	if cmd.ProcessState == nil {
		return 0
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return ru.Maxrss << 10
}

// writeBinaries is the report's table of Report.Binaries.
func writeBinaries(b *strings.Builder, rep *Report) {
	row(b, "binary", "file (MB)", "text (MB)", "peak RSS after init (MiB)")
	rule(b, 4)
	for _, x := range rep.Binaries {
		row(b, fmt.Sprintf("%s: `%s`", x.Name, x.File), fmt.Sprintf("%.1f", float64(x.Bytes)/1e6),
			fmt.Sprintf("%.1f", float64(x.Text)/1e6), mib(float64(x.InitPeak)))
	}
	b.WriteString("\nFiles as the bench runs them (not stripped; the image's are). Text is the allocated read-only part " +
		"(code and constants, size(1)'s text): mapped, and resident only as far as it is touched. " +
		"The peak RSS is the kernel's ru_maxrss of a run that initialises every linked package and prints its usage " +
		"(`--help`, the baseline's `-h`), nothing more: the floor under every member's memory.\n")
}
