package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// matrixOf is a zone of three whose n3 is dead, seen from node: n1 and n2
// reach each other and fail n3, whose own row is stale.
func matrixOf(node string) raftzone.MatrixView {
	fresh, old := 2.2, 40.0
	cell := func(s raftzone.CellState, age *float64) raftzone.MatrixCell {
		return raftzone.MatrixCell{State: s, OK: s == raftzone.CellReached, Score: 100, AgeSeconds: age}
	}
	none := raftzone.MatrixCell{State: raftzone.CellNone}
	return raftzone.MatrixView{Zone: "edge-a", Node: node, Term: 4, Leader: "n1",
		At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), VoteTimeoutSeconds: 17,
		Members: []string{"n1", "n2", "n3"},
		Rows: []raftzone.MatrixRow{
			{Checker: "n1", Verdict: zone.Healthy, Pros: 1, Cells: []raftzone.MatrixCell{none, cell(raftzone.CellReached, &fresh), cell(raftzone.CellFailed, &fresh)}},
			{Checker: "n2", Verdict: zone.Healthy, Pros: 1, Cells: []raftzone.MatrixCell{cell(raftzone.CellReached, &fresh), none, cell(raftzone.CellFailed, &fresh)}},
			{Checker: "n3", Verdict: zone.Unhealthy, Cons: 2, Cells: []raftzone.MatrixCell{cell(raftzone.CellStale, &old), cell(raftzone.CellStale, &old), none}},
		}}
}

// matrixAgent is an agent status server on loopback that serves this
// member's matrix (seen from n2) and the leader's (seen from n1), and records
// the paths asked for.
func matrixAgent(t *testing.T) (addr string, asked func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		var v raftzone.MatrixView
		switch r.URL.Path {
		case "/v1/status/matrix":
			v = matrixOf("n2")
		case "/v1/status/leader/matrix":
			v = matrixOf("n1")
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), paths...)
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestStatusMatrixTable: --matrix prints a row per checker and a column per
// target, each cell the opinion and its report's age, none as -, and each
// checker's verdict; the table's columns line up under their targets.
func TestStatusMatrixTable(t *testing.T) {
	addr, asked := matrixAgent(t)
	code, out, errOut := runCLI(t, "status", "--address", addr, "--matrix")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := asked(); len(got) != 1 || got[0] != "/v1/status/matrix" {
		t.Errorf("asked the agent for %v, want /v1/status/matrix", got)
	}
	for _, want := range []string{"zone edge-a", "term 4", "leader n1", "seen from n2", "2025-03-01T12:00:00Z", "stale after 17s"} {
		if !strings.Contains(out, want) {
			t.Errorf("the header does not say %q:\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	var header []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "CHECKER":
			header = f
		case len(f) > 0 && header != nil && rows[f[0]] == nil && strings.HasPrefix(f[0], "n"):
			rows[f[0]] = f
		}
	}
	if want := "CHECKER \\ TARGET n1 n2 n3 VERDICT PROS/CONS"; strings.Join(header, " ") != want {
		t.Errorf("header %q, want %q", strings.Join(header, " "), want)
	}
	for checker, want := range map[string]string{
		"n1": "n1 - ok 2s FAIL 2s healthy 1/0",
		"n2": "n2 ok 2s - FAIL 2s healthy 1/0",
		"n3": "n3 stale 40s stale 40s - unhealthy 0/2",
	} {
		if got := strings.Join(rows[checker], " "); got != want {
			t.Errorf("row %s: %q, want %q\n%s", checker, got, want, out)
		}
	}
	// Columns line up: each target's cells start where its name does.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "CHECKER") {
			col := strings.Index(l, "n3")
			for _, row := range lines[i+1 : i+4] {
				if len(row) <= col || row[col] == ' ' || row[col-1] != ' ' {
					t.Errorf("row %q has no cell starting under n3 (column %d)", row, col)
				}
			}
		}
	}
}

