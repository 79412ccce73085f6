package probe

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

const (
	// DefaultScoreLine is the score a target needs to be judged OK: by default
	// every probe must pass, as in SuperEdge's default.
	DefaultScoreLine = 100
	// weightTolerance is how far weights may sum from 1: enough for three
	// weights of 0.333, not enough to hide a forgotten probe.
	weightTolerance = 0.001
	// scoreDecimals is the precision scores are rounded to, so that weights
	// like 0.7 and 0.2 reach a score line of 90 despite binary floating point.
	scoreDecimals = 1e6
)

// ErrWeights is wrapped by every error about probe weights.
var ErrWeights = errors.New("bad probe weights")

// Checker combines a target's probe states into a weighted score from 0 to 100
// and compares it with a score line. It is immutable and safe for concurrent use.
type Checker struct {
	weights []float64
	total   float64
	line    float64
}

// Evaluation is a Checker's judgement of one target.
type Evaluation struct {
	// Known is true once every probe has a thresholded state. Until then the
	// target is not judged: a peer that just joined has not failed anything.
	Known bool
	// OK is Known and Score ≥ the score line.
	OK bool
	// Score is 100 × the summed weights of the probes whose state is Success.
	// It is computed even when not Known, from the probes that are Success.
	Score float64
}

// NewChecker resolves the weights of specs and checks them and the score line.
//
// Weights default as follows: the probes whose Weight is zero share equally what
// the explicit weights leave of 1. So a lone probe weighs 1, n unweighted probes
// weigh 1/n each, and "tcp:weight=0.4" next to two unweighted probes gives those
// 0.3 each. The resolved weights must each lie in (0, 1] and sum to 1 within
// ±0.001; otherwise the error names every probe with its weight, and the sum.
// scoreLine must lie in (0, 100].
func NewChecker(specs []Spec, scoreLine float64) (*Checker, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no probes", ErrWeights)
	}
	if !(scoreLine > 0 && scoreLine <= 100) {
		return nil, fmt.Errorf("score line %v is outside (0, 100]", scoreLine)
	}
	weights, err := resolveWeights(specs)
	if err != nil {
		return nil, err
	}
	c := &Checker{weights: weights, line: scoreLine}
	for _, w := range weights {
		c.total += w
	}
	return c, nil
}

func resolveWeights(specs []Spec) ([]float64, error) {
	var explicit float64
	var unset []int
	for i, s := range specs {
		if s.Weight == 0 {
			unset = append(unset, i)
			continue
		}
		explicit += s.Weight
	}
	weights := make([]float64, len(specs))
	share := 0.0
	if len(unset) > 0 {
		share = (1 - explicit) / float64(len(unset))
	}
	var sum float64
	for i, s := range specs {
		weights[i] = s.Weight
		if s.Weight == 0 {
			weights[i] = share
		}
		sum += weights[i]
	}
	if len(unset) > 0 && share <= 0 {
		return nil, fmt.Errorf("%w: explicit weights already sum to %s, leaving nothing for the probes without a weight: %s",
			ErrWeights, formatFloat(explicit), describeWeights(specs, weights))
	}
	for i, w := range weights {
		if !(w > 0 && w <= 1) {
			return nil, fmt.Errorf("%w: probe #%d %s has weight %s, want (0, 1]: %s",
				ErrWeights, i+1, specs[i], formatFloat(w), describeWeights(specs, weights))
		}
	}
	if math.Abs(sum-1) > weightTolerance {
		return nil, fmt.Errorf("%w: weights sum to %s, want 1 (±%v): %s",
			ErrWeights, formatFloat(sum), weightTolerance, describeWeights(specs, weights))
	}
	return weights, nil
}

// describeWeights lists every probe with its resolved weight, so that the error
// shows where the sum came from.
func describeWeights(specs []Spec, weights []float64) string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = fmt.Sprintf("#%d %s = %s", i+1, s, formatFloat(weights[i]))
	}
	return strings.Join(parts, "; ")
}

// Weights returns the resolved weight of each probe, in spec order.
func (c *Checker) Weights() []float64 { return append([]float64(nil), c.weights...) }

// ScoreLine returns the score a target needs to be OK.
func (c *Checker) ScoreLine() float64 { return c.line }

// Evaluate judges a target from the thresholded state of each of its probes, in
// spec order. Weights are divided by their sum, which differs from 1 by at most
// the tolerance, so that a target whose probes all succeed scores exactly 100.
// A states slice of the wrong length is a programming error and panics.
func (c *Checker) Evaluate(states []Result) Evaluation {
	if len(states) != len(c.weights) {
		panic(fmt.Sprintf("probe: Checker.Evaluate got %d states for %d probes", len(states), len(c.weights)))
	}
	known := true
	var got float64
	for i, st := range states {
		switch st {
		case Success:
			got += c.weights[i]
		case Failure:
		default:
			known = false
		}
	}
	score := math.Round(100*got/c.total*scoreDecimals) / scoreDecimals
	return Evaluation{Known: known, OK: known && score >= c.line, Score: score}
}
