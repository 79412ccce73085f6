package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/edgequorum/edgequorum/internal/ociimage"
)

// Images of the node's own making. Their registry host is not a registry: the
// node never pulls (they are imported, and pods ask for them IfNotPresent with
// a non-latest tag), and no name could resolve inside the namespace anyway.
const (
	// PauseImage is containerd's pinned sandbox image, built from ./pause.
	PauseImage = "edgequorum.local/realnode/pause:v1"
	// TestImage is built from ./testimage for the package's own test.
	TestImage = "edgequorum.local/realnode/testimage:v1"
)

const modulePath = "github.com/edgequorum/edgequorum"

// Go packages of the images above.
const (
	pausePackage     = modulePath + "/internal/realnode/pause"
	testImagePackage = modulePath + "/internal/realnode/testimage"
)

// BuildGoImage builds the main package pkg (static, cgo-free) and writes a
// one-file image named ref, with the binary as /<base of pkg> and entrypoint,
// as a docker-archive tarball at tarPath for Node.ImportImage. moduleDir is
// where `go build` runs (the repository root, or any directory of the module).
// The toolchain is the go command on PATH, as under `go test`.
func BuildGoImage(ctx context.Context, moduleDir, pkg, ref, tarPath string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("realnode: image name %q: %w", ref, err)
	}
	binDir, err := os.MkdirTemp(filepath.Dir(tarPath), "gobuild-")
	if err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	defer os.RemoveAll(binDir)
	base := path.Base(pkg)
	bin := filepath.Join(binDir, base)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("realnode: go build %s: %w\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	img, err := ociimage.Build(ociimage.Spec{
		Platform:   v1.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Files:      []ociimage.File{{Path: "/" + base, Mode: 0o755, Data: data}},
		Entrypoint: []string{"/" + base},
		Created:    time.Unix(0, 0),
	})
	if err != nil {
		return fmt.Errorf("realnode: building image %s: %w", ref, err)
	}
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		return fmt.Errorf("realnode: writing %s: %w", tarPath, err)
	}
	return nil
}
