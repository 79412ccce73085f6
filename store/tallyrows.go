package store

import (
	"encoding/binary"
	"hash/maphash"
	"sync"

	"go.etcd.io/bbolt"
)

// tallyRows keeps the matrix rows tallies decoded, so that the next tally
// decodes only the rows whose bytes changed. A leader tallies on every report
// batch that changed a result, and every replica checks every verdict batch
// against a tally of its own: at 129 members each of those decoded 16,641
// cells into fresh maps, half of all a leader allocated.
//
// A cached row is keyed by a hash of its stored keys and values, not by what
// should have changed it (its checker's seq, the member list): reading and
// hashing a row's bytes in place costs a fraction of decoding it into a map,
// and no write path can then leave a stale row behind. The rows are shared
// between tallies and must not be modified.
type tallyRows struct {
	mu   sync.Mutex
	seed maphash.Seed
	rows map[string]tallyRow
}

type tallyRow struct {
	sum   uint64
	cells map[string]Cell
}

// reset drops every cached row (a restored or imported state).
func (c *tallyRows) reset() {
	c.mu.Lock()
	c.rows = nil
	c.mu.Unlock()
}

// read returns the matrix in tx, as readMatrix does.
func (c *tallyRows) read(tx *bbolt.Tx) (Matrix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil {
		c.seed, c.rows = maphash.MakeSeed(), make(map[string]tallyRow)
	}
	out := make(Matrix, len(c.rows))
	seen := make(map[string]bool, len(c.rows))
	names := make(map[string]string)
	size := 0
	matrix := tx.Bucket(bucketMatrix)
	err := matrix.ForEachBucket(func(k []byte) error {
		checker := string(k)
		seen[checker] = true
		b := matrix.Bucket(k)
		sum := c.sum(b)
		cached, hit := c.rows[checker]
		if !hit || cached.sum != sum {
			row, err := decodeRowNamed(b, size, names)
			if err != nil {
				return err
			}
			cached = tallyRow{sum: sum, cells: row}
			c.rows[checker] = cached
		}
		size = len(cached.cells)
		if len(cached.cells) > 0 {
			out[checker] = cached.cells
		}
		return nil
	})
	if err != nil {
		c.rows = nil
		return nil, err
	}
	for checker := range c.rows {
		if !seen[checker] {
			delete(c.rows, checker)
		}
	}
	return out, nil
}

// sum hashes a row's keys and values, each prefixed with its length.
func (c *tallyRows) sum(b *bbolt.Bucket) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	var n [binary.MaxVarintLen64]byte
	_ = b.ForEach(func(k, v []byte) error {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		h.Write(k)
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(v)))])
		h.Write(v)
		return nil
	})
	return h.Sum64()
}
