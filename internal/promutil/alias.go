package promutil

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// AliasRemovedIn is the release that drops the deprecated names Alias exports.
const AliasRemovedIn = "v0.4"

// Alias returns a collector that re-exports every sample c exports as newName
// under oldName as well, for dashboards written against a name a release
// renamed. Each scrape reads c afresh, so the old series always carry the new
// one's values and labels (const labels become ordinary ones); the help text is
// c's, prefixed "Deprecated: use <newName>; removed in <AliasRemovedIn>. ".
//
// Counters, gauges, untyped metrics, summaries and classic histograms are
// re-exported. A native histogram is refused: the scrape that meets one reports
// an error for the alias instead of exporting half of it.
//
// Register the alias next to c; it does not register c. The alias describes
// no metrics (the label names of the old series are only known when c is
// read), so the registry treats it as unchecked: register it once. Registering
// it fails when c cannot be read on its own or does not describe newName, so a
// typo in a name cannot silently export nothing.
func Alias(c prometheus.Collector, oldName, newName string) prometheus.Collector {
	a := &alias{
		src:     prometheus.NewRegistry(),
		oldName: oldName,
		newName: newName,
		// The desc Collect reports a failed read with.
		errDesc: prometheus.NewDesc(oldName, "Deprecated alias of "+newName+".", nil, nil),
	}
	a.err = a.init(c)
	return a
}

type alias struct {
	// src holds only c, so that gathering it yields c's families with their
	// names, help and types, which a prometheus.Metric does not expose.
	src              *prometheus.Registry
	oldName, newName string
	errDesc          *prometheus.Desc
	err              error
}

func (a *alias) init(c prometheus.Collector) error {
	if a.oldName == a.newName {
		return fmt.Errorf("alias %s: old and new names are the same", a.oldName)
	}
	if err := a.errDesc.Err(); err != nil { // NewDesc validated the old name
		return fmt.Errorf("alias %s: %w", a.oldName, err)
	}
	if err := a.src.Register(c); err != nil {
		return fmt.Errorf("alias %s of %s: %w", a.oldName, a.newName, err)
	}
	// Desc has no accessor for its name, only String, which quotes it.
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	want := fmt.Sprintf("fqName: %q,", a.newName)
	found := false
	for d := range descs {
		if strings.Contains(d.String(), want) {
			found = true
		}
	}
	if !found {
		return fmt.Errorf("alias %s: the collector does not describe %s", a.oldName, a.newName)
	}
	return nil
}

// Describe sends nothing, which makes the alias an unchecked collector, or an
// invalid desc when Alias was given bad arguments, which fails registration.
func (a *alias) Describe(ch chan<- *prometheus.Desc) {
	if a.err != nil {
		ch <- prometheus.NewInvalidDesc(a.err)
	}
}

func (a *alias) Collect(ch chan<- prometheus.Metric) {
	if a.err != nil {
		ch <- prometheus.NewInvalidMetric(a.errDesc, a.err)
		return
	}
	families, err := a.src.Gather()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(a.errDesc, fmt.Errorf("alias %s: reading %s: %w", a.oldName, a.newName, err))
		return
	}
	for _, f := range families {
		if f.GetName() != a.newName {
			continue
		}
		help := "Deprecated: use " + a.newName + "; removed in " + AliasRemovedIn + ". " + f.GetHelp()
		for _, m := range f.GetMetric() {
			ch <- a.metric(f.GetType(), help, m)
		}
	}
}

// metric is m under the old name, or an invalid metric saying why not.
func (a *alias) metric(typ dto.MetricType, help string, m *dto.Metric) prometheus.Metric {
	names := make([]string, 0, len(m.GetLabel()))
	values := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		names = append(names, l.GetName())
		values = append(values, l.GetValue())
	}
	desc := prometheus.NewDesc(a.oldName, help, names, nil)
	var (
		out prometheus.Metric
		err error
	)
	switch typ {
	case dto.MetricType_COUNTER:
		out, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, m.GetCounter().GetValue(), values...)
	case dto.MetricType_GAUGE:
		out, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.GetGauge().GetValue(), values...)
	case dto.MetricType_UNTYPED:
		out, err = prometheus.NewConstMetric(desc, prometheus.UntypedValue, m.GetUntyped().GetValue(), values...)
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		q := make(map[float64]float64, len(s.GetQuantile()))
		for _, x := range s.GetQuantile() {
			q[x.GetQuantile()] = x.GetValue()
		}
		out, err = prometheus.NewConstSummary(desc, s.GetSampleCount(), s.GetSampleSum(), q, values...)
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		if h.Schema != nil {
			err = fmt.Errorf("alias %s: %s is a native histogram, which an alias cannot re-export", a.oldName, a.newName)
			break
		}
		b := make(map[float64]uint64, len(h.GetBucket()))
		for _, x := range h.GetBucket() {
			b[x.GetUpperBound()] = x.GetCumulativeCount()
		}
		out, err = prometheus.NewConstHistogram(desc, h.GetSampleCount(), h.GetSampleSum(), b, values...)
	default:
		err = fmt.Errorf("alias %s: %s has type %s, which an alias cannot re-export", a.oldName, a.newName, typ)
	}
	if err != nil {
		return prometheus.NewInvalidMetric(a.errDesc, err)
	}
	if m.TimestampMs != nil {
		out = prometheus.NewMetricWithTimestamp(time.UnixMilli(m.GetTimestampMs()), out)
	}
	return out
}
