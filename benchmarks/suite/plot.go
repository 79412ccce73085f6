package suite

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot file names under the output directory.
const (
	PlotDetection = "detection.png"
	PlotBytes     = "bytes.png"
	PlotWrites    = "writes.png"
)

// series is one line of a plot: y by zone size, NaN for missing points.
type series struct {
	label string
	y     func(SizeResult) float64
	color color.Color
	dash  bool
}

var (
	colorOurs       = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorOursAlt    = color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}
	colorOursLead   = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colorBase       = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorBaseAlt    = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colorBaseSilent = color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}
	colorTarget     = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
)

// WritePlots draws detection time, bytes/s and writes/min against zone size.
func WritePlots(dir string, rep *Report) error {
	detection := []series{
		{label: "edgequorum: verdict committed, reset death", y: func(r SizeResult) float64 { return p99(r.Ours.DetectCommit) }, color: colorOursAlt},
		{label: "edgequorum: annotation written, reset death", y: func(r SizeResult) float64 { return p99(r.Ours.DetectAnnot) }, color: colorOurs},
		{label: "edgequorum: annotation written, silent death", y: func(r SizeResult) float64 { return p99(r.Ours.DetectAnnotSilent) }, color: colorOursLead},
		{label: "baseline, same cadence, reset death", y: func(r SizeResult) float64 { return p99(r.Base.DetectAnnot) }, color: colorBase},
		{label: "baseline, same cadence, silent death", y: func(r SizeResult) float64 { return p99(r.Base.DetectAnnotSilent) }, color: colorBaseSilent},
		{label: "target", y: func(SizeResult) float64 { return TargetDetection.Seconds() }, color: colorTarget, dash: true},
	}
	if rep.Config.DefaultsKills > 0 {
		detection = append(detection, series{label: "baseline, SuperEdge defaults", color: colorBaseAlt,
			y: func(r SizeResult) float64 {
				if r.Defaults == nil {
					return math.NaN()
				}
				return p99(r.Defaults.DetectAnnot)
			}})
	}
	if err := linePlot(filepath.Join(dir, PlotDetection), rep, "Node death → unhealthy (p99; below 100 deaths, the maximum)", "seconds", false, detection); err != nil {
		return err
	}
	bytes := []series{
		{label: "edgequorum: zone total", y: func(r SizeResult) float64 { return measured(r.Ours, r.Ours.Steady.ZoneBytes) }, color: colorOurs},
		{label: "edgequorum: leader (sent+recv)", y: func(r SizeResult) float64 { return measured(r.Ours, r.Ours.Steady.LeaderBytes()) }, color: colorOursLead},
		{label: "edgequorum: other node (sent+recv)", y: func(r SizeResult) float64 { return measured(r.Ours, r.Ours.Steady.NodeBytes()) }, color: colorOursAlt},
		{label: "baseline: zone total", y: func(r SizeResult) float64 { return measured(r.Base, r.Base.Steady.ZoneBytes) }, color: colorBase},
		{label: "baseline: node (sent+recv)", y: func(r SizeResult) float64 { return measured(r.Base, r.Base.Steady.NodeBytes()) }, color: colorBaseAlt},
	}
	if err := linePlot(filepath.Join(dir, PlotBytes), rep, "Steady-state traffic", "bytes/s (log)", true, bytes); err != nil {
		return err
	}
	writes := []series{
		{label: "edgequorum: steady", y: func(r SizeResult) float64 { return measured(r.Ours, r.Ours.Steady.WritesPerMinute()) }, color: colorOurs},
		{label: "edgequorum: while nodes die", y: func(r SizeResult) float64 { return measured(r.Ours, r.Ours.Churn.WritesPerMinute()) }, color: colorOursAlt},
		{label: "baseline: steady", y: func(r SizeResult) float64 { return measured(r.Base, r.Base.Steady.WritesPerMinute()) }, color: colorBase},
		{label: "baseline: while nodes die", y: func(r SizeResult) float64 { return measured(r.Base, r.Base.Churn.WritesPerMinute()) }, color: colorBaseAlt},
	}
	return linePlot(filepath.Join(dir, PlotWrites), rep, "apiserver write requests per zone (0 drawn at 0.1)", "writes/min (log)", true, writes)
}

// linePlot draws series against zone size on a log2 x axis.
func linePlot(path string, rep *Report, title, ylabel string, logY bool, ss []series) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "zone size N"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, r := range rep.Sizes {
		ticks = append(ticks, plot.Tick{Value: float64(r.N), Label: strconv.Itoa(r.N)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = 0
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	drawn := 0
	for _, s := range ss {
		var pts plotter.XYs
		for _, r := range rep.Sizes {
			y := s.y(r)
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			if logY && y <= 0.1 {
				y = 0.1
			}
			pts = append(pts, plotter.XY{X: float64(r.N), Y: y})
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.label, err)
		}
		line.Color, points.Color = s.color, s.color
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		if s.dash {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			points.Radius = 0
		}
		p.Add(line, points)
		p.Legend.Add(s.label, line, points)
		drawn++
	}
	if len(rep.Sizes) > 0 {
		// Fixed ranges keep log axes valid whatever data is missing.
		p.X.Min, p.X.Max = float64(rep.Sizes[0].N)*0.9, float64(rep.Sizes[len(rep.Sizes)-1].N)*1.1
	}
	if drawn == 0 || (logY && p.Y.Min <= 0) {
		p.Y.Min = 0.1
	}
	if p.Y.Max <= p.Y.Min {
		p.Y.Max = math.Max(p.Y.Min*10, 1)
	}
	// Headroom above the data for the legend, which sits top left.
	if logY {
		p.Y.Max *= 10
	} else {
		p.Y.Max *= 1.4
	}
	if err := p.Save(7*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// measured hides the zeros of a phase that never ran behind NaN.
func measured(s System, v float64) float64 {
	if !s.Ran || s.Steady.Members == 0 {
		return math.NaN()
	}
	return v
}
