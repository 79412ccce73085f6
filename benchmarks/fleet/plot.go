package fleet

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// PlotWrites is the plot's file name under the results directory.
const PlotWrites = "fleet-writes.png"

// WritePlot draws the steady writes per second by source, stacked, one bar
// per fleet size, into path.
func WritePlot(path string, rs []Result) error {
	if len(rs) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = "Steady writes to the apiserver by source (3-node sites)"
	p.Y.Label.Text = "writes per second (fleet time)"
	p.X.Label.Text = "sites"
	layers := []struct {
		label string
		y     func(Result) float64
		color color.Color
	}{
		{"kubelets: node Leases", Result.kubeletLeaseWrites, color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}},
		{"kubelets: status", func(r Result) float64 { return r.rate(whoKubelet, kindWrite, "nodes/status") }, color.RGBA{R: 0x88, G: 0x88, B: 0x88, A: 0xff}},
		{"controller manager", func(r Result) float64 { return r.rate(whoKCM, kindWrite) }, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
		{"edgequorum webhook", Result.webhookWrites, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}},
		{"edgequorum agents", Result.edgequorumWrites, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	}
	var below *plotter.BarChart
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = fmt.Sprint(r.Sites)
	}
	for _, l := range layers {
		vals := make(plotter.Values, len(rs))
		for i, r := range rs {
			vals[i] = l.y(r)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(40))
		if err != nil {
			return fmt.Errorf("plot %s: %w", l.label, err)
		}
		bars.Color = l.color
		bars.LineStyle.Width = 0
		if below != nil {
			bars.StackOn(below)
		}
		below = bars
		p.Add(bars)
		p.Legend.Add(l.label, bars)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names...)
	// Room left of the first bar for the legend.
	p.X.Min, p.X.Max = -1.6, float64(len(rs))-0.5
	if err := p.Save(6*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
