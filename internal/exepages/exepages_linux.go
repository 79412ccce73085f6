//go:build linux

package exepages

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release drops this process's mappings of its executable's read-only,
// never-written pages. It reads /proc/self/smaps; a kernel without it
// returns an error and leaves everything as it was. A madvise refused
// part-way returns an error too; the mappings dropped before it stay
// dropped, which is harmless: their pages fault back in when used.
func Release() (Stats, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Stats{}, fmt.Errorf("find the executable: %w", err)
	}
	return release(exe)
}

// release is Release for the mappings of the file at path exe.
func release(exe string) (Stats, error) {
	maps, err := readSmaps()
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	for _, m := range maps {
		if !m.readOnlyOf(exe) {
			continue
		}
		if m.anonymous > 0 {
			st.Skipped++
			continue
		}
		st.ResidentBefore += m.rss
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return st, fmt.Errorf("madvise %x-%x of %s: %w", m.start, m.end, exe, errno)
		}
		st.Mappings++
	}
	if st.Mappings == 0 {
		return st, nil
	}
	maps, err = readSmaps()
	if err != nil {
		return st, err
	}
	for _, m := range maps {
		if m.readOnlyOf(exe) && m.anonymous == 0 {
			st.ResidentAfter += m.rss
		}
	}
	return st, nil
}

func readSmaps() ([]mapping, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	defer f.Close()
	maps, err := parseSmaps(f)
	if err != nil {
		return nil, fmt.Errorf("read the process's mappings: %w", err)
	}
	return maps, nil
}

type mapping struct {
	start, end        uintptr
	writable, private bool
	path              string
	rss, anonymous    uint64 // bytes
}

// readOnlyOf says whether m is a private, read-only mapping of the file at
// path exe; one of them is safe to drop when none of its pages was copied
// on write (anonymous is 0).
func (m mapping) readOnlyOf(exe string) bool {
	return m.path == exe && !m.writable && m.private
}

// parseSmaps reads the mappings of /proc/<pid>/smaps: a header line per
// mapping ("start-end perms offset dev inode path"), then "Key: n kB" lines,
// of which it keeps Rss and Anonymous. An agent's smaps is some hundred
// kilobytes, so lines are looked at as bytes and only headers and the two
// kept keys are split. (prometheus/procfs, which the agent links, parses
// /proc/<pid>/maps and smaps_rollup, but not smaps mapping by mapping.)
func parseSmaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		first, _, _ := bytes.Cut(line, []byte(" "))
		if len(first) == 0 {
			continue
		}
		if first[len(first)-1] != ':' {
			m, err := parseHeader(strings.Fields(string(line)))
			if err != nil {
				return nil, fmt.Errorf("smaps line %q: %w", line, err)
			}
			out = append(out, m)
			continue
		}
		var dst *uint64
		switch {
		case len(out) == 0:
			continue
		case bytes.Equal(first, []byte("Rss:")):
			dst = &out[len(out)-1].rss
		case bytes.Equal(first, []byte("Anonymous:")):
			dst = &out[len(out)-1].anonymous
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) != 3 || !bytes.Equal(f[2], []byte("kB")) {
			return nil, fmt.Errorf("smaps line %q: want \"Key: n kB\"", line)
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("smaps line %q: %w", line, err)
		}
		*dst = kb << 10
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read smaps: %w", err)
	}
	return out, nil
}

func parseHeader(f []string) (mapping, error) {
	if len(f) < 5 {
		return mapping{}, errors.New("too few fields")
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return mapping{}, errors.New("no address range")
	}
	start, err := strconv.ParseUint(lo, 16, 64)
	if err != nil {
		return mapping{}, fmt.Errorf("start address: %w", err)
	}
	end, err := strconv.ParseUint(hi, 16, 64)
	if err != nil {
		return mapping{}, fmt.Errorf("end address: %w", err)
	}
	if end <= start {
		return mapping{}, errors.New("empty address range")
	}
	perms := f[1]
	if len(perms) != 4 {
		return mapping{}, fmt.Errorf("permissions %q", perms)
	}
	m := mapping{start: uintptr(start), end: uintptr(end), writable: perms[1] == 'w', private: perms[3] == 'p'}
	if len(f) >= 6 {
		m.path = strings.Join(f[5:], " ")
	}
	return m, nil
}
