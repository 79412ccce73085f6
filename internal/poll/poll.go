// Package poll is the one "wait until a condition holds" helper of the test
// suites.
//
// Tests never sleep for timing: a fixed sleep is either too short on a loaded
// machine, which makes the test flaky, or too long everywhere else, which
// makes it slow. Instead a test polls the condition it actually waits for,
// with a deadline that is generous because it only matters when the test is
// failing. The polling interval paces the checks, never the behaviour under
// test.
package poll

import (
	"testing"
	"time"
)

// The interval between checks starts at firstInterval, so that a condition
// that holds almost at once costs almost nothing, and doubles up to
// maxInterval, so that a long wait (a real apiserver, a Raft election) does
// not spin.
const (
	firstInterval = time.Millisecond
	maxInterval   = 100 * time.Millisecond
)

// Until calls cond until it returns true and returns how long that took. cond
// is always called at least once, and once more after the deadline has
// passed. If timeout passes first, Until fails the test with t.Fatalf, naming
// what it waited for, the timeout, and the detail cond returned last (which
// should say why the condition does not hold yet).
//
// As with any t.Fatalf, Until must be called from the goroutine running the
// test, and cond may itself call t.Fatalf to stop the test early.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	interval := firstInterval
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			if detail == "" {
				t.Fatalf("timed out after %s waiting for %s", timeout, what)
			} else {
				t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, detail)
			}
			return time.Since(start) // only reached with a t whose Fatalf returns
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
}

// UntilTrue is Until for a condition that has no detail to report.
func UntilTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return Until(t, timeout, what, func() (bool, string) { return cond(), "" })
}
