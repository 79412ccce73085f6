// Package ociimage builds the container images edgequorum ships, without a
// Docker daemon and without pulling a base image: each image is one layer of
// files appended to the empty image. Build machines reach only the Go module
// proxy and Debian's packages, and a static Go binary needs nothing else.
//
// Images are reproducible: file times, the image's creation time and the layer's
// tar headers come from Spec.Created (the commit time in `make image`), so the
// same binaries always give the same digests.
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one regular file of an image's only layer. Directories on its path
// are created 0755 root:root.
type File struct {
	// Path is absolute inside the image, e.g. "/edgequorum".
	Path string
	Mode int64
	UID  int
	GID  int
	Data []byte
}

// Spec describes one single-platform image.
type Spec struct {
	Platform   v1.Platform
	Files      []File
	Entrypoint []string
	// User is the image's default user ("65532:65532"); a pod may override it.
	User   string
	Env    []string
	Labels map[string]string
	// Created stamps the image config, the layer's file times and the
	// history entry; zero means the Unix epoch.
	Created time.Time
}

// NonRootUID is the uid (and gid) of the unprivileged user the images run as by
// default, the one distroless calls "nonroot": outside the ranges distributions
// give system and login users, so it owns nothing on a host.
const NonRootUID = 65532

// PasswdFiles returns /etc/passwd and /etc/group naming root and nonroot, so that
// tools inside and outside the container print names instead of bare numbers.
// The image has no shell: both users' shell is /sbin/nologin, which is absent.
func PasswdFiles() []File {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootUID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte(passwd)},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(group)},
	}
}

// Build returns the image spec describes.
func Build(spec Spec) (v1.Image, error) {
	if spec.Platform.OS == "" || spec.Platform.Architecture == "" {
		return nil, errors.New("ociimage: platform needs an OS and an architecture")
	}
	created := spec.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC()
	layerTar, err := tarFiles(spec.Files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "edgequorum ociimage: " + strings.Join(spec.Entrypoint, " "),
		},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = spec.Platform.OS
	cf.Architecture = spec.Platform.Architecture
	cf.Variant = spec.Platform.Variant
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.User = spec.User
	cf.Config.Env = spec.Env
	cf.Config.Labels = spec.Labels
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("ociimage: set config: %w", err)
	}
	return img, nil
}

// tarFiles writes files, and the directories above them, into a tar stream in a
// fixed order with fixed times and owners, so equal inputs give equal bytes.
func tarFiles(files []File, mtime time.Time) ([]byte, error) {
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range sorted {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("ociimage: file path %q must be absolute and clean", f.Path)
		}
		name := strings.TrimPrefix(f.Path, "/")
		// Parents first, each once.
		parts := strings.Split(name, "/")
		for i := 1; i < len(parts); i++ {
			dir := strings.Join(parts[:i], "/") + "/"
			if dirs[dir] {
				continue
			}
			dirs[dir] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return nil, fmt.Errorf("ociimage: tar %s: %w", dir, err)
			}
		}
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: name, Mode: f.Mode, Size: int64(len(f.Data)),
			Uid: f.UID, Gid: f.GID, ModTime: mtime, Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("ociimage: tar %s: %w", name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("ociimage: tar %s: %w", name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: tar: %w", err)
	}
	return buf.Bytes(), nil
}

// Index returns the multi-architecture index of imgs, each entry carrying its
// image's platform, so a runtime picks the image of its own architecture.
func Index(imgs ...v1.Image) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	adds := make([]mutate.IndexAddendum, 0, len(imgs))
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("ociimage: index: %w", err)
		}
		p := cf.Platform()
		if p == nil {
			return nil, errors.New("ociimage: index: image without a platform")
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}})
	}
	return mutate.AppendManifests(idx, adds...), nil
}

// WriteLayout writes idx as an OCI image layout in dir (replacing what was
// there), its entry in index.json named ref, the form `skopeo copy oci:` and
// `crane push` take to mirror the image into a private registry.
func WriteLayout(dir, ref string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("ociimage: clear %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: layout %s: %w", dir, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return fmt.Errorf("ociimage: layout %s: %w", dir, err)
	}
	return nil
}

// CompressedSize is what a node downloads for img: its manifest, its config
// and its compressed layers.
func CompressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, fmt.Errorf("ociimage: manifest: %w", err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, fmt.Errorf("ociimage: manifest: %w", err)
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}
