package probe

// Result is the outcome of one probe, and also the thresholded state of a probe
// after the worker has applied its success and failure thresholds. The zero value
// is Unknown so that a probe that has produced no evidence is never mistaken for a
// healthy or a dead one.
type Result int

const (
	// Unknown means the prober could not tell (it failed on our side, for
	// example it could not build the request). As a raw result it counts
	// toward neither threshold; as a state it means no threshold has been met
	// yet.
	Unknown Result = iota
	// Success means the target answered as a healthy target should.
	Success
	// Failure means the target did not answer, answered too late, or answered
	// that it is unhealthy.
	Failure
)

// String returns the lower-case word used in logs and in the outcome label of
// the edgequorum_probe_results_total metric.
func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Failure:
		return "failure"
	default:
		return "unknown"
	}
}

// valid reports whether r is one of the three defined results, so that a
// third-party Prober returning garbage is treated as Unknown rather than as
// evidence.
func (r Result) valid() bool { return r == Unknown || r == Success || r == Failure }
