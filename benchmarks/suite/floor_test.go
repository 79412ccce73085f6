package suite

import (
	"math"
	"testing"
)

// TestFloor checks the rule's floor against DESIGN.md's table (the same
// model, there by simulation) and its edges.
func TestFloor(t *testing.T) {
	for _, tt := range []struct {
		n             int
		silent, reset float64
	}{
		{3, 3.58, 5.88},
		{5, 3.32, 5.62},
		{9, 3.03, 5.33},
		{33, 2.64, 4.94},
	} {
		if got := Floor(tt.n, true, 0.99); math.Abs(got-tt.silent) > 0.02 {
			t.Errorf("silent floor p99 at N=%d = %.3f, want %.2f", tt.n, got, tt.silent)
		}
		if got := Floor(tt.n, false, 0.99); math.Abs(got-tt.reset) > 0.02 {
			t.Errorf("reset floor p99 at N=%d = %.3f, want %.2f", tt.n, got, tt.reset)
		}
	}
	if p50, p99 := Floor(9, true, 0.5), Floor(9, true, 0.99); !(p50 < p99) {
		t.Errorf("p50 %.2f not below p99 %.2f", p50, p99)
	}
	for _, bad := range []struct {
		n int
		p float64
	}{{2, 0.99}, {3, 0}, {3, 1}, {3, math.NaN()}} {
		if got := Floor(bad.n, true, bad.p); !math.IsNaN(got) {
			t.Errorf("Floor(%d, %v) = %v, want NaN", bad.n, bad.p, got)
		}
	}
}
