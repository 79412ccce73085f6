package raftzone

import "testing"

// DeadNodeMatrix is deadNodeMatrix for this directory's external tests: the
// browser test draws the view with internal/matrixsvg, which imports this
// package and so cannot be imported by its own tests.
func DeadNodeMatrix(t *testing.T, n int, dead string) MatrixView {
	t.Helper()
	_, _, v := deadNodeMatrix(t, n, dead)
	return v
}
