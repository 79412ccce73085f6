package zone

import (
	"fmt"
	"strconv"

	"github.com/edgequorum/edgequorum/skew"
)

// What agents write to the Kubernetes API carries the protocol level its
// format was introduced at (package skew): the verdict annotation in its
// "v" field, a zone Lease in LeaseFormatAnnotation. A reader of a lower
// level refuses it as a newer release's (skew.ErrTooNew) and says so,
// instead of misreading it; a writer keeps to a format its readers read.

// LeaseFormatAnnotation on a zone Lease is the level of its annotations'
// format, a decimal number; absent on Leases of releases before levels.
const LeaseFormatAnnotation = "edgequorum.io/format"

// VerdictFormat and LeaseFormat are the levels of the formats this build
// writes.
const (
	VerdictFormat = skew.Level1
	LeaseFormat   = skew.Level1
)

// FormatLevel renders a level as LeaseFormatAnnotation's value.
func FormatLevel(l skew.Level) string { return strconv.Itoa(int(l)) }

// ParseFormatLevel reads LeaseFormatAnnotation's value: "" is
// skew.Unannounced (a release before levels); a level above what this build
// reads is an error wrapping skew.ErrTooNew.
func ParseFormatLevel(s string) (skew.Level, error) {
	if s == "" {
		return skew.Unannounced, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", LeaseFormatAnnotation, truncate(s, 16), err)
	}
	return checkLevel(LeaseFormatAnnotation, skew.Level(n))
}

func checkLevel(what string, l skew.Level) (skew.Level, error) {
	if !skew.Reads(skew.Current(), l) {
		return l, fmt.Errorf("%s: %w", what, skew.Newer("its format", l, skew.Current(), skew.UpgradeWebhook))
	}
	return l, nil
}
