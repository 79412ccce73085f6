// Package procstat reads what the kernel knows about a process — CPU time,
// resident memory and its working set — and the host's CPU counters, from
// /proc. The suite
// measures every agent this way, edgequorum's and the baseline's alike, so
// neither side's own metrics are trusted for its cost.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clockTick = 100

// ErrNotFound means no live process matched.
var ErrNotFound = errors.New("no matching process")

// CPU returns the user+system CPU time pid has used.
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15). The command name
// (field 2) may hold spaces and parentheses, so fields are counted from its
// closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc stat: %d fields after the name", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc stat: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTick, nil
}

// PeakRSS returns VmHWM, the most resident memory pid has had, in bytes.
func PeakRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	return parseStatusKB(b, "VmHWM:")
}

// FileRSS returns RssFile, the resident pages pid maps from files — for an
// agent its own binary's code and data. They count in RSS but are shared
// and clean: the kernel drops them under pressure and reads them back.
// Telling them from the process's own memory (RssAnon) says where a large
// RSS comes from.
func FileRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	return parseStatusKB(b, "RssFile:")
}

// Mem is a process's resident memory at one moment, in bytes.
type Mem struct {
	// Peak is VmHWM, the most resident memory the process has had.
	Peak uint64
	// RSS is resident now: Anon (heap, stacks: the process's own) plus
	// File (mapped files, for an agent its binary: shared and clean, the
	// kernel drops and rereads them under pressure) plus Shmem.
	RSS, Anon, File, Shmem uint64
}

// Memory reads pid's resident memory from /proc/PID/status. The kernel keeps
// only the total's peak; a caller that wants the peaks of Anon and File
// samples them.
func Memory(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, fmt.Errorf("read status of %d: %w", pid, err)
	}
	return parseMem(b)
}

func parseMem(b []byte) (Mem, error) {
	var m Mem
	var errs []error
	for _, f := range []struct {
		key string
		v   *uint64
	}{{"VmHWM:", &m.Peak}, {"VmRSS:", &m.RSS}, {"RssAnon:", &m.Anon}, {"RssFile:", &m.File}, {"RssShmem:", &m.Shmem}} {
		v, err := parseStatusKB(b, f.key)
		*f.v = v
		errs = append(errs, err)
	}
	return m, errors.Join(errs...)
}

// ClearRefs clears the referenced bits of every page of pid (clear_refs 1):
// the start of a working-set measurement, which WorkingSet ends. Needs the
// process's owner or root.
func ClearRefs(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("1"), 0); err != nil {
		return fmt.Errorf("clear referenced bits of %d: %w", pid, err)
	}
	return nil
}

// WorkingSet is the bytes of pid's pages touched since ClearRefs
// (smaps_rollup's Referenced): what the process needs resident over that
// window, against RSS, which also counts what it touched once.
func WorkingSet(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("read smaps_rollup of %d: %w", pid, err)
	}
	return parseStatusKB(b, "Referenced:")
}

func parseStatusKB(b []byte, key string) (uint64, error) {
	for line := range strings.Lines(string(b)) {
		rest, ok := strings.CutPrefix(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed %s line %q", key, line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s line: %w", key, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", key)
}

// FindPID returns the live process whose command line holds every one of
// args as a whole argument. Agents are started by packages that do not hand
// out their PIDs; their flags (a per-node status address) identify them.
func FindPID(args ...string) (int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		if matchArgs(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), args) {
			pid, err := strconv.Atoi(filepath.Base(d))
			if err == nil && alive(pid) {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrNotFound, args)
}

func matchArgs(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// alive rejects zombies, whose cmdline is empty anyway on most kernels.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

// HostCPU is the machine's aggregate CPU counters from /proc/stat.
type HostCPU struct {
	Busy, Total time.Duration
}

// ReadHostCPU reads /proc/stat's first line.
func ReadHostCPU() (HostCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return HostCPU{}, fmt.Errorf("read /proc/stat: %w", err)
	}
	return parseHostCPU(b)
}

func parseHostCPU(b []byte) (HostCPU, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return HostCPU{}, errors.New("malformed /proc/stat")
	}
	var total, idle uint64
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return HostCPU{}, fmt.Errorf("malformed /proc/stat: %w", err)
		}
		// guest and guest_nice are already inside user and nice.
		if i >= 8 {
			break
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return HostCPU{Busy: ticks(total - idle), Total: ticks(total)}, nil
}

func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / clockTick }

// Utilisation is the busy share of the machine between two readings, 0..1.
func Utilisation(before, after HostCPU) float64 {
	total := after.Total - before.Total
	if total <= 0 {
		return 0
	}
	return float64(after.Busy-before.Busy) / float64(total)
}

// Index maps every command-line argument that starts with prefix to the PID
// of the live process that carries it, in one pass over /proc: the suite
// samples a hundred agents at once and identifies each by a per-node flag.
func Index(prefix string) (map[string]int, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		for _, a := range strings.Split(strings.TrimRight(string(b), "\x00"), "\x00") {
			if strings.HasPrefix(a, prefix) && alive(pid) {
				out[a] = pid
			}
		}
	}
	return out, nil
}
