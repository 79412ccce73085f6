package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimitAuto is the --memory-limit that derives the Go soft memory limit
// from the container's memory limit.
const MemoryLimitAuto = -1

// autoMemoryFraction is the share of the cgroup's memory limit the heap may
// approach before the collector works harder: the rest is for the binary's
// mapped text, stacks and the runtime's own memory.
const autoMemoryFraction = 0.9

// applyMemoryLimit sets the Go soft memory limit: GOMEMLIMIT when set, else an
// explicit --memory-limit, else (auto) 90 % of the cgroup's memory limit, else
// none. A fixed limit below a large zone's live heap would make the collector
// run without pause (a leader of 129 members holds ~80 MiB, most of it Raft
// connection buffers), so without a container limit GOGC alone decides.
func applyMemoryLimit(limit int64, cgroupRoot string, log *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit", "source", "GOMEMLIMIT", "value", v)
		return
	}
	source := "--memory-limit"
	if limit == MemoryLimitAuto {
		source = "cgroup"
		limit = 0
		if cg, ok := cgroupMemoryLimit(cgroupRoot); ok {
			limit = int64(float64(cg) * autoMemoryFraction)
		}
	}
	if limit <= 0 {
		log.Info("memory limit", "source", source, "value", "none")
		return
	}
	debug.SetMemoryLimit(limit)
	log.Info("memory limit", "source", source, "bytes", limit)
}

// cgroupMemoryLimit reads this process's memory limit from cgroup v2
// (memory.max) or v1 (memory.limit_in_bytes) under root, normally
// /sys/fs/cgroup. "max" or v1's near-2^63 sentinel mean no limit.
func cgroupMemoryLimit(root string) (int64, bool) {
	for _, f := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v <= 0 || v >= 1<<60 {
			return 0, false
		}
		return v, true
	}
	return 0, false
}
