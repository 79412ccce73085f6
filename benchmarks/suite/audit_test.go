package suite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func auditLine(user string, at time.Time) string {
	return fmt.Sprintf(`{"stage":"ResponseComplete","verb":"patch","user":{"username":%q},"objectRef":{"resource":"nodes"},"responseStatus":{"code":200},"requestReceivedTimestamp":%q}`+"\n",
		user, at.Format(time.RFC3339Nano))
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// TestAuditLogFollowsAppends reads what the apiserver appended since the last
// poll, keeps a line it has not finished for the next, and refuses to read a
// file that shrank (the old offset would land mid-line) with an error that
// says so, instead of decoding garbage.
func TestAuditLogFollowsAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a := &auditLog{path: path}
	if err := a.poll(); err != nil {
		t.Fatalf("poll before the apiserver wrote: %v", err)
	}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	appendFile(t, path, auditLine("agent", t0)+auditLine("baseline", t0.Add(time.Second)))
	if err := a.poll(); err != nil {
		t.Fatal(err)
	}
	second := auditLine("agent", t0.Add(2*time.Second))
	appendFile(t, path, second[:20])
	if err := a.poll(); err != nil {
		t.Fatalf("poll with half a line written: %v", err)
	}
	appendFile(t, path, second[20:])
	if err := a.poll(); err != nil {
		t.Fatal(err)
	}
	if got := len(a.writes("agent", t0, t0.Add(time.Minute))); got != 2 {
		t.Fatalf("agent writes = %d, want 2", got)
	}
	if got := len(a.writes("baseline", t0, t0.Add(time.Minute))); got != 1 {
		t.Fatalf("baseline writes = %d, want 1", got)
	}

	if err := os.WriteFile(path, []byte(auditLine("agent", t0.Add(3*time.Second))[:40]), 0o600); err != nil {
		t.Fatal(err)
	}
	err := a.poll()
	if err == nil || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("poll of a truncated log = %v, want an error that it shrank", err)
	}
}

// A log rotated by renaming, whose new file has grown past the old offset
// by the next poll, must not be read from that offset.
func TestAuditLogRefusesAReplacedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	a := &auditLog{path: path}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	appendFile(t, path, auditLine("agent", t0))
	if err := a.poll(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, filepath.Join(dir, "audit-old.log")); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, auditLine("baseline", t0.Add(time.Second))+auditLine("baseline", t0.Add(2*time.Second)))
	err := a.poll()
	if err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("poll of a replaced log = %v, want an error that it was replaced", err)
	}
	if got := len(a.writes("baseline", t0, t0.Add(time.Minute))); got != 0 {
		t.Fatalf("baseline writes = %d read from the middle of another file, want 0", got)
	}
}
