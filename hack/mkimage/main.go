// Command mkimage packages static edgequorum binaries as OCI images, one per
// platform, and a multi-architecture index over them; `make image` runs it.
// Each image holds /edgequorum, its entrypoint, and /edgequorum-agent, the
// narrow agent `edgequorum agent` hands over to, which must sit beside the
// edgequorum binary given for the platform.
//
// It writes, under -out:
//
//	oci/                                   OCI image layout holding the index (for skopeo/crane/oras)
//	edgequorum-<version>-<os>-<arch>.tar   one image per platform (ctr images import, docker load)
//
// and prints each image's compressed size, the figure that matters to a node
// pulling it over a thin edge link.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/edgequorum/edgequorum/internal/ociimage"
)

// maxCompressed is the size budget of one platform's image; mkimage fails past
// it so a dependency that bloats the binary is noticed when it lands.
const maxCompressed = 25 << 20

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	repo := fs.String("repo", "ghcr.io/edgequorum/edgequorum", "image repository")
	version := fs.String("version", "", "semver version, the image tag (e.g. v0.2.0)")
	revision := fs.String("revision", "unknown", "source revision, recorded as a label")
	created := fs.Int64("created", 0, "creation time in Unix seconds (the commit time, for reproducible images)")
	out := fs.String("out", "bin/image", "output folder")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: mkimage -version vX.Y.Z [flags] os/arch[/variant]=path/to/edgequorum ... (edgequorum-agent beside each)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !strings.HasPrefix(*version, "v") {
		return fmt.Errorf("-version must be a semver tag like v0.2.0, got %q", *version)
	}
	if fs.NArg() == 0 {
		return errors.New("no binaries given: pass os/arch[/variant]=path for each platform")
	}
	ref, err := name.NewTag(*repo + ":" + *version)
	if err != nil {
		return fmt.Errorf("-repo/-version: %w", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var imgs []v1.Image
	for _, arg := range fs.Args() {
		platform, bin, ok := strings.Cut(arg, "=")
		if !ok {
			return fmt.Errorf("argument %q: want os/arch[/variant]=path", arg)
		}
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return fmt.Errorf("argument %q: %w", arg, err)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return fmt.Errorf("binary for %s: %w", platform, err)
		}
		// The narrow agent that `edgequorum agent` hands over to: without it
		// every edge node would keep the whole CLI resident.
		agentBin := filepath.Join(filepath.Dir(bin), "edgequorum-agent")
		agentData, err := os.ReadFile(agentBin)
		if err != nil {
			return fmt.Errorf("agent binary for %s (build ./cmd/edgequorum-agent beside %s): %w", platform, bin, err)
		}
		img, err := ociimage.Build(ociimage.Spec{
			Platform: *p,
			Files: append(ociimage.PasswdFiles(),
				ociimage.File{Path: "/edgequorum", Mode: 0o755, Data: data},
				ociimage.File{Path: "/edgequorum-agent", Mode: 0o755, Data: agentData}),
			Entrypoint: []string{"/edgequorum"},
			User:       strconv.Itoa(ociimage.NonRootUID) + ":" + strconv.Itoa(ociimage.NonRootUID),
			Labels: map[string]string{
				"org.opencontainers.image.title":    "edgequorum",
				"org.opencontainers.image.version":  *version,
				"org.opencontainers.image.revision": *revision,
				"org.opencontainers.image.source":   "https://github.com/edgequorum/edgequorum",
				"org.opencontainers.image.licenses": "Apache-2.0",
			},
			Created: time.Unix(*created, 0),
		})
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		size, err := ociimage.CompressedSize(img)
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		tarPath := filepath.Join(*out, fmt.Sprintf("edgequorum-%s-%s.tar", *version, strings.ReplaceAll(platform, "/", "-")))
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("%s: write %s: %w", platform, tarPath, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		fmt.Printf("%-14s %6.2f MiB compressed  %s  %s\n", platform, float64(size)/(1<<20), digest, tarPath)
		if size > maxCompressed {
			return fmt.Errorf("%s: image is %.2f MiB compressed, over the %d MiB budget", platform, float64(size)/(1<<20), maxCompressed>>20)
		}
		imgs = append(imgs, img)
	}
	idx, err := ociimage.Index(imgs...)
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(*out, "oci")
	if err := ociimage.WriteLayout(layoutDir, ref.String(), idx); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("index          %s  %s  %s\n", ref, digest, layoutDir)
	return nil
}
