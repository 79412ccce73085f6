package stats

import (
	"math"
	"testing"
)

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		xs   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, math.NaN()},
		{"one sample", []float64{7}, 99, 7},
		{"median of odd count", []float64{3, 1, 2}, 50, 2},
		{"median of even count is the lower middle", []float64{4, 1, 3, 2}, 50, 2},
		{"p99 of few samples is the max", []float64{5, 1, 9, 3, 2}, 99, 9},
		{"p100 is the max", []float64{1, 2, 3}, 100, 3},
		{"tiny p is the min", []float64{4, 2, 8}, 0.1, 2},
		{"p99 of 200 samples skips the top two", seq(200), 99, 198},
		{"p out of range", []float64{1}, 0, math.NaN()},
		{"p above 100", []float64{1}, 101, math.NaN()},
	}
	for _, tc := range tests {
		got := Percentile(tc.xs, tc.p)
		if !same(got, tc.want) {
			t.Errorf("%s: Percentile(%v, %v) = %v, want %v", tc.name, tc.xs, tc.p, got, tc.want)
		}
	}
	xs := []float64{3, 1, 2}
	Percentile(xs, 50)
	if xs[0] != 3 {
		t.Error("Percentile sorted its input in place")
	}
}

func TestMeanMax(t *testing.T) {
	if got := Mean([]float64{1, 2, 6}); got != 3 {
		t.Errorf("Mean = %v", got)
	}
	if got := Max([]float64{1, 7, 6}); got != 7 {
		t.Errorf("Max = %v", got)
	}
	if !math.IsNaN(Mean(nil)) || !math.IsNaN(Max(nil)) {
		t.Error("empty input must give NaN")
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := []Bucket{{0.001, 10}, {0.002, 30}, {0.004, 40}, {inf, 40}}
	tests := []struct {
		name    string
		q       float64
		buckets []Bucket
		want    float64
	}{
		{"inside first bucket interpolates from zero", 0.125, h, 0.0005},
		{"median lands in the second bucket", 0.5, h, 0.0015},
		{"p99 in the third bucket", 0.99, h, 0.002 + 0.002*(39.6-30)/10},
		{"empty histogram", 0.5, []Bucket{{0.001, 0}, {inf, 0}}, math.NaN()},
		{"rank in +Inf returns the highest finite bound", 0.99, []Bucket{{0.001, 1}, {inf, 10}}, 0.001},
		{"unsorted input", 0.5, []Bucket{{inf, 40}, {0.002, 30}, {0.001, 10}, {0.004, 40}}, 0.0015},
		{"no buckets", 0.5, nil, math.NaN()},
	}
	for _, tc := range tests {
		got := HistogramQuantile(tc.q, tc.buckets)
		if !same(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSubBuckets(t *testing.T) {
	got := SubBuckets([]Bucket{{1, 5}, {2, 9}}, []Bucket{{1, 2}, {2, 3}})
	if got[0].Count != 3 || got[1].Count != 6 {
		t.Errorf("SubBuckets = %v", got)
	}
	got = SubBuckets([]Bucket{{1, 5}}, nil)
	if got[0].Count != 5 {
		t.Errorf("SubBuckets without a before = %v", got)
	}
}

func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(i + 1)
	}
	return out
}

func same(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) < 1e-12
}
