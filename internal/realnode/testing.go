package realnode

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// logTailLines is how much of each node log StartT prints when a test failed.
const logTailLines = 60

// Require skips t unless it runs in the node namespace with every node binary
// present; with testcluster.RequireEnv set, it fails t instead, so CI cannot
// skip the real-node tests by accident.
func Require(t testing.TB) {
	t.Helper()
	if !InNamespace() || testcluster.UnitRun() {
		skipOrFail(t, "needs the node namespace: "+unavailable)
		return
	}
	opts := Options{CNIBinDir: DefaultCNIBinDir}
	if _, _, err := findBinaries(opts); err != nil {
		skipOrFail(t, err.Error())
	}
}

func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if testcluster.UnitRun() {
		t.Skipf("skipping: %s, and %s is set", why, testcluster.UnitEnv)
	}
	v := os.Getenv(testcluster.RequireEnv)
	if b, err := strconv.ParseBool(v); v != "" && (err != nil || b) {
		t.Fatalf("%s; %s is set, so the real node is required", why, testcluster.RequireEnv)
	}
	t.Skipf("skipping: %s (set %s=1 to make this a failure)", why, testcluster.RequireEnv)
}

// StartT starts a node for t on cluster (skipping like Require), keeps its
// directory in t.TempDir unless opts.Dir is set, and stops it when t ends,
// printing the tail of every node log first if t failed. Register it after
// testcluster.StartT so that it stops before the cluster does.
func StartT(t testing.TB, cluster *testcluster.Cluster, opts Options) *Node {
	t.Helper()
	Require(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	n, err := Start(context.Background(), cluster, opts)
	if err != nil {
		if errors.Is(err, ErrBinariesMissing) {
			skipOrFail(t, err.Error())
		}
		t.Fatalf("starting the real node: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for name, tail := range n.LogTails(logTailLines) {
				t.Logf("---- last %d lines of node log %s ----\n%s", logTailLines, name, tail)
			}
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stopping the real node: %v", err)
		}
	})
	return n
}
