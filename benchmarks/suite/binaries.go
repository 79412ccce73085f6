package suite

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/procstat"
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

// initPeak runs path with args and returns its peak RSS in bytes once every
// package has initialised: the run's VmHWM when it first writes to its
// standard output or error, which is a pipe filled beforehand, so that the
// write blocks until the reading is done. 0 if it could not be measured (it
// did not run, or exited without writing).
//
// Not the kernel's ru_maxrss of the child: Go starts a child with vfork
// semantics, sharing this process's memory until the exec, and Linux keeps
// the larger high-water mark across an exec, so every child's ru_maxrss is
// at least the bench's own.
func initPeak(path string, args ...string) int64 {
	r, w, err := fullPipe()
	if err != nil {
		return 0
	}
	defer r.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close()
	if err != nil {
		return 0
	}
	peak := int64(0)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		blocked, alive := writingOutput(cmd.Process.Pid)
		if !alive {
			break
		}
		if blocked {
			if p, err := procstat.PeakRSS(cmd.Process.Pid); err == nil {
				peak = int64(p)
			}
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, r) }()
	if peak == 0 {
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	return peak
}

// fullPipe returns a pipe whose buffer is full, in blocking mode, so that a
// process given w blocks at its first write until r is read.
func fullPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := syscall.Write(fds[1], chunk); err != nil {
			if err == syscall.EAGAIN {
				break
			}
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			return nil, nil, fmt.Errorf("fill pipe: %w", err)
		}
	}
	// O_NONBLOCK belongs to the open file, which the child shares.
	if err := syscall.SetNonblock(fds[1], false); err != nil {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "init-peak-r"), os.NewFile(uintptr(fds[1]), "init-peak-w"), nil
}

// writingOutput reports whether a thread of pid sits in a write to its
// standard output or error, and whether pid is still there at all.
func writingOutput(pid int) (blocked, alive bool) {
	// An exited child stays in /proc, as a zombie, until it is waited for.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if i := strings.LastIndexByte(string(stat), ')'); err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false, false
	}
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "syscall"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 && f[0] == strconv.Itoa(syscall.SYS_WRITE) && (f[1] == "0x1" || f[1] == "0x2") {
			return true, true
		}
	}
	return false, true
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
		"The peak RSS is the VmHWM of a run that initialises every linked package and prints its usage " +
		"(`--help`, the baseline's `-h`), nothing more: the floor under every member's memory.")
	if rep.BinariesFrom != "" {
		b.WriteString(" From the run of " + rep.BinariesFrom + ", merged with `-render`.")
	}
	b.WriteString("\n")
}
