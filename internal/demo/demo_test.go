package demo

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// TestDemoPlaysToTheEnd runs the whole story, shortened, so `make demo` keeps
// working: both checks of the narration must pass.
func TestDemoPlaysToTheEnd(t *testing.T) {
	testcluster.RequireBinaries(t)
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := Options{Nodes: 3, Dir: t.TempDir(), Binary: filepath.Join(bin, "edgequorum"),
		Grace: 12 * time.Second, Toleration: 6 * time.Second, Out: &out}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err = Run(ctx, opts)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "✔"); got != 2 {
		t.Fatalf("%d of 2 checks passed", got)
	}
}
