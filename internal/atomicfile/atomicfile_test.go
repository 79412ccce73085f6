package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "two" {
		t.Fatalf("content = %q, %v; want two", b, err)
	}
	assertOnly(t, dir, "f")
}

func TestWritePerm(t *testing.T) {
	old := syscall.Umask(0o077) // Write gives perm exactly, whatever the umask
	defer syscall.Umask(old)
	dir := t.TempDir()
	for _, perm := range []os.FileMode{0o600, 0o644, 0o640} {
		p := filepath.Join(dir, "f")
		if err := Write(p, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != perm {
			t.Errorf("mode = %v, want %v", got, perm)
		}
	}
}

func TestWriteFailureLeavesNoTempFile(t *testing.T) {
	dir := t.TempDir()
	// The rename fails: path is a non-empty directory.
	p := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("x"), 0o600); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	assertOnly(t, dir, "d")
}

func TestWriteFailureKeepsOldContent(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := Write(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o700)
	if err := Write(p, []byte("new"), 0o600); err == nil {
		t.Fatal("Write into a read-only directory succeeded")
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Fatalf("content = %q, want old", b)
	}
	assertOnly(t, dir, "f")
}

func TestWriteMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "f"), []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

// assertOnly fails unless dir holds exactly the named entries.
func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("%s holds %q, want %q", dir, got, names)
		}
	}
}
