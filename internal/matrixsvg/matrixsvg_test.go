package matrixsvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// testView is a zone of n whose last member is dead: every other member
// fails it, its own row is stale, and it is judged unhealthy.
func testView(names ...string) raftzone.MatrixView {
	age, since := 1.5, 42.0
	v := raftzone.MatrixView{Zone: "edge-a", Node: names[0], Term: 7, Leader: names[0],
		At: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), VoteTimeoutSeconds: 17, Members: names}
	last := len(names) - 1
	for i, checker := range names {
		row := raftzone.MatrixRow{Checker: checker, Verdict: zone.Healthy, Pros: len(names) - 2}
		for j := range names {
			c := raftzone.MatrixCell{State: raftzone.CellReached, OK: true, Score: 100, LatencySeconds: 0.0021, AgeSeconds: &age, SinceSeconds: &since}
			switch {
			case i == j:
				c = raftzone.MatrixCell{State: raftzone.CellNone}
			case i == last:
				c.State = raftzone.CellStale
			case j == last:
				c.State, c.OK, c.Score = raftzone.CellFailed, false, 0
			}
			row.Cells = append(row.Cells, c)
		}
		if i == last {
			row.Verdict, row.Pros, row.Cons = zone.Unhealthy, 0, len(names)-1
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func nodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%03d", i+1)
	}
	return out
}

// element is one element of a decoded picture: its name, attributes, text,
// and its tooltip: the <title> it holds, or for a <text> the one its <g>
// holds.
type element struct {
	name   string
	attr   map[string]string
	text   string
	title  string
	parent *element
}

// decode parses svg with encoding/xml, failing the test on anything that is
// not well-formed, and returns its elements in document order.
func decode(t *testing.T, svg []byte) []*element {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Strict = true
	var out []*element
	var open *element
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the picture is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{name: tok.Name.Local, attr: map[string]string{}, parent: open}
			for _, a := range tok.Attr {
				e.attr[a.Name.Local] = a.Value
			}
			out = append(out, e)
			open = e
		case xml.EndElement:
			if open.name == "title" && open.parent != nil {
				open.parent.title = open.text
			}
			open = open.parent
		case xml.CharData:
			if open != nil {
				open.text += string(tok)
			}
		}
	}
	if open != nil {
		t.Fatalf("element <%s> left open", open.name)
	}
	for _, e := range out {
		if e.name == "text" && e.title == "" && e.parent != nil {
			e.title = e.parent.title
		}
	}
	return out
}

func texts(els []*element) map[string]int {
	out := map[string]int{}
	for _, e := range els {
		if e.name == "text" {
			out[e.text]++
		}
	}
	return out
}

// TestPictureNamesEveryNodeAndColoursEveryCell: the picture is well-formed,
// names every node beside its row and above its column, gives each cell the
// colour of its state with a tooltip of its numbers, shows each node's verdict,
// and says whose view of which zone it is.
func TestPictureNamesEveryNodeAndColoursEveryCell(t *testing.T) {
	v := testView(nodeNames(4)...)
	var b bytes.Buffer
	if err := Write(&b, v); err != nil {
		t.Fatal(err)
	}
	els := decode(t, b.Bytes())
	got := texts(els)
	for _, n := range v.Members {
		if got[n] != 2 {
			t.Errorf("node %s named by %d texts, want 2 (its row and its column)", n, got[n])
		}
	}
	if got["unhealthy"] < 1 || got["healthy"] < 3 {
		t.Errorf("verdicts: %d healthy, %d unhealthy texts; want the 3 healthy and 1 unhealthy rows", got["healthy"], got["unhealthy"])
	}
	all := b.String()
	for _, want := range []string{"zone edge-a", "term 7", "leader node-001", "seen from node-001", "2025-03-01T12:00:00Z", "older than 17s"} {
		if !strings.Contains(all, want) {
			t.Errorf("the picture does not say %q", want)
		}
	}
	fills := map[string]int{}
	var tips []string
	for _, e := range els {
		if e.name == "rect" && (strings.Contains(e.title, "→") || strings.Contains(e.title, "judges itself")) {
			fills[e.attr["fill"]]++
			tips = append(tips, e.title)
		}
	}
	// 4 members: 3 reached + 3 failed among the live rows (each fails the
	// dead one, reaches the 2 others: 6 reached, 3 failed), 3 stale, 4 self.
	for fill, want := range map[string]int{ColorReached: 6, ColorFailed: 3, ColorStale: 3, ColorSelf: 4} {
		if fills[fill] != want {
			t.Errorf("%d cells filled %s, want %d (all fills: %v)", fills[fill], fill, want, fills)
		}
	}
	tip := strings.Join(tips, "\n")
	for _, want := range []string{
		"node-001 → node-002: reached · score 100 · latency 2.1ms · last report 1.5s ago · held for 42s",
		"node-001 → node-004: failed · score 0",
		"node-004 → node-001: stale (was reached) · score 100",
		"stale after 17s",
		"node-003: a node never judges itself",
	} {
		if !strings.Contains(tip, want) {
			t.Errorf("no tooltip says %q; tooltips:\n%s", want, tip)
		}
	}
}

