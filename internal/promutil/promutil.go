// Package promutil holds the Prometheus helpers several packages need:
// registering a collector once, counting the bytes a connection carries, and
// serving a registry gzipped at a small agent's memory cost (Handler).
package promutil

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c, or returns the equivalent collector already
// registered, so that two components sharing a registry (tests, an agent
// restarting a subsystem) reuse one set of series instead of panicking.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, err
}
