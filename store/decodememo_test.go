package store

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestDecodeMemo: a memo answers as its decoder does, for the exact bytes:
// other bytes decode afresh, errors are not remembered, and a full memo
// starts over rather than growing.
func TestDecodeMemo(t *testing.T) {
	var d decodeMemo[int]
	calls := 0
	dec := func(v []byte) (int, error) {
		calls++
		var x int
		if err := json.Unmarshal(v, &x); err != nil {
			return 0, fmt.Errorf("decode: %w", err)
		}
		return x, nil
	}
	for i, tc := range []struct {
		in        string
		want      int
		wantErr   bool
		wantCalls int
	}{
		{"1", 1, false, 1},
		{"1", 1, false, 1}, // remembered
		{"2", 2, false, 2},
		{" 1", 1, false, 3}, // other bytes, same value: decoded
		{"x", 0, true, 4},
		{"x", 0, true, 5}, // an error is not remembered
	} {
		got, err := d.decode([]byte(tc.in), dec)
		if got != tc.want || (err != nil) != tc.wantErr || calls != tc.wantCalls {
			t.Fatalf("step %d (%q): %d, %v after %d decodes; want %d, error %v after %d", i, tc.in, got, err, calls, tc.want, tc.wantErr, tc.wantCalls)
		}
	}
	for i := range decodeMemoSize + 10 {
		if _, err := d.decode(fmt.Appendf(nil, "%d", i+10), dec); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.m); n > decodeMemoSize {
		t.Fatalf("memo holds %d values, more than its bound %d", n, decodeMemoSize)
	}
}
