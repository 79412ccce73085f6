//go:build linux

package exepages

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Release drops this process's mappings of its executable's read-only,
// never-written pages. It reads /proc/self/smaps; a kernel without it
// returns an error and leaves everything as it was.
func Release() (Stats, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return Stats{}, fmt.Errorf("find the executable: %w", err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return Stats{}, fmt.Errorf("read the process's mappings: %w", err)
	}
	maps, err := parseSmaps(smaps)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	for _, m := range maps {
		if m.path != exe || m.writable || !m.private {
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
	after, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return st, fmt.Errorf("read the process's mappings: %w", err)
	}
	maps, err = parseSmaps(after)
	if err != nil {
		return st, err
	}
	for _, m := range maps {
		if m.path == exe && !m.writable && m.private && m.anonymous == 0 {
			st.ResidentAfter += m.rss
		}
	}
	return st, nil
}

type mapping struct {
	start, end        uintptr
	writable, private bool
	path              string
	rss, anonymous    uint64 // bytes
}

// parseSmaps reads the mappings of /proc/<pid>/smaps: a header line per
// mapping ("start-end perms offset dev inode path"), then "Key: n kB" lines.
func parseSmaps(b []byte) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") && strings.Contains(f[0], "-") {
			m, err := parseHeader(f)
			if err != nil {
				return nil, fmt.Errorf("smaps line %q: %w", line, err)
			}
			out = append(out, m)
			continue
		}
		if len(out) == 0 || len(f) != 3 || f[2] != "kB" {
			continue
		}
		var dst *uint64
		switch f[0] {
		case "Rss:":
			dst = &out[len(out)-1].rss
		case "Anonymous:":
			dst = &out[len(out)-1].anonymous
		default:
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
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
