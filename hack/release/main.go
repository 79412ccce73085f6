// Command release writes everything a release ships into one folder;
// `make release` runs it after `make image`. It writes, under -out:
//
//	edgequorum-<version>-<os>-<arch>[-<variant>]      the CLI, static (operators run keygen, certs, preflight, status from laptops)
//	edgequorum-<version>-linux-<arch>.tar             the image of each platform, as `make image` wrote it
//	install/*.yaml                                    the rendered install manifests (deploy/install)
//	<artifact>.cdx.json                               a CycloneDX SBOM per CLI binary and per image
//	SHA256SUMS                                        the digest of every file above, `sha256sum -c` style
//
// The same commit gives the same bytes: binaries are built as `make image`
// builds the images' (static, -trimpath, the version and revision linked in,
// Go's VCS stamp of the commit), images carry the commit time, and the SBOMs
// leave out their timestamp and serial number. TestReleaseIsReproducible
// holds it to that.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// cliPlatforms are the CLI's platforms: the images' three plus the laptops
// operators run it from.
var cliPlatforms = []string{"linux/amd64", "linux/arm64", "linux/arm/v7", "darwin/amd64", "darwin/arm64"}

// imagePlatforms are the platforms `make image` builds.
var imagePlatforms = []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// config is what one release run needs.
type config struct {
	version, revision string
	out               string
	imageDir          string // `make image`'s output: per-platform tarballs and bin/<platform>/edgequorum
	manifests         string // deploy/install
	sbomTool          string // a cyclonedx-gomod binary
	platforms         []string
	buildinfo         string // the package the version and revision are linked into
	root              string // the module's root, where ./cmd/edgequorum is
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.version, "version", "", "semver version of the release (e.g. v0.3.0)")
	fs.StringVar(&c.revision, "revision", "", "source revision, linked into the binaries")
	fs.StringVar(&c.out, "out", "bin/release", "output folder; emptied first")
	fs.StringVar(&c.imageDir, "images", "bin/image", "the output folder of `make image`")
	fs.StringVar(&c.manifests, "manifests", "deploy/install", "the rendered install manifests")
	fs.StringVar(&c.sbomTool, "sbom-tool", "", "path of the cyclonedx-gomod binary that writes the SBOMs")
	platforms := fs.String("platforms", strings.Join(cliPlatforms, ","), "CLI platforms, os/arch[/variant], comma-separated")
	fs.StringVar(&c.root, "root", ".", "the module's root folder")
	fs.StringVar(&c.buildinfo, "buildinfo", "github.com/edgequorum/edgequorum/internal/buildinfo", "package that holds the version and revision variables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case !strings.HasPrefix(c.version, "v"):
		return fmt.Errorf("-version must be a semver tag like v0.3.0, got %q", c.version)
	case c.revision == "":
		return errors.New("-revision is required")
	case c.sbomTool == "":
		return errors.New("-sbom-tool is required: the path of a cyclonedx-gomod binary")
	}
	c.platforms = strings.Split(*platforms, ",")
	for _, p := range c.platforms {
		if !slices.Contains(cliPlatforms, p) {
			return fmt.Errorf("-platforms: %q is not one of %s", p, strings.Join(cliPlatforms, ", "))
		}
	}
	return release(c, stdout)
}

// release writes the release c describes, reporting progress on stdout.
func release(c config, stdout io.Writer) error {
	if err := os.RemoveAll(c.out); err != nil {
		return fmt.Errorf("-out %s: %w", c.out, err)
	}
	if err := os.MkdirAll(filepath.Join(c.out, "install"), 0o755); err != nil {
		return fmt.Errorf("-out %s: %w", c.out, err)
	}
	for _, p := range c.platforms {
		name := artifact(c.version, p)
		fmt.Fprintf(stdout, "building %s\n", name)
		bin := filepath.Join(c.out, name)
		if err := buildCLI(c, p, bin); err != nil {
			return err
		}
		if err := sbom(c, bin, bin+".cdx.json"); err != nil {
			return err
		}
	}
	for _, p := range imagePlatforms {
		tar := artifact(c.version, p) + ".tar"
		src := filepath.Join(c.imageDir, tar)
		if _, err := os.Stat(src); err != nil {
			return fmt.Errorf("image %s: %w (run `make image` first)", src, err)
		}
		fmt.Fprintf(stdout, "adding %s\n", tar)
		if err := copyFile(src, filepath.Join(c.out, tar)); err != nil {
			return err
		}
		// The image holds the binaries make image built for it; edgequorum
		// links everything edgequorum-agent does (it can run the agent
		// itself), so its SBOM lists every module in the image.
		inside := filepath.Join(c.imageDir, "bin", strings.ReplaceAll(p, "/", "-"), "edgequorum")
		if err := sbom(c, inside, filepath.Join(c.out, tar+".cdx.json")); err != nil {
			return err
		}
	}
	manifests, err := filepath.Glob(filepath.Join(c.manifests, "*.yaml"))
	if err != nil || len(manifests) == 0 {
		return fmt.Errorf("-manifests %s holds no *.yaml (%v)", c.manifests, err)
	}
	for _, m := range manifests {
		if err := copyFile(m, filepath.Join(c.out, "install", filepath.Base(m))); err != nil {
			return err
		}
	}
	sums, err := checksums(c.out)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.out, "SHA256SUMS"), []byte(sums), 0o644); err != nil {
		return fmt.Errorf("write SHA256SUMS: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%d files)\n", filepath.Join(c.out, "SHA256SUMS"), strings.Count(sums, "\n"))
	return nil
}

// artifact names a release file for platform p: edgequorum-v0.3.0-linux-arm-v7.
func artifact(version, p string) string {
	return "edgequorum-" + version + "-" + strings.ReplaceAll(p, "/", "-")
}

// buildCLI builds the static CLI for platform p into out, as `make image`
// builds the images' binaries: the same flags give the same bytes.
func buildCLI(c config, p, out string) error {
	parts := strings.Split(p, "/")
	env := append(os.Environ(), "CGO_ENABLED=0", "GOOS="+parts[0], "GOARCH="+parts[1])
	if len(parts) == 3 {
		env = append(env, "GOARM="+strings.TrimPrefix(parts[2], "v"))
	}
	ldflags := fmt.Sprintf("-s -w -X %s.version=%s -X %s.revision=%s", c.buildinfo, c.version, c.buildinfo, c.revision)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/edgequorum")
	cmd.Env, cmd.Dir = env, c.root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", p, err, b)
	}
	return nil
}

// sbom writes the CycloneDX SBOM of the Go binary bin to out, without the
// timestamp and serial number that would make two runs differ.
func sbom(c config, bin, out string) error {
	cmd := exec.Command(c.sbomTool, "bin", "-json", "-noserial", "-notimestamp", "-version", c.version, "-output", out, bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("SBOM of %s: %w\n%s", bin, err, b)
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// checksums returns SHA256SUMS for every file under dir, by path, in the
// form `sha256sum -c` reads.
func checksums(dir string) (string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err == nil && rel != "SHA256SUMS" {
			names = append(names, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("list %s: %w", dir, err)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", n, err)
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), n)
	}
	return b.String(), nil
}
