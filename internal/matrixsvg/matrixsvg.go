// Package matrixsvg draws a zone's opinion matrix (raftzone.MatrixView) as an
// SVG heatmap an operator opens in a browser: rows are checkers, columns
// targets, a cell's colour what the checker's committed opinion counts for,
// its tooltip the score, latency and age, and each node's verdict beside its
// row. The agent's status server and `edgequorum status --matrix` both draw
// with it, so the picture is the same whichever way it was asked for.
//
// It is a pure function of the view. Node names are hostile input as far as
// it cares: every name and string of the view is XML-escaped.
package matrixsvg

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// The cell colours. Tests find cells in a screenshot by them, so they appear
// nowhere else in the picture but in the legend's swatches.
const (
	ColorReached = "#2ca02c"
	ColorFailed  = "#d62728"
	ColorStale   = "#9e9e9e"
	ColorNone    = "#ffffff"
	// ColorSelf fills the diagonal: a node never judges itself.
	ColorSelf = "#ececec"
)

// verdictStyle is the badge of a verdict: a light fill and a dark text of its
// hue, so that the cell colours stay the only full-strength ones.
var verdictStyle = map[zone.State]struct{ fill, text string }{
	zone.Healthy:   {"#dcf2dc", "#1a6b1a"},
	zone.Unhealthy: {"#f9dcdc", "#8e1b1b"},
	zone.Unknown:   {"#eeeeee", "#555555"},
}

var cellFill = map[raftzone.CellState]string{
	raftzone.CellReached: ColorReached,
	raftzone.CellFailed:  ColorFailed,
	raftzone.CellStale:   ColorStale,
	raftzone.CellNone:    ColorNone,
}

// maxLabel is the longest node name drawn in full; a longer one is cut, with
// the whole name in its tooltip. Node names may be 253 characters long, which
// would push the grid off any screen.
const maxLabel = 40

// CellSize is the side in pixels of one cell in a picture of n members: large
// enough to click and read at a handful, small enough that a zone of 129 fits
// a wide screen, with its labels still at a readable 10px.
func CellSize(n int) int {
	return clamp(840/max(n, 1), 14, 32)
}

func fontSize(cell int) int { return clamp(cell-4, 10, 13) }

// textWidth estimates the drawn width of s at size px in a sans-serif font,
// generously, since the browser's font is not known here.
func textWidth(s string, px int) int {
	return (utf8.RuneCountInString(s)*px*62 + 99) / 100
}

// Write draws v as a standalone SVG document to w.
func Write(w io.Writer, v raftzone.MatrixView) error {
	var b bytes.Buffer
	draw(&b, v)
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write matrix picture: %w", err)
	}
	return nil
}

