// Package syncbuf is a log sink that a component under test writes to from
// its goroutines while the test reads it. It owns nothing else.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder safe for concurrent writes and reads: a logger
// writes from the component's goroutines while the test polls String.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
