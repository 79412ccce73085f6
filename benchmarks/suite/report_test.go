package suite

import "testing"

// TestTargetTimes keeps a ratio just over or under its target of 1 from
// printing as 1.00× next to a verdict it seems to contradict.
func TestTargetTimes(t *testing.T) {
	for x, want := range map[float64]string{
		0.93:    "0.93×",
		1:       "1.00×",
		1.004:   "1.004×",
		0.9996:  "0.9996×",
		1.00004: "1.00004×",
		1.06:    "1.06×",
		12.5:    "12.50×",
		10:      "10.00×",
	} {
		if got := targetTimes(x); got != want {
			t.Errorf("targetTimes(%v) = %q, want %q", x, got, want)
		}
	}
}
