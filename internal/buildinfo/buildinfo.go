// Package buildinfo says which build of edgequorum is running. The Makefile
// stamps the version and revision at link time (-X), so an operator can match a
// running agent, its image tag and the manifests that name it; a plain `go build`
// reports the version it was stamped with in this file's defaults.
package buildinfo

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Set by the linker: -X github.com/edgequorum/edgequorum/internal/buildinfo.version=v0.3.0
var (
	version  = "v0.0.0-dev"
	revision = "unknown"
)

// Version is the semver version of this build, the tag its image carries.
func Version() string { return version }

// Revision is the source revision (a git commit, "-dirty" when built from a
// changed tree) this build was made from.
func Revision() string { return revision }

// GoVersion is the Go release that compiled this build; it decides the
// runtime's behaviour (GC, TLS defaults) as much as our own code does.
func GoVersion() string { return runtime.Version() }

// String is the one line `edgequorum version` prints.
func String() string {
	return fmt.Sprintf("edgequorum %s (revision %s, %s, %s/%s)", version, revision, GoVersion(), runtime.GOOS, runtime.GOARCH)
}

// Collector exports edgequorum_build_info{version,revision,goversion} 1, the
// usual Prometheus way to join a build's identity onto its other series.
//
// It is the one metric not named edgequorum_<subsystem>_…, on purpose: it
// follows the <program>_build_info convention of go_build_info and
// prometheus_build_info, which dashboards join on.
func Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "edgequorum_build_info",
		Help: "Always 1; the labels say which build of edgequorum is running.",
		ConstLabels: prometheus.Labels{
			"version":   version,
			"revision":  revision,
			"goversion": GoVersion(),
		},
	})
	g.Set(1)
	return g
}

// NewRegistry returns the registry every edgequorum daemon serves on /metrics:
// the Go runtime's and the process's series and the build's identity, so each
// dashboard can tell which version behaves how.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), Collector())
	return reg
}
