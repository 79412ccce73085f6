//go:build skewnext

package zone

import "github.com/edgequorum/edgequorum/skew"

// In the test build of the next release (tag skewnext) the verdict
// annotation and the zone Lease each gain a format at the next level, which
// a reader of this release refuses as newer: tests check that a leader
// writes it only once its zone and every webhook replica read it.
func init() {
	verdictFormats = append(verdictFormats, skew.Level2+1)
	leaseFormats = append(leaseFormats, skew.Level2+1)
}
