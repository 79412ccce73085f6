package probe

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// metrics are the Manager's Prometheus collectors. Each Manager builds its own;
// when a registry already holds collectors of the same name (two Managers in one
// process, as in tests) the Manager adopts the registered ones instead of failing,
// so both count into the same series.
type metrics struct {
	results       *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	confirmations *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, specs []Spec) (*metrics, error) {
	m := &metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum",
			Subsystem: "probe",
			Name:      "results_total",
			Help:      "Raw probe results by probe kind and outcome (success, failure, unknown), before thresholds.",
		}, []string{"kind", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "edgequorum",
			Subsystem: "probe",
			Name:      "duration_seconds",
			Help:      "Time one probe took, by probe kind, including probes that failed or timed out.",
			Buckets:   prometheus.DefBuckets,
		}, []string{"kind"}),
		confirmations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "edgequorum",
			Subsystem: "probe",
			Name:      "confirmations_total",
			Help:      "Confirmations of a failed probe by fresh connections to the peer's kubelet port, by outcome: silent (none answered: the peer is judged failed at once), answered (the box answered one: the thresholds judge), inconclusive (a local error).",
		}, []string{"outcome"}),
	}
	if reg != nil {
		var err error
		if m.results, err = register(reg, m.results); err != nil {
			return nil, err
		}
		if m.duration, err = register(reg, m.duration); err != nil {
			return nil, err
		}
		if m.confirmations, err = register(reg, m.confirmations); err != nil {
			return nil, err
		}
	}
	// Create the series of every configured kind up front, so that a
	// dashboard shows zero failures rather than no data.
	for _, o := range []string{confirmSilent, confirmAnswered, confirmInconclusive} {
		m.confirmations.WithLabelValues(o)
	}
	for _, s := range specs {
		for _, r := range []Result{Success, Failure, Unknown} {
			m.results.WithLabelValues(string(s.Kind), r.String())
		}
		m.duration.WithLabelValues(string(s.Kind))
	}
	return m, nil
}

// register is promutil.Register with the package named in the error.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	c, err := promutil.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("register probe metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) observe(kind Kind, r Result, took time.Duration) {
	m.results.WithLabelValues(string(kind), r.String()).Inc()
	m.duration.WithLabelValues(string(kind)).Observe(took.Seconds())
}
