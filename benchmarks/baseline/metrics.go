package baseline

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metric names the harness scrapes. They mirror edgequorum's so the two are
// counted the same way: bytes at the connection layer, TLS-free here because
// SuperEdge's exchange is plain HTTP.
const (
	MetricBytes    = "edgehealth_transport_bytes_total"
	MetricRequests = "edgehealth_exchange_requests_total"
	MetricWrites   = "edgehealth_node_writes_total"
)

type metrics struct {
	bytes    *prometheus.CounterVec
	requests *prometheus.CounterVec
	writes   *prometheus.CounterVec
	rejected prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytes,
			Help: "Bytes sent and received on exchange connections (HTTP included), both as client and as server.",
		}, []string{"direction"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "Exchange PUTs sent (out, every try) and served (in).",
		}, []string{"direction"}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricWrites,
			Help: "Node Updates this daemon made for its votes, by result.",
		}, []string{"result"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgehealth_exchange_rejected_total",
			Help: "Exchange messages refused for a bad HMAC.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.bytes, m.requests, m.writes, m.rejected)
	}
	return m
}