func draw(b *bytes.Buffer, v raftzone.MatrixView) {
	const (
		margin  = 16
		headerH = 64
		legendH = 74
		gap     = 8
	)
	n := len(v.Members)
	cell := CellSize(n)
	font := fontSize(cell)
	labels := make([]string, n)
	labelW := textWidth("checker ↓", font)
	for i, m := range v.Members {
		labels[i] = label(m)
		labelW = max(labelW, textWidth(labels[i], font))
	}
	labelW += gap
	colLabelH := max(labelW, 2*font+3*gap)
	gridX, gridY := margin+labelW, margin+headerH+colLabelH
	gridW := n * cell
	verdictX := gridX + gridW + gap
	verdictW := textWidth("unhealthy", font) + 2*gap

	vt := secondsString(v.VoteTimeoutSeconds)
	title := "zone " + v.Zone + ": who sees whom"
	leader := "no leader known"
	if v.Leader != "" {
		leader = "leader " + v.Leader
	}
	sub := fmt.Sprintf("term %d · %s · seen from %s at %s", v.Term, leader, v.Node, v.At.UTC().Format(time.RFC3339))
	note := "rows: the checker's committed opinion of each target; a cell goes stale when its checker's last report is older than " + vt
	if v.Partial {
		note = "partial: this spare's view holds its own row only; the leader's view (--leader) holds every row"
	}
	legend := []struct{ fill, text string }{
		{ColorReached, "reached"}, {ColorFailed, "failed"}, {ColorStale, "stale (report older than " + vt + ")"},
		{ColorNone, "no opinion"}, {ColorSelf, "itself"},
	}
	legendW := 0
	for _, l := range legend {
		legendW += 14 + 6 + textWidth(l.text, 12) + 18
	}
	width := max(verdictX+verdictW, margin+textWidth(title, 18), margin+textWidth(sub, 12),
		margin+textWidth(note, 12), margin+legendW) + margin
	height := gridY + n*cell + gap + legendH + margin

	fmt.Fprintf(b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Liberation Sans, Arial, sans-serif">`+"\n",
		width, height, width, height)
	fmt.Fprintf(b, "<title>%s</title>\n", esc(title+", "+sub))
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="18" font-weight="bold" fill="#222222">%s</text>`+"\n", margin, margin+18, esc(title))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" fill="#333333">%s</text>`+"\n", margin, margin+38, esc(sub))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" fill="#555555">%s</text>`+"\n", margin, margin+56, esc(note))

	// Axis captions in the corner the labels leave free.
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="%d" fill="#555555" text-anchor="end">checker ↓</text>`+"\n", gridX-gap, gridY-4, font)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="%d" fill="#555555" text-anchor="end">target →</text>`+"\n", gridX-gap, gridY-4-font-4, font)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="%d" fill="#555555">verdict</text>`+"\n", verdictX, gridY-4, font)

	// Column labels, read bottom to top above their column.
	b.WriteString(`<g class="targets" font-size="` + fmt.Sprint(font) + `" fill="#222222">` + "\n")
	for j, m := range v.Members {
		x, y := gridX+j*cell+cell/2+font*35/100, gridY-gap
		fmt.Fprintf(b, `<g><title>%s</title><text transform="translate(%d %d) rotate(-90)">%s</text></g>`+"\n", esc(m), x, y, esc(labels[j]))
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="checkers" font-size="` + fmt.Sprint(font) + `" fill="#222222" text-anchor="end">` + "\n")
	for i, m := range v.Members {
		y := gridY + i*cell + cell/2 + font*35/100
		fmt.Fprintf(b, `<g><title>%s</title><text x="%d" y="%d">%s</text></g>`+"\n", esc(m), gridX-gap, y, esc(labels[i]))
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="cells" stroke="#d0d0d0" stroke-width="1">` + "\n")
	for i, row := range v.Rows {
		if i >= n {
			break
		}
		for j, c := range row.Cells {
			if j >= n {
				break
			}
			fill, ok := cellFill[c.State]
			if !ok {
				fill = ColorNone
			}
			if v.Members[j] == row.Checker {
				fill = ColorSelf
			}
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				gridX+j*cell, gridY+i*cell, cell, cell, fill, esc(cellTip(v, row, v.Members[j], c)))
		}
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="verdicts" font-size="` + fmt.Sprint(font) + `">` + "\n")
	for i, row := range v.Rows {
		if i >= n {
			break
		}
		st, ok := verdictStyle[row.Verdict]
		if !ok {
			st = verdictStyle[zone.Unknown]
		}
		y := gridY + i*cell
		tip := fmt.Sprintf("%s is %s (%d pros, %d cons)", row.Checker, row.Verdict, row.Pros, row.Cons)
		fmt.Fprintf(b, `<g><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="3" fill="%s"/><text x="%d" y="%d" fill="%s">%s</text></g>`+"\n",
			esc(tip), verdictX, y+1, verdictW, cell-2, st.fill, verdictX+gap, y+cell/2+font*35/100, st.text, esc(string(row.Verdict)))
	}
	b.WriteString("</g>\n")

	ly := gridY + n*cell + gap + 10
	b.WriteString(`<g class="legend" font-size="12" fill="#222222">` + "\n")
	x := margin
	for _, l := range legend {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="14" fill="%s" stroke="#d0d0d0"/><text x="%d" y="%d">%s</text>`+"\n",
			x, ly, l.fill, x+20, ly+11, esc(l.text))
		x += 14 + 6 + textWidth(l.text, 12) + 18
	}
	x = margin
	for _, s := range []zone.State{zone.Healthy, zone.Unhealthy, zone.Unknown} {
		st := verdictStyle[s]
		w := textWidth(string(s), 12) + 2*gap
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="18" rx="3" fill="%s"/><text x="%d" y="%d" fill="%s">%s</text>`+"\n",
			x, ly+24, w, st.fill, x+gap, ly+37, st.text, esc(string(s)))
		x += w + 12
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555555">the zone's committed verdict on each checker</text>`+"\n", x, ly+37)
	b.WriteString("</g>\n</svg>\n")
}

// cellTip is a cell's tooltip: whose opinion of whom, what it counts for, and
// the numbers behind it.
func cellTip(v raftzone.MatrixView, row raftzone.MatrixRow, target string, c raftzone.MatrixCell) string {
	if target == row.Checker {
		return row.Checker + ": a node never judges itself"
	}
	if c.State == raftzone.CellNone {
		return row.Checker + " has no committed opinion of " + target
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s → %s: %s", row.Checker, target, c.State)
	if c.State == raftzone.CellStale {
		if c.OK {
			b.WriteString(" (was reached)")
		} else {
			b.WriteString(" (was failed)")
		}
	}
	fmt.Fprintf(&b, " · score %g · latency %s", c.Score, latencyString(c.LatencySeconds))
	if c.AgeSeconds != nil {
		fmt.Fprintf(&b, " · last report %s ago", durationString(*c.AgeSeconds))
	} else {
		b.WriteString(" · no report committed")
	}
	if c.SinceSeconds != nil {
		fmt.Fprintf(&b, " · held for %s", durationString(*c.SinceSeconds))
	}
	if c.State == raftzone.CellStale {
		fmt.Fprintf(&b, " · stale after %s", secondsString(v.VoteTimeoutSeconds))
	}
	return b.String()
}

// label is the drawn form of a node name: cut at maxLabel runes.
func label(name string) string {
	if utf8.RuneCountInString(name) <= maxLabel {
		return name
	}
	r := []rune(name)
	return string(r[:maxLabel-1]) + "…"
}

// esc escapes s for XML text and double-quoted attributes; characters XML
// cannot carry become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

func durationString(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Second && d > -time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second && d > -10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// latencyString keeps a LAN's sub-millisecond latencies visible.
func latencyString(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func secondsString(sec float64) string {
	return time.Duration(sec * float64(time.Second)).Round(time.Millisecond).String()
}

func clamp(x, lo, hi int) int { return min(max(x, lo), hi) }
