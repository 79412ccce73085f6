// Package memlimit sets how much memory the Go runtime of a process running in
// a container lets its heap take: the soft memory limit (from GOMEMLIMIT, a
// flag, or the container's own memory limit) and the collector's growth
// percent (from GOGC or a flag). It owns those two decisions and reads nothing
// but the environment and the cgroup files; it must not depend on anything of
// edgequorum's, so that the agent and the webhook share it.
package memlimit

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Auto is the --memory-limit that derives the Go soft memory limit from the
// container's memory limit.
const Auto = -1

// autoMemoryFraction is the share of the cgroup's memory limit the heap may
// approach before the collector works harder: the rest is for the binary's
// mapped text, stacks and the runtime's own memory.
const autoMemoryFraction = 0.9

// Apply sets the Go soft memory limit: GOMEMLIMIT when set, else an explicit
// --memory-limit, else (Auto) 90 % of the cgroup's memory limit (cgroupRoot,
// normally /sys/fs/cgroup), else none. Near the container's limit the
// collector then works harder instead of letting the kernel kill the
// process. A fixed limit below a process's live heap would make the collector
// run without pause (a leader of 129 members holds ~80 MiB, a webhook over
// 30,000 nodes about 1 GiB), so without a container limit GOGC alone decides.
func Apply(limit int64, cgroupRoot string, log *slog.Logger) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory limit", "source", "GOMEMLIMIT", "value", v)
		return
	}
	source := "--memory-limit"
	if limit == Auto {
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

// ApplyGCPercent sets how far the heap may grow over its live part before the
// next collection: GOGC when set, else percent. The runtime's 100 doubles
// the live heap, and for a process whose heap is mostly long-lived
// connection state (an agent at 129 members) that doubling is a third of its
// resident memory; a lower percent collects more often over the same small
// live heap.
func ApplyGCPercent(percent int, log *slog.Logger) {
	if v := os.Getenv("GOGC"); v != "" {
		log.Info("collector growth", "source", "GOGC", "value", v)
		return
	}
	debug.SetGCPercent(percent)
	log.Info("collector growth", "source", "--gc-percent", "percent", percent)
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
