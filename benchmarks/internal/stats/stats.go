// Package stats holds the small statistics the benchmark suite reports:
// percentiles of repeated measurements and quantiles of Prometheus histograms.
// It knows nothing about zones or processes.
package stats

import (
	"math"
	"slices"
	"sort"
)

// Percentile returns the p-th percentile (0 < p ≤ 100) of xs by the
// nearest-rank method: the smallest sample such that at least p % of the samples
// are at or below it. With fewer than 100 samples p99 is therefore the maximum,
// which is what a target on p99 should be checked against. NaN when xs is empty.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

// Mean is the arithmetic mean; NaN when xs is empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Max is the largest sample; NaN when xs is empty.
func Max(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return slices.Max(xs)
}

// Bucket is one cumulative histogram bucket: Count observations were ≤ UpperBound.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// HistogramQuantile estimates the q-quantile (0 ≤ q ≤ 1) of a cumulative
// histogram as Prometheus' histogram_quantile does: find the bucket holding the
// rank and interpolate linearly inside it, the lowest bucket starting at 0. A
// rank in the +Inf bucket returns the highest finite bound. NaN when the
// histogram is empty.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	if len(buckets) == 0 || q < 0 || q > 1 {
		return math.NaN()
	}
	b := slices.Clone(buckets)
	sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	total := b[len(b)-1].Count
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(b), func(i int) bool { return b[i].Count >= rank })
	if i == len(b) {
		i = len(b) - 1
	}
	if math.IsInf(b[i].UpperBound, 1) {
		if i == 0 {
			return math.NaN()
		}
		return b[i-1].UpperBound
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = b[i-1].UpperBound, b[i-1].Count
	}
	in := b[i].Count - below
	if in <= 0 {
		return b[i].UpperBound
	}
	return lower + (b[i].UpperBound-lower)*(rank-below)/in
}

// SubBuckets returns after − before bucket by bucket (matched by bound), the
// observations made between two scrapes of one histogram.
func SubBuckets(after, before []Bucket) []Bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.UpperBound] = b.Count
	}
	out := make([]Bucket, 0, len(after))
	for _, b := range after {
		out = append(out, Bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]})
	}
	return out
}
