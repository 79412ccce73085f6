package testcluster

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindBinDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BinDirEnv, dir)
	got, err := FindBinDir()
	if err != nil || got != dir {
		t.Fatalf("FindBinDir() = %q, %v; want %q", got, err, dir)
	}
}

// Without the variable, the search walks up to the root module's go.mod, past
// a nested module such as hack/controlplane.
func TestFindBinDirWalksUpToRootModule(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	root := t.TempDir()
	nested := filepath.Join(root, "hack", "controlplane")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "go.mod"), "module "+rootModule+"\n\ngo 1.26\n")
	writeFile(t, filepath.Join(nested, "go.mod"), "module "+rootModule+"/hack/controlplane\n")
	t.Chdir(nested)
	got, err := FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "bin"); got != want {
		t.Fatalf("FindBinDir() = %q, want %q", got, want)
	}
}

func TestCheckBinaries(t *testing.T) {
	dir := t.TempDir()
	if err := CheckBinaries(dir); !errors.Is(err, ErrBinariesMissing) {
		t.Fatalf("CheckBinaries(empty) = %v, want ErrBinariesMissing", err)
	}
	for _, name := range Binaries {
		writeFile(t, filepath.Join(dir, name), "#!/bin/sh\n")
		if err := os.Chmod(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckBinaries(dir); err != nil {
		t.Fatalf("CheckBinaries(complete) = %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "etcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckBinaries(dir); !errors.Is(err, ErrBinariesMissing) {
		t.Fatalf("CheckBinaries(non-executable etcd) = %v, want ErrBinariesMissing", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
