//go:build skewnext

package skew

// A test build of the next release: with the build tag skewnext this tree
// speaks one level more than it does, so that tests can run members of this
// release (Config.Level = Level2) beside members of the next in one process.
// No release is ever built with the tag.
func init() { current = Level2 + 1 }
