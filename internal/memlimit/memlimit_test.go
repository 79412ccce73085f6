package memlimit

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                int64
		ok                  bool
	}{
		{"v2 limit", "memory.max", "134217728\n", 134217728, true},
		{"v2 unlimited", "memory.max", "max\n", 0, false},
		{"v1 limit", "memory/memory.limit_in_bytes", "268435456\n", 268435456, true},
		{"v1 unlimited", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0, false},
		{"garbage", "memory.max", "lots\n", 0, false},
		{"no cgroup", "", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.file != "" {
				path := filepath.Join(root, tc.file)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := cgroupMemoryLimit(root)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("cgroupMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.DiscardHandler)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("134217728\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	Apply(Auto, root, log)
	cgroupLimit := 128.0 * (1 << 20)
	if got, want := debug.SetMemoryLimit(-1), int64(cgroupLimit*autoMemoryFraction); got != want {
		t.Errorf("auto under a 128Mi cgroup set %d, want %d (90%% of it)", got, want)
	}
	Apply(96<<20, root, log)
	if got := debug.SetMemoryLimit(-1); got != 96<<20 {
		t.Errorf("explicit 96Mi set %d", got)
	}
	debug.SetMemoryLimit(prev)
	Apply(Auto, t.TempDir(), log) // no cgroup limit
	if got := debug.SetMemoryLimit(-1); got != prev {
		t.Errorf("auto without a cgroup limit changed the limit to %d", got)
	}
}

func TestApplyGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOGC", "")
	ApplyGCPercent(50, log)
	if got := debug.SetGCPercent(100); got != 50 {
		t.Errorf("--gc-percent 50 set %d", got)
	}
	// GOGC set in the environment is the operator's choice, which the
	// runtime took at start: the flag must not override it.
	t.Setenv("GOGC", "200")
	ApplyGCPercent(50, log)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, --gc-percent 50 changed the percent to %d", got)
	}
}