// TestStatusMatrixFormats: -o json passes the agent's view through, -o svg
// draws it to stdout, -o FILE.svg writes the picture there and says so, and
// --leader asks for the leader's view.
func TestStatusMatrixFormats(t *testing.T) {
	addr, asked := matrixAgent(t)

	code, out, errOut := runCLI(t, "status", "--address", addr, "--matrix", "-o", "json")
	var v raftzone.MatrixView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Node != "n2" || len(v.Rows) != 3 {
		t.Errorf("-o json: exit %d (%s), %v, view of %q; want n2's view as JSON", code, errOut, err, v.Node)
	}

	code, out, errOut = runCLI(t, "status", "--address", addr, "--matrix", "--leader", "-o", "svg")
	if code != 0 {
		t.Fatalf("-o svg: exit %d: %s", code, errOut)
	}
	assertSVG(t, []byte(out), "seen from n1", "n1", "n2", "n3")
	if got := asked(); got[len(got)-1] != "/v1/status/leader/matrix" {
		t.Errorf("--leader asked for %s, want /v1/status/leader/matrix", got[len(got)-1])
	}

	file := filepath.Join(t.TempDir(), "Zone.SVG")
	code, out, errOut = runCLI(t, "status", "--address", addr, "--matrix", "-o", file)
	if code != 0 {
		t.Fatalf("-o %s: exit %d: %s", file, code, errOut)
	}
	if !strings.Contains(out, "wrote "+file) || !strings.Contains(out, "zone edge-a (3 members) seen from n2") {
		t.Errorf("-o FILE.svg says %q, want it to name the file and the view", out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the picture was not written: %v", err)
	}
	assertSVG(t, b, "seen from n2", "n1", "n2", "n3")

	old := httptest.NewServer(http.NotFoundHandler()) // an agent from before --matrix
	t.Cleanup(old.Close)
	code, _, errOut = runCLI(t, "status", "--address", old.Listener.Addr().String(), "--matrix")
	if code != 1 || !strings.Contains(errOut, "/v1/status/matrix: its release does not serve it; upgrade the agent") {
		t.Errorf("--matrix against an older agent: exit %d %q, want 1 and an error saying to upgrade it", code, errOut)
	}

	missing := filepath.Join(t.TempDir(), "no-such-dir", "zone.svg")
	code, _, errOut = runCLI(t, "status", "--address", addr, "--matrix", "-o", missing)
	if code != 1 || !strings.Contains(errOut, "-o "+missing) {
		t.Errorf("-o into a missing directory: exit %d %q, want 1 and an error naming -o and the file", code, errOut)
	}
}

func assertSVG(t *testing.T, b []byte, want ...string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v\n%s", err, b)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("the document's root is <%s>, want <svg>", root)
	}
	for _, w := range want {
		if !bytes.Contains(b, []byte(w)) {
			t.Errorf("the picture does not say %q", w)
		}
	}
}

// TestStatusMatrixFlagErrors: bad combinations are usage errors (exit 2)
// naming the flag, and ask the agent nothing.
func TestStatusMatrixFlagErrors(t *testing.T) {
	addr, asked := matrixAgent(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--matrix", "-o", "metrics"}, "-o metrics"},
		{[]string{"--matrix", "-o", "yaml"}, `-o "yaml": with --matrix want table, json, svg or a file name ending in .svg`},
		{[]string{"--matrix", "-o", "zone.png"}, `-o "zone.png"`},
		{[]string{"-o", "svg"}, `-o "svg": only the matrix is drawn; add --matrix`},
		{[]string{"-o", "zone.svg"}, "add --matrix"},
		{[]string{"-o", "yaml"}, `-o "yaml": want table, json or metrics`},
	} {
		code, _, errOut := runCLI(t, append([]string{"status", "--address", addr}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("status %v: exit %d %q, want 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if got := asked(); len(got) != 0 {
		t.Errorf("bad flags still asked the agent for %v", got)
	}
}
