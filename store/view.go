package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/zone"
)

// View is the part of a replica that a spare — a member outside the Raft
// configuration — needs to do its work and answer `edgequorum status`: the
// member list (whom to probe, who signs what), the verdicts, and its own
// committed row and last report (what its next report must repair). A server
// exports it for one member; the spare imports it into a store of its own,
// which then answers the same read API as a replica, so a spare restarted during
// a cloud outage still knows its zone.
type View struct {
	// Applied is the source's applied index and term when it exported the
	// view; a spare's store reports it as its own applied index, so caches
	// keyed by it notice a new view.
	Applied, AppliedTerm uint64
	Members              []zone.Member
	Verdicts             []zone.Verdict
	// Node is the member whose Row and Last these are.
	Node string
	Row  map[string]Cell
	// Last is Node's last committed report; nil when it has none.
	Last *LastReport
	// Cluster is what the caller knows of the Raft cluster at the source
	// (leader, configuration). It is opaque to the store, which keeps it so
	// that a restarted spare knows whom to ask.
	Cluster json.RawMessage
}

var keyView = []byte("view")

// ErrBadView means a view does not describe a consistent replica: the store
// refuses it and keeps the view it had.
var ErrBadView = errors.New("bad zone view")

// ExportView copies what node needs from this replica, in one read
// transaction so the parts agree.
func (s *Store) ExportView(node string) (View, error) {
	return s.ExportViewParts(node, func(ViewSums) (bool, bool) { return true, true })
}

// ViewSums are SHA-256 digests of a view's parts as this replica stores them:
// Shared of the members and verdicts, Row of one member's row. A server serves
// every spare of a large zone every report period, and mostly the spare holds
// these parts already; the sums tell that from the stored bytes, without
// decoding or encoding a member. Equal sums mean equal parts.
type ViewSums struct{ Shared, Row [sha256.Size]byte }

// ExportViewParts is ExportView for a caller that may hold parts already:
// parts gets the sums of this replica's parts and says which to copy; the
// others stay empty. The sums and the copy come from one read transaction.
func (s *Store) ExportViewParts(node string, parts func(ViewSums) (shared, row bool)) (View, error) {
	v := View{Node: node, Row: map[string]Cell{}}
	err := s.view(func(tx *bbolt.Tx) error {
		v.Applied, v.AppliedTerm = appliedPos(tx)
		members, verdicts := tx.Bucket(bucketMembers), tx.Bucket(bucketVerdicts)
		rowBucket := tx.Bucket(bucketMatrix).Bucket([]byte(node))
		var sums ViewSums
		h := sha256.New()
		if err := sumBucket(h, members); err != nil {
			return err
		}
		if err := sumBucket(h, verdicts); err != nil {
			return err
		}
		h.Sum(sums.Shared[:0])
		h.Reset()
		if err := sumBucket(h, rowBucket); err != nil {
			return err
		}
		h.Sum(sums.Row[:0])
		shared, row := parts(sums)
		if shared {
			err := members.ForEach(func(_, b []byte) error {
				m, err := decodeMember(b)
				v.Members = append(v.Members, m)
				return err
			})
			if err != nil {
				return err
			}
			err = verdicts.ForEach(func(_, b []byte) error {
				vd, err := decodeVerdict(b)
				v.Verdicts = append(v.Verdicts, vd)
				return err
			})
			if err != nil {
				return err
			}
		}
		if row && rowBucket != nil {
			var err error
			if v.Row, err = decodeRow(rowBucket); err != nil {
				return err
			}
		}
		if b := tx.Bucket(bucketReports).Get([]byte(node)); b != nil {
			lr, err := decodeLastReport(b)
			if err != nil {
				return err
			}
			v.Last = &lr
		}
		return nil
	})
	if err != nil {
		return View{}, fmt.Errorf("store: export view for %s: %w", node, err)
	}
	return v, nil
}

