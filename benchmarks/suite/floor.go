package suite

import (
	"math"
	"time"

	"github.com/edgequorum/edgequorum/probe"
)

// The settings of the verdict rule's floor beside ProbePeriod and
// FailureThreshold: the agent's defaults, which the suite does not change.
const (
	// ProbeTimeout is the probes' timeout.
	ProbeTimeout = time.Second
	// BatchWindow is the leader's --report-batch-window.
	BatchWindow = 20 * time.Millisecond
)

// Floor is the verdict rule's own p-quantile of death → committed verdict in
// a zone of n members, in protocol seconds: what the rule needs before any
// cost of the code that runs it (DESIGN.md, verdict rule). A verdict needs a
// quorum q of the n−1 observers; observer i's next probe of the dead node
// starts U_i after the death, the earlier of its two probes' phases, each
// uniform over a probe period. Then, for a silent death, half a timeout with
// no answer, the confirmation's last connection (C−1)·G later and its
// timeout; for a reset, FailureThreshold−1 more periods (a refused port
// leaves it to the thresholds). Then one batch window. NaN for n < 3.
func Floor(n int, silent bool, p float64) float64 {
	q := (n-1)/2 + 1
	if n < 3 || !(p > 0 && p < 1) {
		return math.NaN()
	}
	first := orderQuantile(n-1, q, p) * ProbePeriod.Seconds()
	rest := (FailureThreshold - 1) * ProbePeriod
	if silent {
		rest = ProbeTimeout/2 + time.Duration(probe.DefaultConfirmConnects-1)*probe.DefaultConfirmGap + ProbeTimeout
	}
	return first + (rest + BatchWindow).Seconds()
}

// orderQuantile is the p-quantile of the k-th smallest of m independent
// draws of min(U, U′), U and U′ uniform over [0, 1): by bisection on its
// distribution, the chance that at least k of the m fall at or below x.
func orderQuantile(m, k int, p float64) float64 {
	cdf := func(x float64) float64 {
		f := 1 - (1-x)*(1-x) // one observer's first probe by x
		var at float64
		for j := k; j <= m; j++ {
			at += binomial(m, j) * math.Pow(f, float64(j)) * math.Pow(1-f, float64(m-j))
		}
		return at
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if cdf(mid) < p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// binomial is m choose j as a float.
func binomial(m, j int) float64 {
	r := 1.0
	for i := 1; i <= j; i++ {
		r = r * float64(m-j+i) / float64(i)
	}
	return r
}
