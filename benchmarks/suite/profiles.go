package suite

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profileArg is the agent flag that serves its runtime profiles; the suite
// starts every measured agent with it, and reads them only after a window.
const profileArg = "--profiling"

// saveProfiles fetches the goroutine profile (as text, grouped by stack)
// and the heap profile (for go tool pprof) of the agent whose status server
// is at addr, into dir as <name>-goroutine.txt and <name>-heap.pb.gz: where
// a member's goroutines and heap go, for whoever shrinks them. It runs after
// a measuring window, since a heap profile collects garbage first. It
// returns the files written.
func saveProfiles(ctx context.Context, addr, dir, name string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/goroutine?debug=1", name + "-goroutine.txt"},
		{"/debug/pprof/heap", name + "-heap.pb.gz"},
	} {
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
