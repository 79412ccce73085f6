package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/zone"
)

// installCommands returns the shell lines between the install markers of the
// README, the ones an operator copies.
func installCommands(t *testing.T, readme string) []string {
	t.Helper()
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "<!-- install:start -->")
	end := strings.Index(text, "<!-- install:end -->")
	if start < 0 || end < start {
		t.Fatalf("%s lacks the <!-- install:start --> ... <!-- install:end --> block", readme)
	}
	var cmds []string
	inFence := false
	for _, line := range strings.Split(text[start:end], "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case inFence && strings.TrimSpace(line) != "" && !strings.HasPrefix(strings.TrimSpace(line), "#"):
			cmds = append(cmds, line)
		}
	}
	if len(cmds) == 0 || len(cmds) > 6 {
		t.Fatalf("install block has %d commands; the README promises at most five plus one check", len(cmds))
	}
	return cmds
}

// TestReadmeInstallCommands runs the README's install commands verbatim, in
// order, against a real apiserver (with NodeRestriction and the Node
// authorizer) whose edge nodes are named as in the README, then checks what
// they were meant to leave behind.
func TestReadmeInstallCommands(t *testing.T) {
	testcluster.RequireBinaries(t)
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"kubectl", "edgequorum"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			if os.Getenv(testcluster.RequireEnv) != "" {
				t.Fatalf("needs %s in %s (make build, make noderuntime): %v", tool, bin, err)
			}
			t.Skipf("skipping: needs %s in %s (make build, make noderuntime)", tool, bin)
		}
	}
	cmds := installCommands(t, filepath.Join(root, "README.md"))
	c := testcluster.StartT(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The nodes come up outside any edgequorum zone, as an operator finds
	// them: the README's first command puts them in one.
	unzone := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, zone.DefaultZoneLabel)
	for _, name := range []string{"edge-1", "edge-2", "edge-3"} {
		if _, err := c.AddNode(ctx, testcluster.NodeOptions{Name: name, Zone: "topology-a"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Client().CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, unzone, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir() // kubectl's cache, off the real home
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+c.KubeconfigPath(), "HOME="+home)
	var preflight string
	for _, line := range cmds {
		cmd := exec.CommandContext(ctx, "bash", "-o", "pipefail", "-ec", line)
		cmd.Dir, cmd.Env = root, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("$ %s\n%s", line, out.String())
		if err != nil {
			t.Fatalf("install command failed: %s: %v", line, err)
		}
		if strings.Contains(line, "preflight") {
			preflight = out.String()
		}
	}

	// Every node of the README's site is in the zone, by the admin-only label.
	nodes, err := c.Client().CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: zone.DefaultZoneLabel + "=site-a"})
	if err != nil || len(nodes.Items) != 3 {
		t.Fatalf("nodes in zone site-a: %d, %v; want 3", len(nodes.Items), err)
	}
	for _, want := range []string{
		`[ok  ] zone key Secret edgequorum-system/edgequorum-zone-key: 1 key(s), "k1" signs`,
		`[ok  ] zone "site-a": 3 node(s)`,
		// No webhook replica runs on this cluster's fake nodes: the
		// certificates it keeps itself are not made yet, which preflight
		// says without failing.
		`[warn] webhook caBundle: not written yet`,
		`[warn] webhook TLS Secret edgequorum-webhook/edgequorum-webhook-tls: not made yet`,
		`[ok  ] admission policies`,
		`[ok  ] namespace edgequorum-system: Pod Security privileged`,
		`[ok  ] namespace edgequorum-webhook: Pod Security restricted`,
	} {
		if !strings.Contains(preflight, want) {
			t.Errorf("preflight output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("preflight said:\n%s", preflight)
	}
}
