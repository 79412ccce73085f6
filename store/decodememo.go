package store

import (
	"sync"

	"github.com/edgequorum/edgequorum/zone"
)

// decodeMemo remembers what a decoder made of the exact bytes it was given.
// Members and verdicts are stored as JSON and read in full by every tally,
// every replica's check of a verdict batch and every report the leader takes
// in: at 129 members their decoding was a third of what a leader allocated,
// though the bytes rarely change. Decoding is a pure function of the bytes,
// so a value found by its bytes is the value decoding would make, whichever
// store or version of a record they came from. T must hold no reference a
// caller could modify (no slices, maps or pointers), since every hit returns a
// copy of the same value.
type decodeMemo[T any] struct {
	mu sync.Mutex
	m  map[string]T
}

// decodeMemoSize bounds a memo: when full it starts over. A zone's members
// and verdicts are a few hundred records; verdicts that changed leave their
// old bytes behind until then.
const decodeMemoSize = 1024

func (d *decodeMemo[T]) decode(v []byte, f func([]byte) (T, error)) (T, error) {
	d.mu.Lock()
	x, ok := d.m[string(v)]
	d.mu.Unlock()
	if ok {
		return x, nil
	}
	x, err := f(v)
	if err != nil {
		return x, err
	}
	d.mu.Lock()
	if d.m == nil || len(d.m) >= decodeMemoSize {
		d.m = make(map[string]T)
	}
	d.m[string(v)] = x
	d.mu.Unlock()
	return x, nil
}

var (
	memberMemo  decodeMemo[zone.Member]
	verdictMemo decodeMemo[zone.Verdict]
)
