// Package scrape reads a process's Prometheus /metrics into flat samples the
// suite can subtract and sum. It is the only way the suite looks inside an
// agent: by the same endpoint an operator's Prometheus would use.
package scrape

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/edgequorum/edgequorum/benchmarks/internal/stats"
)

// Series is one counter or gauge value, or one histogram bucket (Labels then
// hold "le").
type Series struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Sample is everything one scrape returned.
type Sample struct {
	At     time.Time
	Series []Series
}

var client = &http.Client{Timeout: 5 * time.Second}

// Fetch scrapes url.
func Fetch(ctx context.Context, url string) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		return Sample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	s.At = time.Now()
	return s, nil
}

// Parse reads the Prometheus text format.
func Parse(r io.Reader) (Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, fmt.Errorf("parse metrics: %w", err)
	}
	var s Sample
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			s.Series = append(s.Series, flatten(name, labels, m)...)
		}
	}
	return s, nil
}

func flatten(name string, labels map[string]string, m *dto.Metric) []Series {
	switch {
	case m.Counter != nil:
		return []Series{{name, labels, m.GetCounter().GetValue()}}
	case m.Gauge != nil:
		return []Series{{name, labels, m.GetGauge().GetValue()}}
	case m.Untyped != nil:
		return []Series{{name, labels, m.GetUntyped().GetValue()}}
	case m.Histogram != nil:
		var out []Series
		hasInf := false
		for _, b := range m.GetHistogram().GetBucket() {
			l := maps.Clone(labels)
			if math.IsInf(b.GetUpperBound(), 1) {
				hasInf = true
				l["le"] = "+Inf"
			} else {
				l["le"] = fmt.Sprint(b.GetUpperBound())
			}
			out = append(out, Series{name + "_bucket", l, float64(b.GetCumulativeCount())})
		}
		// The exposition format may leave +Inf implicit: it is the count.
		if !hasInf {
			l := maps.Clone(labels)
			l["le"] = "+Inf"
			out = append(out, Series{name + "_bucket", l, float64(m.GetHistogram().GetSampleCount())})
		}
		return out
	}
	return nil
}

// Sum adds every series of name whose labels include match.
func (s Sample) Sum(name string, match map[string]string) float64 {
	var sum float64
	for _, x := range s.Series {
		if x.Name == name && matches(x.Labels, match) {
			sum += x.Value
		}
	}
	return sum
}

// Buckets returns the histogram name's cumulative buckets for the series
// whose labels include match, summed across any other labels.
func (s Sample) Buckets(name string, match map[string]string) []stats.Bucket {
	byBound := map[float64]float64{}
	for _, x := range s.Series {
		if x.Name != name+"_bucket" || !matches(x.Labels, match) {
			continue
		}
		le := x.Labels["le"]
		bound := math.Inf(1)
		if le != "+Inf" {
			if _, err := fmt.Sscan(le, &bound); err != nil {
				continue
			}
		}
		byBound[bound] += x.Value
	}
	out := make([]stats.Bucket, 0, len(byBound))
	for _, b := range slices.Sorted(maps.Keys(byBound)) {
		out = append(out, stats.Bucket{UpperBound: b, Count: byBound[b]})
	}
	return out
}

func matches(labels, match map[string]string) bool {
	for k, v := range match {
		if strings.Compare(labels[k], v) != 0 {
			return false
		}
	}
	return true
}
