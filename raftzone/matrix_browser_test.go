package raftzone_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/matrixsvg"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// The picture of the matrix, opened as an operator opens it: in a real
// browser (headless Debian chromium), from a real zone's committed view.
// hack/node-packages.sh installs chromium; without it these tests skip, or
// fail when EDGEQUORUM_REQUIRE_CONTROLPLANE is set, as in CI.

// TestMatrixPictureInABrowser draws the leader's view of a zone of three
// whose node-3 died, and checks what a person would see: the reached and
// failed cells in their colours, each covering the cells the view has of it
// (and the legend's swatch) and nothing more, and every node's name laid out
// as text beside its row and above its column.
func TestMatrixPictureInABrowser(t *testing.T) {
	chromium := testcluster.RequireCommand(t, "chromium", "install the Debian package: hack/node-packages.sh (make packages)")
	v := raftzone.DeadNodeMatrix(t, 3, "node-3")
	var svg bytes.Buffer
	if err := matrixsvg.Write(&svg, v); err != nil {
		t.Fatal(err)
	}

	t.Run("cells", func(t *testing.T) {
		shot := screenshot(t, chromium, svg.Bytes())
		cell := matrixsvg.CellSize(len(v.Members))
		for _, c := range []struct {
			state raftzone.CellState
			color string
		}{{raftzone.CellReached, matrixsvg.ColorReached}, {raftzone.CellFailed, matrixsvg.ColorFailed}} {
			cells := 0
			for _, row := range v.Rows {
				for _, x := range row.Cells {
					if x.State == c.state {
						cells++
					}
				}
			}
			got := countColor(t, shot, c.color)
			// Each cell's inside, less its 1px border; at most its whole
			// square, and the legend's 14×14 swatch.
			lo, hi := cells*(cell-2)*(cell-2), cells*cell*cell+14*14
			if cells == 0 || got < lo || got > hi {
				t.Errorf("%d pixels of %s (%s) for %d %s cells of %dpx; want %d to %d", got, c.state, c.color, cells, c.state, cell, lo, hi)
			}
		}
	})

	t.Run("names", func(t *testing.T) {
		widths := laidOutText(t, chromium, svg.Bytes(), v.Members)
		for _, name := range v.Members {
			w := widths[name]
			// Once beside its row, once above its column.
			if len(w) != 2 || w[0] <= 0 || w[1] <= 0 {
				t.Errorf("text %q laid out with widths %v, want two texts of non-zero width", name, w)
			}
		}
	})
}

// TestMatrixPictureOfHostileNamesInABrowser: names the renderer must escape
// reach the browser's text exactly as they are, and nothing in them becomes
// markup: the page runs the one script it was given.
func TestMatrixPictureOfHostileNamesInABrowser(t *testing.T) {
	chromium := testcluster.RequireCommand(t, "chromium", "install the Debian package: hack/node-packages.sh (make packages)")
	names := []string{`a<b&"c`, `x"><script>var owned=1</script>`}
	age := 1.0
	v := raftzone.MatrixView{Zone: `z</text><script>`, Node: names[0], Term: 2, Leader: names[1], At: time.Now(), VoteTimeoutSeconds: 17,
		Members: names}
	for i, n := range names {
		row := raftzone.MatrixRow{Checker: n, Verdict: zone.Healthy}
		for j := range names {
			c := raftzone.MatrixCell{State: raftzone.CellNone}
			if i != j {
				c = raftzone.MatrixCell{State: raftzone.CellReached, OK: true, Score: 100, AgeSeconds: &age}
			}
			row.Cells = append(row.Cells, c)
		}
		v.Rows = append(v.Rows, row)
	}
	var svg bytes.Buffer
	if err := matrixsvg.Write(&svg, v); err != nil {
		t.Fatal(err)
	}
	widths := laidOutText(t, chromium, svg.Bytes(), names)
	for _, name := range names {
		if w := widths[name]; len(w) != 2 || w[0] <= 0 || w[1] <= 0 {
			t.Errorf("text %q laid out with widths %v, want two texts of non-zero width", name, w)
		}
	}
	if n := widths["scripts"]; len(n) != 1 || n[0] != 1 {
		t.Errorf("the page holds %v script elements, want only its own", n)
	}
}

