package suite

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveProfiles(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.RequestURI() {
		case "/debug/pprof/goroutine?debug=1":
			w.Write([]byte("goroutine profile: total 7\n"))
		case "/debug/pprof/heap":
			w.Write([]byte{0x1f, 0x8b})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	dir := filepath.Join(t.TempDir(), "profiles")
	files, err := saveProfiles(t.Context(), addr, dir, "N3-leader", true)
	if err != nil || len(files) != 2 {
		t.Fatalf("saveProfiles = %v, %v", files, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "N3-leader-goroutine.txt")); err != nil || string(b) != "goroutine profile: total 7\n" {
		t.Fatalf("goroutine profile file: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "N3-leader-heap.pb.gz")); err != nil || len(b) != 2 {
		t.Fatalf("heap profile file: %q, %v", b, err)
	}

	// Without heap profiles the agent sampled nothing: only its goroutines.
	files, err = saveProfiles(t.Context(), addr, filepath.Join(dir, "noheap"), "N3-leader", false)
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "N3-leader-goroutine.txt" {
		t.Fatalf("saveProfiles without heap = %v, %v; want the goroutine profile alone", files, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "noheap", "N3-leader-heap.pb.gz")); !os.IsNotExist(err) {
		t.Fatalf("heap profile written without heap profiles asked for: %v", err)
	}

	// An agent without --profiling answers 404: an error naming the file.
	off := httptest.NewServer(http.NotFoundHandler())
	defer off.Close()
	if _, err := saveProfiles(t.Context(), strings.TrimPrefix(off.URL, "http://"), dir, "N3-x", true); err == nil ||
		!strings.Contains(err.Error(), "N3-x-goroutine.txt") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("profiles from an agent without --profiling: %v, want a 404 naming the file", err)
	}
}

// TestAgentEnv checks that the measured agents sample no allocation unless
// heap profiles are asked for, keeping any GODEBUG the suite was given.
func TestAgentEnv(t *testing.T) {
	t.Setenv("GODEBUG", "")
	if got := agentEnv(true); got != nil {
		t.Errorf("agentEnv(heap profiles) = %q, want nothing added", got)
	}
	if got := agentEnv(false); len(got) != 1 || got[0] != "GODEBUG=memprofilerate=0" {
		t.Errorf("agentEnv = %q, want GODEBUG=memprofilerate=0", got)
	}
	t.Setenv("GODEBUG", "http2client=0")
	if got := agentEnv(false); len(got) != 1 || got[0] != "GODEBUG=http2client=0,memprofilerate=0" {
		t.Errorf("agentEnv with GODEBUG=http2client=0 = %q, want both settings", got)
	}
}
