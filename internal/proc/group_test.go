package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Stop must take down what a component forked, not just the component.
func TestGroupStopKillsTheGroup(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sh.log")
	// The shell ignores SIGTERM and its child sleeps in the background, so
	// only the SIGKILL escalation to the whole group ends both.
	p, err := StartGroup("sh", "/bin/sh", []string{"-c", "trap '' TERM; sleep 600 & wait"}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.killGroup) // in case the test fails before stop
	// The background sleep shows up in /proc a moment after the fork.
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive, err := LiveGroupMembers(p.Pid())
		if err == nil && len(alive) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("LiveGroupMembers = %v, %v; want the shell and its sleep", alive, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if alive, err := LiveGroupMembers(p.Pid()); err != nil || len(alive) > 0 {
		t.Fatalf("process group %d survived stop: members %v, %v", p.Pid(), alive, err)
	}
}

func TestGroupStopReportsEarlyExit(t *testing.T) {
	p, err := StartGroup("false", "/bin/false", nil, nil, filepath.Join(t.TempDir(), "false.log"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if err := p.Stop(time.Second); err == nil {
		t.Fatal("stop of a crashed process returned nil")
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(path, []byte("1\n2\n3\n4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := TailFile(path, 2); got != "3\n4" {
		t.Fatalf("TailFile = %q, want %q", got, "3\n4")
	}
	if got := TailFile(filepath.Join(t.TempDir(), "missing"), 2); !strings.Contains(got, "cannot read") {
		t.Fatalf("TailFile of a missing file = %q", got)
	}
}
