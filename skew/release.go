package skew

import (
	"fmt"
	"strconv"
	"strings"
)

// Release is a release's place in the policy: its major and minor version.
// Before 1.0 each minor is a release (N), as Semantic Versioning allows a
// 0.x minor to break; patches of one release always run side by side.
type Release struct{ Major, Minor int }

// ParseRelease reads a version such as "v0.3.0", "v0.4.0-rc.1" or
// "v0.3.1+abc" (an image tag, a build's version).
func ParseRelease(v string) (Release, error) {
	s, ok := strings.CutPrefix(v, "v")
	if !ok {
		return Release{}, fmt.Errorf("release %q: want vMAJOR.MINOR.PATCH", v)
	}
	s, _, _ = strings.Cut(s, "+")
	s, _, _ = strings.Cut(s, "-")
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Release{}, fmt.Errorf("release %q: want vMAJOR.MINOR.PATCH", v)
	}
	var n [3]int
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 {
			return Release{}, fmt.Errorf("release %q: %q is not a number", v, p)
		}
		n[i] = x
	}
	return Release{Major: n[0], Minor: n[1]}, nil
}

// String renders the release as "v0.3".
func (r Release) String() string { return fmt.Sprintf("v%d.%d", r.Major, r.Minor) }

// Less orders releases.
func (r Release) Less(o Release) bool {
	return r.Major < o.Major || (r.Major == o.Major && r.Minor < o.Minor)
}

// SideBySide reports whether releases a and b may run together under the
// policy: the same release, or one and the one before it. Across a major
// version only x.0 with the last minor of the major before counts, which
// this package cannot know; such a pair is refused and its notes decide.
func SideBySide(a, b Release) bool {
	if b.Less(a) {
		a, b = b, a
	}
	return a.Major == b.Major && b.Minor-a.Minor <= 1
}