// sumBucket writes b's keys and values to h, each with its length first so
// that no two different buckets write the same bytes, and a count last so a
// bucket's end is marked. A nil bucket writes what an empty one does.
func sumBucket(h hash.Hash, b *bbolt.Bucket) error {
	var n uint64
	var lens [16]byte
	if b != nil {
		err := b.ForEach(func(k, v []byte) error {
			binary.BigEndian.PutUint64(lens[:8], uint64(len(k)))
			binary.BigEndian.PutUint64(lens[8:], uint64(len(v)))
			h.Write(lens[:])
			h.Write(k)
			h.Write(v)
			n++
			return nil
		})
		if err != nil {
			return err
		}
	}
	binary.BigEndian.PutUint64(lens[:8], n)
	h.Write(lens[:8])
	return nil
}

// Validate reports whether v is a consistent replica's view: members valid as
// a MemberSet, verdicts valid as a VerdictBatch and only about members, and a
// row only about members. It is what a spare checks before a view from the
// network replaces its own.
func (v View) Validate() error {
	if err := (MemberSet{Members: v.Members}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadView, err)
	}
	if err := (VerdictBatch{Verdicts: v.Verdicts}).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadView, err)
	}
	members := make(map[string]struct{}, len(v.Members))
	for _, m := range v.Members {
		members[m.Node] = struct{}{}
	}
	for _, vd := range v.Verdicts {
		if _, ok := members[vd.Node]; !ok {
			return fmt.Errorf("%w: verdict about %q, which is no member", ErrBadView, vd.Node)
		}
	}
	if err := validName(v.Node); err != nil {
		return fmt.Errorf("%w: %w", ErrBadView, err)
	}
	for peer := range v.Row {
		if _, ok := members[peer]; !ok || peer == v.Node {
			return fmt.Errorf("%w: row of %s holds a cell about %q", ErrBadView, v.Node, peer)
		}
	}
	if v.Cluster != nil && !json.Valid(v.Cluster) {
		return fmt.Errorf("%w: cluster part is not JSON", ErrBadView)
	}
	return nil
}

// ImportView replaces this store's content with v in one transaction. It is
// for a spare's own store only, never for a Raft replica: it writes no log.
func (s *Store) ImportView(v View) error {
	if err := v.Validate(); err != nil {
		return err
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.tally.reset()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, name := range dataBuckets {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		members, verdicts := tx.Bucket(bucketMembers), tx.Bucket(bucketVerdicts)
		for _, m := range v.Members {
			b, err := json.Marshal(m)
			if err != nil {
				return err
			}
			if err := members.Put([]byte(m.Node), b); err != nil {
				return err
			}
		}
		for _, vd := range v.Verdicts {
			b, err := json.Marshal(vd)
			if err != nil {
				return err
			}
			if err := verdicts.Put([]byte(vd.Node), b); err != nil {
				return err
			}
		}
		if len(v.Row) > 0 {
			row, err := tx.Bucket(bucketMatrix).CreateBucket([]byte(v.Node))
			if err != nil {
				return err
			}
			for _, peer := range sortedKeys(v.Row) {
				if err := row.Put([]byte(peer), encodeCell(nil, v.Row[peer])); err != nil {
					return err
				}
			}
		}
		if v.Last != nil {
			if err := tx.Bucket(bucketReports).Put([]byte(v.Node), encodeLastReport(*v.Last)); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyView); err != nil {
			return err
		}
		if len(v.Cluster) > 0 {
			if err := meta.Put(keyView, v.Cluster); err != nil {
				return err
			}
		}
		return putApplied(tx, v.Applied, v.AppliedTerm)
	})
	if err != nil {
		return fmt.Errorf("store: import view: %w", err)
	}
	return nil
}

// ViewCluster returns the Cluster part of the last imported view; nil for a
// store that never imported one.
func (s *Store) ViewCluster() json.RawMessage {
	var out json.RawMessage
	_ = s.view(func(tx *bbolt.Tx) error {
		if b := tx.Bucket(bucketMeta).Get(keyView); len(b) > 0 {
			out = append(json.RawMessage(nil), b...)
		}
		return nil
	})
	return out
}
