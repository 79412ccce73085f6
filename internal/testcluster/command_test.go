package testcluster

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// recordingTB records what a test helper asked of its test; like a real
// test's, its Skipf and Fatalf end the goroutine that calls them, so call the
// helper through run.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Skipf(format string, a ...any) {
	r.skipped = fmt.Sprintf(format, a...)
	runtime.Goexit()
}
func (r *recordingTB) Fatalf(format string, a ...any) {
	r.failed = fmt.Sprintf(format, a...)
	runtime.Goexit()
}

func (r *recordingTB) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

// TestRequireCommand: a program on $PATH is found; a missing one skips the
// test, or fails it when RequireEnv is set, naming how to install it.
func TestRequireCommand(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on $PATH")
	}
	t.Setenv(RequireEnv, "")
	var got string
	r := &recordingTB{TB: t}
	r.run(func(tb testing.TB) { got = RequireCommand(tb, "sh", "apt-get install dash") })
	if got != sh || r.skipped != "" || r.failed != "" {
		t.Errorf("RequireCommand(sh) = %q (skipped %q, failed %q), want %q", got, r.skipped, r.failed, sh)
	}
	const missing = "edgequorum-no-such-program"
	r = &recordingTB{TB: t}
	r.run(func(tb testing.TB) { RequireCommand(tb, missing, "install it so") })
	if r.skipped == "" || r.failed != "" {
		t.Errorf("missing program without %s: skipped %q, failed %q; want a skip", RequireEnv, r.skipped, r.failed)
	}
	t.Setenv(RequireEnv, "1")
	r = &recordingTB{TB: t}
	r.run(func(tb testing.TB) { RequireCommand(tb, missing, "install it so") })
	if r.failed == "" || r.skipped != "" {
		t.Errorf("missing program with %s=1: skipped %q, failed %q; want a failure", RequireEnv, r.skipped, r.failed)
	}
	for _, want := range []string{missing, "install it so", RequireEnv} {
		if !strings.Contains(r.failed, want) {
			t.Errorf("failure %q does not name %q", r.failed, want)
		}
	}
}
