// Package skew owns edgequorum's version-skew policy: which protocol level
// each release speaks, the oldest level it still reads, how a zone of mixed
// releases agrees on the level its formats may use, and which releases may
// run side by side (SideBySide).
//
// A level names a set of formats (zone-port proof, Raft command types,
// report encoding, store schema, snapshots, annotations). Release N speaks
// its own level and reads N−1's; a member writes a format of a level only
// once every member of its zone announces that level (Zone). The package
// holds no state and does no I/O: the store keeps what members announced,
// the leader asks Zone, the readers ask Reads. It must not import anything of
// the zone's machinery, so every room can use it.
package skew

import (
	"errors"
	"fmt"
	"strconv"
)

// Level is a protocol level: every format a release may write is introduced
// at one level, and a reader of level L reads every format of levels
// Oldest..L. Levels only grow; a release that changes no format keeps its
// predecessor's.
type Level uint16

const (
	// Unannounced is the level of a member that has announced none yet, or
	// of a format from before levels existed (v0.2.0). Zone counts such a
	// member as the oldest level this build reads: it may run N−1, and
	// nothing older passes the zone port's handshake.
	Unannounced Level = 0
	// Level1 is v0.3.0's: zone-port proof 4, command format 1 (types up to
	// AnnouncedReportBatch), store schema 2, snapshot frame 1, verdict
	// annotation and zone Lease format 1.
	Level1 Level = 1
	// Level2 is v0.4.0's: zone Lease format 2, whose claim may be quiet
	// (zone.LeaseClaim.Quiet): renewed slowly while no member needs the
	// cloud's attention. Every other format is level 1's.
	Level2 Level = 2
)

// current and oldest are variables only so that a test build of the next
// release (build tag skewnext) can raise them; no production code sets them.
var (
	current = Level2
	oldest  = Level1
)

// Current is the highest level this build speaks: the level it announces.
func Current() Level { return current }

// Oldest is the lowest level this build still reads: release N−1's.
func Oldest() Level { return oldest }

// Reads reports whether a reader at level self reads a format introduced
// at level l.
func Reads(self, l Level) bool { return l <= self }

// String renders a level for logs and status ("level 1").
func (l Level) String() string {
	if l == Unannounced {
		return "unannounced"
	}
	return "level " + strconv.Itoa(int(l))
}

// Announcement is what a member says of itself: the release it runs and the
// highest level it speaks. Members sign it into their reports; only a member's
// own key can say it, and saying a higher level than it speaks harms nobody
// but itself while any honest older member holds the zone's level down.
type Announcement struct {
	Release string
	Level   Level
}

// MaxReleaseLen bounds the release string a member may announce: a semver
// version with its pre-release and build parts.
const MaxReleaseLen = 64

// ErrBadAnnouncement means an announcement does not parse or is out of bounds.
var ErrBadAnnouncement = errors.New("bad release announcement")

// Validate checks the bounds a decoder relies on. A release is printed in
// logs and in `edgequorum status` on an operator's terminal, and any member
// can say one, so it holds only the characters of a version:
// letters, digits and ".+-".
func (a Announcement) Validate() error {
	if len(a.Release) > MaxReleaseLen {
		return fmt.Errorf("%w: release of %d bytes, at most %d", ErrBadAnnouncement, len(a.Release), MaxReleaseLen)
	}
	for _, r := range a.Release {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '+' || r == '-') {
			return fmt.Errorf("%w: release %q holds %q; a version holds letters, digits and .+- only", ErrBadAnnouncement, a.Release, r)
		}
	}
	if a.Level == Unannounced && a.Release != "" {
		return fmt.Errorf("%w: release %q at no level", ErrBadAnnouncement, a.Release)
	}
	return nil
}

// String renders an announcement for logs and status ("v0.3.0 (level 1)").
func (a Announcement) String() string {
	if a.Level == Unannounced {
		return "unannounced (before v0.3.0)"
	}
	return fmt.Sprintf("%s (%s)", a.Release, a.Level)
}

// Zone is the level a zone's formats may use: the lowest any member
// announced, never above what this build speaks (self). A member that has
// announced nothing yet counts as the oldest level this build reads, for it
// may run release N−1; nothing older gets past the zone port's handshake.
// So a format is switched on only once every member, spares included, has
// said it reads it. With no members it is self.
func Zone(self Level, members []Level) Level {
	z := self
	for _, l := range members {
		z = min(z, max(l, oldest))
	}
	return z
}

// Advice a reader of a newer release's format gives with Newer.
const (
	// UpgradeMember: a zone member met it in the zone's log.
	UpgradeMember = "upgrade this member, or hold the zone's other members at its release"
	// UpgradeWebhook: the webhook met it in what agents wrote.
	UpgradeWebhook = "upgrade the webhook first, as the skew policy says (docs/operating.md, \"Upgrades\")"
)

// Newer is the error a reader gives for a format of a level it does not
// read: it names the level (Unannounced when the reader cannot tell which),
// what this build reads and what to do, so an operator sees a skew problem,
// not a corrupt input.
func Newer(what string, l, self Level, advice string) error {
	of := "of " + l.String()
	if l == Unannounced {
		of = "of a newer level"
	}
	return fmt.Errorf("%w: %s is %s, this build reads up to %s: %s", ErrTooNew, what, of, self, advice)
}

// ErrTooNew means an input was written by a newer release in a format this
// one cannot read. Readers count it apart from hostile input.
var ErrTooNew = errors.New("written by a newer release")