// TestPictureEscapesNames: node names are hostile input. A name with every
// XML metacharacter comes back from an XML parser exactly as it was, nothing
// of it is markup, and a character XML cannot carry does not break the
// document.
func TestPictureEscapesNames(t *testing.T) {
	hostile := []string{`a<b&"c`, `d'e>f`, "g\x00h", `x"><script>var owned=1</script>`}
	v := testView(hostile...)
	v.Zone = `zone</text><script>`
	var b bytes.Buffer
	if err := Write(&b, v); err != nil {
		t.Fatal(err)
	}
	els := decode(t, b.Bytes())
	got := texts(els)
	for _, n := range []string{`a<b&"c`, `d'e>f`, `x"><script>var owned=1</script>`} {
		if got[n] != 2 {
			t.Errorf("name %q drawn by %d texts, want 2", n, got[n])
		}
	}
	if got["g\uFFFDh"] != 2 {
		t.Errorf("a name with a NUL: %v, want it drawn with U+FFFD", got)
	}
	for _, e := range els {
		if e.name == "script" {
			t.Fatalf("the picture holds a <script> element: names became markup")
		}
	}
	if bytes.Contains(b.Bytes(), []byte("a<b")) || bytes.Contains(b.Bytes(), []byte(`"><script`)) {
		t.Error("a name went into the document unescaped")
	}
}

// TestPictureScalesWithTheZone: the grid grows with the zone, cells shrink to
// a floor that keeps a zone of 129 on a wide screen, and no text is smaller
// than 10px at any size; a name too long to draw is cut, whole in its
// tooltip.
func TestPictureScalesWithTheZone(t *testing.T) {
	size := func(n int) (w, h, minFont int) {
		var b bytes.Buffer
		if err := Write(&b, testView(nodeNames(n)...)); err != nil {
			t.Fatal(err)
		}
		els := decode(t, b.Bytes())
		w, _ = strconv.Atoi(els[0].attr["width"])
		h, _ = strconv.Atoi(els[0].attr["height"])
		minFont = 1000
		for _, e := range els {
			if f, ok := e.attr["font-size"]; ok {
				px, _ := strconv.Atoi(f)
				minFont = min(minFont, px)
			}
		}
		cells := 0
		for _, e := range els {
			if e.name == "rect" && strings.Contains(e.title, "→") {
				cells++
			}
		}
		if want := n * (n - 1); cells != want {
			t.Errorf("zone of %d: %d cells with a tooltip, want %d", n, cells, want)
		}
		return w, h, minFont
	}
	w3, h3, f3 := size(3)
	w129, h129, f129 := size(129)
	if CellSize(3) <= CellSize(129) || w129 <= w3 || h129 <= h3 {
		t.Errorf("cells %dpx at 3 and %dpx at 129; picture %dx%d at 3, %dx%d at 129: want larger cells and a smaller picture at 3",
			CellSize(3), CellSize(129), w3, h3, w129, h129)
	}
	if f3 < 10 || f129 < 10 {
		t.Errorf("smallest text %dpx at 3, %dpx at 129; want 10px at least", f3, f129)
	}
	if w129 > 2600 || h129 > 2600 {
		t.Errorf("a zone of 129 drawn %dx%d: too large for a screen", w129, h129)
	}
	long := strings.Repeat("n", 60)
	var b bytes.Buffer
	if err := Write(&b, testView("a", long)); err != nil {
		t.Fatal(err)
	}
	els := decode(t, b.Bytes())
	cut := strings.Repeat("n", maxLabel-1) + "…"
	if got := texts(els); got[cut] != 2 || got[long] != 0 {
		t.Errorf("a name of 60 drawn as %v, want it cut to %d", got, maxLabel)
	}
	found := false
	for _, e := range els {
		if e.name == "text" && e.text == cut && e.title == long {
			found = true
		}
	}
	if !found {
		t.Error("a cut name does not carry the whole name in its tooltip")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteSaysWhatFailed: a failed write is an error that says so.
func TestWriteSaysWhatFailed(t *testing.T) {
	err := Write(failingWriter{}, testView("a", "b"))
	if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), "matrix picture") {
		t.Errorf("Write to a failing writer = %v, want an error naming the picture and the cause", err)
	}
}