// runChromium runs headless chromium with args and a profile of its own, and
// returns its stdout. It leads a process group of its own, killed when ctx
// ends, so a hung browser fails the test instead of holding it.
func runChromium(t *testing.T, chromium string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	home := t.TempDir()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(home, "profile"),
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-dev-shm-usage", "--mute-audio",
		"--hide-scrollbars", "--force-device-scale-factor=1", "--force-color-profile=srgb"}, args...)
	cmd := exec.CommandContext(ctx, chromium, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Whatever it forked and left behind.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium %s: %v (context: %v)\n%s", strings.Join(args, " "), err, ctx.Err(), stderr.String())
	}
	return stdout.Bytes()
}

// screenshot renders svg in chromium at its own size and returns the picture.
func screenshot(t *testing.T, chromium string, svg []byte) image.Image {
	t.Helper()
	w, h := svgSize(t, svg)
	dir := t.TempDir()
	file, shot := filepath.Join(dir, "zone.svg"), filepath.Join(dir, "zone.png")
	if err := os.WriteFile(file, svg, 0o644); err != nil {
		t.Fatal(err)
	}
	runChromium(t, chromium, fmt.Sprintf("--window-size=%d,%d", w, h), "--screenshot="+shot, "file://"+file)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < w/2 || b.Dy() < h/2 {
		t.Fatalf("screenshot of %v for a picture of %dx%d", b, w, h)
	}
	return img
}

// svgSize reads the width and height of svg's root element.
func svgSize(t *testing.T, svg []byte) (w, h int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("no <svg> element: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "svg" {
			continue
		}
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "width":
				w, _ = strconv.Atoi(a.Value)
			case "height":
				h, _ = strconv.Atoi(a.Value)
			}
		}
		if w <= 0 || h <= 0 {
			t.Fatalf("<svg> of size %dx%d", w, h)
		}
		return w, h
	}
}

// countColor counts the pixels of img that are hex (#rrggbb), give or take
// the rounding of a colour conversion.
func countColor(t *testing.T, img image.Image, hex string) int {
	t.Helper()
	want, err := strconv.ParseUint(strings.TrimPrefix(hex, "#"), 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	wr, wg, wb := int(want>>16), int(want>>8&0xff), int(want&0xff)
	near := func(a, b int) bool { return a-b <= 2 && b-a <= 2 }
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(int(r>>8), wr) && near(int(g>>8), wg) && near(int(bl>>8), wb) {
				n++
			}
		}
	}
	return n
}

var resultRE = regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`)

// laidOutText loads a page that inlines svg and, by a script, writes into the
// page the width the browser gave each <text> element whose content is one of
// names (getBBox: zero or absent when it laid nothing out), and under
// "scripts" how many script elements the page holds; chromium --dump-dom
// prints the page as the script left it.
func laidOutText(t *testing.T, chromium string, svg []byte, names []string) map[string][]float64 {
	t.Helper()
	want, err := json.Marshal(names) // escapes <, > and &: safe inside <script>
	if err != nil {
		t.Fatal(err)
	}
	inline := svg
	if i := bytes.Index(inline, []byte("<svg")); i >= 0 {
		inline = inline[i:] // no XML declaration inside HTML
	}
	page := `<!doctype html><html><head><meta charset="utf-8"><title>matrix</title></head><body>` + string(inline) + `
<pre id="result"></pre>
<script>
const out = {};
const texts = Array.from(document.querySelectorAll("svg text"));
for (const name of ` + string(want) + `) {
  out[name] = texts.filter(el => el.textContent === name).map(el => el.getBBox().width);
}
out["scripts"] = [document.querySelectorAll("script").length];
document.getElementById("result").textContent = JSON.stringify(out);
</script></body></html>`
	file := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := runChromium(t, chromium, "--dump-dom", "file://"+file)
	m := resultRE.FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script wrote no result; chromium dumped:\n%s", dom)
	}
	out := map[string][]float64{}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &out); err != nil {
		t.Fatalf("decode the script's result %q: %v", m[1], err)
	}
	return out
}
