package realnode

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cgroupHierarchies returns the mount points of every cgroup hierarchy (v1
// controllers, named hierarchies and a v2 "unified" mount), read from
// /proc/self/mountinfo.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	defer f.Close()
	var dirs []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ... mountpoint ... - fstype source options
		fields := strings.Fields(s.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if t := fields[sep+1]; t == "cgroup" || t == "cgroup2" {
			dirs = append(dirs, unescapeMountinfo(fields[4]))
		}
	}
	return dirs, s.Err()
}

// createCgroupRoot makes the kubelet's --cgroup-root in every cgroup
// hierarchy: the kubelet insists that it exists. A new cpuset cgroup starts
// with no CPUs and no memory nodes, so it inherits its parent's.
func createCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		// Also in a hybrid host's cgroup2 "unified" mount, which runc's
		// cgroupfs manager joins as well.
		dir := filepath.Join(h, root)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("reading %s: %w", f, err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("initialising %s/%s: %w", dir, f, err)
			}
		}
	}
	return nil
}

// cgroupProcs lists every process in root's subtree in any hierarchy.
func cgroupProcs(root string) []int {
	hs, _ := cgroupHierarchies()
	seen := map[int]bool{}
	var pids []int
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, line := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(line); err == nil && !seen[pid] {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroupRoot removes root's subtree in every hierarchy, deepest first.
// The caller has killed its processes; a cgroup whose last task is still
// exiting refuses rmdir with EBUSY for a moment, which waitGone's caller
// absorbs by retrying.
func removeCgroupRoot(root string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	defer f.Close()
	var mps []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mps = append(mps, mp)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("listing mounts: %w", err)
	}
	sort.SliceStable(mps, func(i, j int) bool { return len(mps[i]) > len(mps[j]) })
	return mps, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
