package zoneport

import "github.com/prometheus/client_golang/prometheus"

// portMetrics are the zone port's collectors, registered by New.
type portMetrics struct {
	handshakeFailures *prometheus.CounterVec
	handshakes        *prometheus.CounterVec
	bytes             *prometheus.CounterVec
	badFrames         prometheus.Counter
}

func newPortMetrics(reg prometheus.Registerer) *portMetrics {
	m := &portMetrics{
		handshakeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_transport_handshake_failures_total",
			Help: "Zone-port connections closed before authentication completed, by reason.",
		}, []string{"reason"}),
		handshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_transport_handshakes_total",
			Help: "Zone-port connections authenticated, by side (client dialled, server accepted); each costs a TLS handshake and the zone-key proof.",
		}, []string{"side"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_transport_bytes_total",
			Help: "Bytes this member sent and received on the zone port (Raft and peer API, TLS included).",
		}, []string{"direction"}),
		badFrames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgequorum_transport_bad_frames_total",
			Help: "Zone-port connections closed because an authenticated peer sent a malformed frame.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.handshakeFailures, m.handshakes, m.bytes, m.badFrames)
	}
	return m
}
