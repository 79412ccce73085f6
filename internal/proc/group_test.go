package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Stop must take down what a component forked, not just the component.
func TestProcessStopKillsTheGroup(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	// The shell ignores SIGTERM and its child sleeps in the background, so
	// only the SIGKILL escalation to the whole group ends both.
	p, err := startProcess("sh", "/bin/sh", []string{"-c", "trap '' TERM; sleep 600 & wait"}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.killGroup) // in case the test fails before stop
	// The background sleep shows up in /proc a moment after the fork.
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive, err := liveGroupMembers(p.pid())
		if err == nil && len(alive) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("liveGroupMembers = %v, %v; want the shell and its sleep", alive, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.stop(200 * time.Millisecond); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if alive, err := liveGroupMembers(p.pid()); err != nil || len(alive) > 0 {
		t.Fatalf("process group %d survived stop: members %v, %v", p.pid(), alive, err)
	}
}

func TestProcessStopReportsEarlyExit(t *testing.T) {
	p, err := startProcess("false", "/bin/false", nil, filepath.Join(t.TempDir(), "false.log"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if err := p.stop(time.Second); err == nil {
		t.Fatal("stop of a crashed process returned nil")
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := tailFile(path, 2); got != "3\n4" {
		t.Fatalf("tailFile = %q, want %q", got, "3\n4")
	}
	if got := tailFile(filepath.Join(t.TempDir(), "missing"), 2); !strings.Contains(got, "cannot read") {
		t.Fatalf("tailFile of a missing file = %q", got)
	}
}
