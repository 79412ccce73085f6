package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgequorum/edgequorum/skew"
)

// TestReleaseIsReproducible writes the release twice from this tree, for one
// CLI platform and every image, and wants the same SHA256SUMS both times:
// the same commit must give the same bytes. It needs `make image`'s output
// and the SBOM tool, which `make test` builds into EDGEQUORUM_BIN_DIR.
func TestReleaseIsReproducible(t *testing.T) {
	bin, tool := sbomTool(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rel := func(out string) string {
		t.Helper()
		// make image names its files after the VERSION it built.
		version, err := os.ReadFile(filepath.Join(root, "VERSION"))
		if err != nil {
			t.Fatal(err)
		}
		c := config{version: strings.TrimSpace(string(version)), revision: "0123456789ab", out: out,
			imageDir: filepath.Join(bin, "image"), manifests: filepath.Join(root, "deploy", "install"), sbomTool: tool,
			platforms: []string{"linux/amd64"}, buildinfo: "github.com/edgequorum/edgequorum/internal/buildinfo", root: root}
		if err := release(c, io.Discard); err != nil {
			t.Fatal(err)
		}
		sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		return string(sums)
	}
	first, second := rel(t.TempDir()), rel(t.TempDir())
	if first != second {
		t.Fatalf("two releases of one tree differ:\n%s\n---\n%s", first, second)
	}
	for _, want := range []string{"-linux-amd64\n", "-linux-amd64.cdx.json\n", "-linux-arm-v7.tar\n", "-linux-arm64.tar.cdx.json\n", "install/agent.yaml\n", "install/webhook.yaml\n"} {
		if !strings.Contains(first, want) {
			t.Errorf("SHA256SUMS lists no file ending %q:\n%s", strings.TrimSpace(want), first)
		}
	}
}

// TestSBOMNamesTheRelease: an SBOM is CycloneDX JSON whose main component is
// this module at the release's version, with its dependencies listed.
func TestSBOMNamesTheRelease(t *testing.T) {
	_, tool := sbomTool(t)
	out := filepath.Join(t.TempDir(), "bom.json")
	// The tool's own binary is a Go binary like any other.
	if err := sbom(config{sbomTool: tool, version: "v9.9.9"}, tool, out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string `json:"timestamp"`
			Component struct {
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			PURL string `json:"purl"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatalf("SBOM is not JSON: %v", err)
	}
	switch {
	case bom.BOMFormat != "CycloneDX":
		t.Errorf("bomFormat %q", bom.BOMFormat)
	case bom.Metadata.Component.Version != "v9.9.9":
		t.Errorf("main component version %q, want v9.9.9", bom.Metadata.Component.Version)
	case bom.SerialNumber != "" || bom.Metadata.Timestamp != "":
		t.Errorf("serial %q, timestamp %q: a reproducible SBOM has neither", bom.SerialNumber, bom.Metadata.Timestamp)
	case len(bom.Components) == 0 || !strings.HasPrefix(bom.Components[0].PURL, "pkg:golang/"):
		t.Errorf("components %+v, want the Go modules", bom.Components)
	}
}

// sbomTool returns the bin folder `make test` filled and the SBOM tool in it.
// `make unit` builds neither, and skips; anywhere else a missing tool fails.
func sbomTool(t *testing.T) (bin, tool string) {
	t.Helper()
	bin = os.Getenv("EDGEQUORUM_BIN_DIR")
	tool = filepath.Join(bin, "cyclonedx-gomod")
	if _, err := os.Stat(tool); bin == "" || err != nil {
		if os.Getenv("EDGEQUORUM_UNIT") == "1" {
			t.Skip("needs the images and the SBOM tool that `make test` builds")
		}
		t.Fatalf("no SBOM tool at %s: run `make test`, which builds it", tool)
	}
	return bin, tool
}

// TestChangelogDescribesTheVersion: a release's VERSION has its own section in
// CHANGELOG.md, a development version (with a pre-release part) the
// Unreleased one, and either parses as a release of the skew policy.
func TestChangelogDescribesTheVersion(t *testing.T) {
	raw, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	if _, err := skew.ParseRelease(version); err != nil {
		t.Fatalf("VERSION: %v", err)
	}
	log, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "\n## [" + version + "] - "
	if strings.Contains(version, "-") {
		want = "\n## Unreleased\n"
	}
	if !strings.Contains(string(log), want) {
		t.Errorf("CHANGELOG.md has no section %q for VERSION %s", strings.TrimSpace(want), version)
	}
}
