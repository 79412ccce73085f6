package testcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// RequireEnv, when set to a true value (1, true), turns a missing control plane
// from a skip into a failure. CI sets it after `make controlplane`, so the
// control-plane tests can never be skipped there by accident.
const RequireEnv = "EDGEQUORUM_REQUIRE_CONTROLPLANE"

// UnitEnv, when set to a true value, skips every test that needs the control
// plane, a real node or root, whatever bin/ holds: `make unit` sets it, for
// the tests a developer runs every few minutes. It wins over RequireEnv.
const UnitEnv = "EDGEQUORUM_UNIT"

// UnitRun reports whether UnitEnv asks for the unit tests alone.
func UnitRun() bool {
	b, err := strconv.ParseBool(os.Getenv(UnitEnv))
	return err == nil && b
}

// logTailLines is how much of each component log StartT prints on failure:
// enough for the last few minutes of a component's story, little enough that
// the test output stays readable.
const logTailLines = 80

// RequireBinaries skips the test when the control-plane binaries are missing,
// or fails it if RequireEnv is set.
func RequireBinaries(t testing.TB) {
	t.Helper()
	if UnitRun() {
		t.Skipf("skipping: needs the control plane, and %s is set", UnitEnv)
	}
	dir, err := FindBinDir()
	if err == nil {
		err = CheckBinaries(dir)
	}
	if err == nil {
		return
	}
	if required() {
		t.Fatalf("%v; %s is set, so the control plane is required", err, RequireEnv)
	}
	t.Skipf("skipping: needs the control plane: %v (set %s=1 to make this a failure)", err, RequireEnv)
}

// RequireTool returns the path of name (a file, or a path below the bin
// directory) in the bin directory FindBinDir finds, which `make target`
// puts there. When it is missing the test is skipped, or fails if RequireEnv
// is set, as RequireBinaries does for the control plane: tools that need
// neither the control plane nor root (promtool, the Prometheus Operator's
// CRDs) still run in EDGEQUORUM_UNIT runs if they are there.
func RequireTool(t testing.TB, name, target string) string {
	t.Helper()
	dir, err := FindBinDir()
	if err == nil {
		p := filepath.Join(dir, name)
		if _, err = os.Stat(p); err == nil {
			return p
		}
	}
	if required() {
		t.Fatalf("%v (run `make %s`); %s is set, so it is required", err, target, RequireEnv)
	}
	t.Skipf("skipping: %v (run `make %s`; set %s=1 to make this a failure)", err, target, RequireEnv)
	return ""
}

func required() bool {
	v := os.Getenv(RequireEnv)
	b, err := strconv.ParseBool(v)
	return v != "" && (err != nil || b)
}

// StartT starts a cluster for t (skipping like RequireBinaries when the
// binaries are missing), keeps its directory in t.TempDir unless opts.Dir is
// set, and stops it when t ends. If t failed, the tail of every component log
// goes into the test output first.
func StartT(t testing.TB, opts Options) *Cluster {
	t.Helper()
	RequireBinaries(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	// Not t.Context(): that is cancelled before cleanups run, and Start's ctx
	// only bounds start-up anyway.
	c, err := Start(context.Background(), opts)
	if err != nil {
		if errors.Is(err, ErrBinariesMissing) && !required() {
			t.Skipf("skipping: %v", err)
		}
		t.Fatalf("starting control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping control plane: %v", err)
		}
	})
	return c
}

func (c *Cluster) dumpLogs(t testing.TB) {
	t.Helper()
	tails := c.LogTails(logTailLines)
	for _, name := range sortedKeys(tails) {
		t.Logf("---- last %d lines of %s ----\n%s", logTailLines, name, tails[name])
	}
}
