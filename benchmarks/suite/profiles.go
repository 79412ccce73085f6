package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// profileArg is the agent flag that serves its runtime profiles; the suite
// starts every measured agent with it, and reads them only after a window.
const profileArg = "--profiling"

// agentEnv is what every measured agent gets on top of the suite's
// environment: unless heap profiles are asked for, no allocation sampling,
// which --profiling would otherwise leave on, so that the agents are
// measured as they ship. A GODEBUG the suite was started with is kept.
func agentEnv(heapProfiles bool) []string {
	if heapProfiles {
		return nil
	}
	godebug := "memprofilerate=0"
	if cur := os.Getenv("GODEBUG"); cur != "" {
		godebug = strings.TrimSuffix(cur, ",") + "," + godebug
	}
	return []string{"GODEBUG=" + godebug}
}

// saveProfiles fetches the goroutine profile (as text, grouped by stack)
// and, with heap, the heap profile (for go tool pprof) of the agent whose
// status server is at addr, into dir as <name>-goroutine.txt and
// <name>-heap.pb.gz: where a member's goroutines and heap go, for whoever
// shrinks them. It runs after a measuring window, since a heap profile
// collects garbage first. It returns the files written.
func saveProfiles(ctx context.Context, addr, dir, name string, heap bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	profiles := []struct{ path, file string }{{"/debug/pprof/goroutine?debug=1", name + "-goroutine.txt"}}
	if heap {
		profiles = append(profiles, struct{ path, file string }{"/debug/pprof/heap", name + "-heap.pb.gz"})
	}
	var files []string
	for _, p := range profiles {
		file := filepath.Join(dir, p.file)
		if err := fetchTo(ctx, "http://"+addr+p.path, file); err != nil {
			return files, fmt.Errorf("%s: %w", p.file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

func fetchTo(ctx context.Context, url, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
