//go:build !linux

package exepages

// Release does nothing outside Linux: the agent runs on Linux nodes only,
// and the CLI that carries it elsewhere never runs it long.
func Release() (Stats, error) { return Stats{}, nil }
