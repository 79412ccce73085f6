package suite

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKeepAgentLogs: the live phase's agent logs, which live with the agents'
// state and go with it, are copied out by agent name.
func TestKeepAgentLogs(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "live9-agents")
	for _, name := range []string{"l9-1", "l9-2"} {
		if err := os.MkdirAll(filepath.Join(dir, name, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, "agent.log"), []byte("log of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	keepAgentLogs(dir, out)
	for _, name := range []string{"l9-1", "l9-2"} {
		b, err := os.ReadFile(filepath.Join(out, name+".log"))
		if err != nil || string(b) != "log of "+name {
			t.Fatalf("%s: %q, %v", name, b, err)
		}
	}
}
