package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runAgentEnv makes the test binary, started by TestAgentHandsOver, act as
// `edgequorum agent --node-name n1`.
const runAgentEnv = "EDGEQUORUM_TEST_RUN_AGENT"

// TestAgentHandsOver: `edgequorum agent` becomes the narrow binary beside
// it, with the same arguments, by exec (so the DaemonSet's process is the
// narrow one); without it, the agent runs in this binary and its flag
// check still speaks.
func TestAgentHandsOver(t *testing.T) {
	if os.Getenv(runAgentEnv) == "1" {
		os.Exit(run(context.Background(), []string{"agent", "--node-name", "n1"}, os.Stdout, os.Stderr))
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "edgequorum")
	copyFile(t, self, exe, 0o755)
	start := func() (string, error) {
		cmd := exec.Command(exe, "-test.run=^TestAgentHandsOver$")
		cmd.Env = append(os.Environ(), runAgentEnv+"=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// Alone: the agent runs here, and refuses the missing flags.
	out, err := start()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "--advertise-address") {
		t.Fatalf("without the narrow binary: %v\n%s\nwant exit 2 naming --advertise-address", err, out)
	}

	// Beside the narrow binary: exec'd with the same arguments.
	narrow := filepath.Join(dir, narrowAgent)
	if err := os.WriteFile(narrow, []byte("#!/bin/sh\necho \"narrow $0 $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = start()
	if err != nil || strings.TrimSpace(out) != "narrow "+narrow+" --node-name n1" {
		t.Fatalf("beside the narrow binary: %v\n%s\nwant it exec'd with --node-name n1", err, out)
	}

	// A narrow binary that cannot run is no reason not to run the agent.
	if err := os.Chmod(narrow, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := besideExecutable(exe); ok {
		t.Fatal("a file without the exec bit counted as the narrow agent")
	}
	if err := os.Chmod(narrow, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(narrow, []byte("not an executable format\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = start()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "exec "+narrow+" failed") ||
		!strings.Contains(out, "--advertise-address") {
		t.Fatalf("beside a broken narrow binary: %v\n%s\nwant a warning, then the agent's own flag check", err, out)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
