package poll

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records Fatalf and then, like testing.T, ends the goroutine that
// called it. Only Helper and Fatalf are implemented; anything else panics on
// the nil embedded interface.
type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fake TB on a goroutine of its own, so that Fatalf's
// Goexit ends that goroutine and not the test, and reports whether fn ran to
// its end.
func run(fn func(t testing.TB)) (f *fakeTB, returned bool) {
	f = &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
		returned = true
	}()
	<-done
	return f, returned
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls int
	var took time.Duration
	f, returned := run(func(tb testing.TB) {
		took = Until(tb, 10*time.Second, "third call", func() (bool, string) {
			calls++
			return calls == 3, fmt.Sprintf("call %d", calls)
		})
	})
	if f.failed || !returned {
		t.Fatalf("Until failed (%q) or did not return", f.msg)
	}
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
	// Two sleeps of the first intervals passed before the third call.
	if took < firstInterval || took > 10*time.Second {
		t.Errorf("Until returned %s", took)
	}
}

func TestUntilChecksBeforeSleeping(t *testing.T) {
	var calls int
	f, returned := run(func(tb testing.TB) {
		UntilTrue(tb, 0, "already true", func() bool { calls++; return true })
	})
	if f.failed || !returned || calls != 1 {
		t.Fatalf("failed %v (%q), returned %v, %d calls; want one call and success", f.failed, f.msg, returned, calls)
	}
}

func TestUntilFailsAfterTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	var calls atomic.Int32
	start := time.Now()
	f, returned := run(func(tb testing.TB) {
		Until(tb, timeout, "the impossible", func() (bool, string) {
			return false, fmt.Sprintf("attempt %d", calls.Add(1))
		})
	})
	elapsed := time.Since(start)
	if !f.failed || returned {
		t.Fatalf("failed %v, returned %v; want Fatalf and no return", f.failed, returned)
	}
	if elapsed < timeout {
		t.Errorf("gave up after %s, before the %s timeout", elapsed, timeout)
	}
	n := calls.Load()
	for _, want := range []string{"the impossible", timeout.String(), fmt.Sprintf("last: attempt %d", n)} {
		if !strings.Contains(f.msg, want) {
			t.Errorf("Fatalf message %q does not contain %q", f.msg, want)
		}
	}
	// The interval grows to maxInterval: 300 ms take about ten checks, not
	// hundreds.
	if n < 2 || n > 30 {
		t.Errorf("cond called %d times in %s", n, timeout)
	}
}

func TestUntilTrueFailsWithoutDetail(t *testing.T) {
	f, returned := run(func(tb testing.TB) {
		UntilTrue(tb, 10*time.Millisecond, "never", func() bool { return false })
	})
	if !f.failed || returned {
		t.Fatalf("failed %v, returned %v; want Fatalf and no return", f.failed, returned)
	}
	if want := "timed out after 10ms waiting for never"; f.msg != want {
		t.Errorf("Fatalf message %q, want %q", f.msg, want)
	}
}
