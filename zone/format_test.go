package zone

import (
	"errors"
	"fmt"
	"testing"

	"github.com/edgequorum/edgequorum/skew"
)

func TestFormatLevels(t *testing.T) {
	for _, tt := range []struct {
		in    string
		want  skew.Level
		newer bool
		bad   bool
	}{
		{"", skew.Unannounced, false, false},
		{"1", skew.Level1, false, false},
		{FormatLevel(skew.Current() + 1), skew.Current() + 1, true, false},
		{"x", 0, false, true},
		{"70000", 0, false, true},
	} {
		got, err := ParseFormatLevel(tt.in)
		switch {
		case tt.bad:
			if err == nil || errors.Is(err, skew.ErrTooNew) {
				t.Errorf("ParseFormatLevel(%q) = %v, %v; want a parse error", tt.in, got, err)
			}
		case tt.newer:
			if !errors.Is(err, skew.ErrTooNew) {
				t.Errorf("ParseFormatLevel(%q) = %v; want skew.ErrTooNew", tt.in, err)
			}
		case err != nil || got != tt.want:
			t.Errorf("ParseFormatLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	if got := FormatLevel(LeaseFormat(skew.Level1)); got != "1" {
		t.Errorf("FormatLevel(LeaseFormat(level 1)) = %q", got)
	}
}

func TestParseAnnotationRefusesANewerFormat(t *testing.T) {
	if _, err := ParseAnnotation(`{"state":"healthy","zone":"z"}`); err != nil {
		t.Errorf("a verdict of the release before levels: %v", err)
	}
	if a, err := ParseAnnotation(`{"state":"healthy","zone":"z","v":1}`); err != nil || a.V != skew.Level1 {
		t.Errorf("a verdict of level 1: %+v, %v", a, err)
	}
	_, err := ParseAnnotation(fmt.Sprintf(`{"state":"healthy","zone":"z","v":%d}`, skew.Current()+1))
	if !errors.Is(err, skew.ErrTooNew) {
		t.Errorf("a verdict of a newer format: %v, want skew.ErrTooNew", err)
	}
}
