package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable the Makefile exports with the absolute
// path of bin/, so tests find the control plane whatever their working directory.
const BinDirEnv = "EDGEQUORUM_BIN_DIR"

// rootModule is the module path whose go.mod marks the repository root when
// FindBinDir walks up from the working directory. hack/controlplane has a go.mod
// of its own, so "any go.mod" would stop too early.
const rootModule = "github.com/edgequorum/edgequorum"

// Binaries are the file names Start runs from the bin directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

// ErrBinariesMissing means the bin directory lacks a control-plane binary; run
// `make controlplane`.
var ErrBinariesMissing = errors.New("control-plane binaries missing (run `make controlplane`)")

// FindBinDir returns the directory that should hold the control-plane binaries:
// $EDGEQUORUM_BIN_DIR if set, else the bin/ directory of the repository root found
// by walking up from the working directory, else the directory of the running
// executable (bin/edgequorum sits beside them). It does not check the binaries;
// CheckBinaries does.
func FindBinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testcluster: finding bin dir: %w", err)
	}
	for dir := wd; ; {
		if isRepoRoot(dir) {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("testcluster: no %s, no repository root above %s, and no executable path: %w", BinDirEnv, wd, err)
	}
	return filepath.Dir(exe), nil
}

func isRepoRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`) == rootModule
		}
	}
	return false
}

// CheckBinaries reports whether dir holds every control-plane binary as an
// executable file; the error wraps ErrBinariesMissing and lists what is absent.
func CheckBinaries(dir string) error {
	var missing []string
	for _, name := range Binaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testcluster: %s lacks %s: %w", dir, strings.Join(missing, ", "), ErrBinariesMissing)
	}
	return nil
}

// resolveBinDir applies FindBinDir when dir is empty and checks the binaries.
func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		d, err := FindBinDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	if err := CheckBinaries(dir); err != nil {
		return "", err
	}
	return dir, nil
}
