package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
)

func TestStartStopKill(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "sub", "out.log")
	p, err := Start("/bin/sh", []string{"-c", "echo hello; trap 'echo bye; exit 0' TERM; while :; do sleep 0.1; done"}, log)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child never wrote to its log: %q", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !p.Running() {
		t.Fatal("child not running")
	}
	p.Stop(10 * time.Second)
	if p.Running() {
		t.Fatal("child still running after Stop")
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "bye") {
		t.Fatalf("child did not get SIGTERM: %q", b)
	}

	q, err := Start("/bin/sh", []string{"-c", "trap '' TERM; while :; do sleep 0.1; done"}, log)
	if err != nil {
		t.Fatal(err)
	}
	q.Stop(200 * time.Millisecond) // ignores TERM: killed after the grace
	if q.Running() {
		t.Fatal("child survived Stop")
	}
	if _, err := Start(filepath.Join(dir, "missing"), nil, log); err == nil {
		t.Fatal("started a missing binary")
	}
}

// TestStartEnvSetsTheChildsEnvironment checks that StartEnv gives the child
// the environment asked for, and Start this process's.
func TestStartEnvSetsTheChildsEnvironment(t *testing.T) {
	t.Setenv("PROC_TEST_INHERITED", "inherited")
	dir := t.TempDir()
	read := func(log string) string {
		var out string
		poll.Until(t, 10*time.Second, "the child to finish", func() (bool, string) {
			b, _ := os.ReadFile(log)
			out = string(b)
			return strings.Contains(out, "finished"), out // not in the logged command line
		})
		return out
	}
	script := []string{"-c", `echo "given=$PROC_TEST_GIVEN inherited=$PROC_TEST_INHERITED"; echo fin""ished`}
	given := filepath.Join(dir, "given.log")
	if _, err := StartEnv("/bin/sh", script, []string{"PROC_TEST_GIVEN=given"}, given); err != nil {
		t.Fatal(err)
	}
	if out := read(given); !strings.Contains(out, "given=given inherited=\n") {
		t.Errorf("StartEnv with an environment: child saw %q, want only PROC_TEST_GIVEN", out)
	}
	inherited := filepath.Join(dir, "inherited.log")
	if _, err := Start("/bin/sh", script, inherited); err != nil {
		t.Fatal(err)
	}
	if out := read(inherited); !strings.Contains(out, "given= inherited=inherited\n") {
		t.Errorf("Start: child saw %q, want this process's environment", out)
	}
}
