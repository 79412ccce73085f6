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

// LeaseQuietFormat is the zone Lease format of a quiet renewal
// (LeaseClaim.Quiet); it signs its format level.
const LeaseQuietFormat = skew.Level2

// verdictFormats and leaseFormats are the levels at which the verdict
// annotation's and the zone Lease's formats changed, oldest first: a writer
// picks the newest its readers read (VerdictFormat, LeaseFormat). They are
// variables only so that the test build of the next release (build tag
// skewnext) can add one.
var (
	verdictFormats = []skew.Level{skew.Level1}
	leaseFormats   = []skew.Level{skew.Level1}
)

// VerdictFormat is the level of the newest verdict annotation format a
// reader of level at reads, or the oldest this build writes when at is
// below every one of them.
func VerdictFormat(at skew.Level) skew.Level { return formatAt(verdictFormats, at) }

// LeaseFormat is VerdictFormat for a busy zone Lease renewal; a quiet one is
// of LeaseQuietFormat, which a reader of level at reads if
// skew.Reads(at, LeaseQuietFormat).
func LeaseFormat(at skew.Level) skew.Level { return formatAt(leaseFormats, at) }

func formatAt(levels []skew.Level, at skew.Level) skew.Level {
	f := levels[0]
	for _, l := range levels[1:] {
		if l <= at {
			f = l
		}
	}
	return f
}

// FormatLevel renders a level as LeaseFormatAnnotation's value.
func FormatLevel(l skew.Level) string { return strconv.Itoa(int(l)) }

// ParseFormatLevel reads LeaseFormatAnnotation's value on a zone Lease: ""
// is skew.Unannounced (a release before levels); a level above what this
// build reads is an error wrapping skew.ErrTooNew, which tells the webhook's
// operator to upgrade it first.
func ParseFormatLevel(s string) (skew.Level, error) {
	return parseFormatLevel(s, skew.UpgradeWebhook)
}

func parseFormatLevel(s, advice string) (skew.Level, error) {
	if s == "" {
		return skew.Unannounced, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", LeaseFormatAnnotation, truncate(s, 16), err)
	}
	return checkLevel(LeaseFormatAnnotation, skew.Level(n), advice)
}

func checkLevel(what string, l skew.Level, advice string) (skew.Level, error) {
	if !skew.Reads(skew.Current(), l) {
		return l, fmt.Errorf("%s: %w", what, skew.Newer("its format", l, skew.Current(), advice))
	}
	return l, nil
}
