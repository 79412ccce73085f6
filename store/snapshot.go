package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
	"github.com/edgequorum/edgequorum/zone"
)

// A snapshot stream is a frame around the bytes of one bbolt read transaction:
//
//	"EQSNAP" | byte frame version | byte 0 | uint64 body length | body | uint32 CRC-32C of body
//
// The checksum is checked before bbolt opens the file: bbolt trusts its pages and
// can crash the process (in goroutines of its own, beyond recover) on a damaged
// one, so only bytes that a healthy store wrote ever reach it. Authenticity is the
// transport's business; the CRC guards against damage in storage and transit.
const (
	snapshotMagic        = "EQSNAP"
	snapshotFrameVersion = 1
	// oldestSnapshotFrame is the oldest frame this binary reads: release
	// N−1's. The body is a store file, whose schema checkSchema judges.
	oldestSnapshotFrame = 1
	snapshotHeaderLen   = len(snapshotMagic) + 2 + 8
	snapshotTrailerLen  = 4

	// restoreSuffix marks the temporary file a Restore receives into, next to
	// the store file so that the final rename stays within one file system.
	restoreSuffix = ".restore-"
)

// ErrBadSnapshot means a snapshot stream was truncated, damaged, or not a store
// of this schema. The current state is left as it was.
var ErrBadSnapshot = errors.New("bad snapshot")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot implements raft.FSM. It only opens a read transaction; the copy
// happens in Persist, concurrently with later Applies, which bbolt isolates from
// the transaction's view.
func (s *Store) Snapshot() (raft.FSMSnapshot, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	// A store that missed a write must not publish a snapshot: raft would
	// label it with an index whose effects it lacks.
	if err := s.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return nil, fmt.Errorf("store: snapshot: %w", ErrClosed)
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

// snapshot holds a read transaction open from Snapshot until Persist finishes
// or Release is called, whichever is first. While it is open, Close and Restore
// wait for it.
type snapshot struct {
	mu sync.Mutex
	tx *bbolt.Tx // nil once released
}

var _ raft.FSMSnapshot = (*snapshot)(nil)

// Persist implements raft.FSMSnapshot.
func (sn *snapshot) Persist(sink raft.SnapshotSink) error {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.tx == nil {
		_ = sink.Cancel()
		return errors.New("store: persist snapshot: already released")
	}
	err := writeSnapshot(sink, sn.tx)
	// The copy is done; let remaps and Close proceed now rather than when
	// raft gets around to Release.
	sn.releaseLocked()
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("store: persist snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("store: persist snapshot: %w", err)
	}
	return nil
}

// Release implements raft.FSMSnapshot.
func (sn *snapshot) Release() {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	sn.releaseLocked()
}

func (sn *snapshot) releaseLocked() {
	if sn.tx != nil {
		_ = sn.tx.Rollback()
		sn.tx = nil
	}
}

func writeSnapshot(w io.Writer, tx *bbolt.Tx) error {
	size := tx.Size()
	header := make([]byte, 0, snapshotHeaderLen)
	header = append(header, snapshotMagic...)
	header = append(header, snapshotFrameVersion, 0)
	header = binary.BigEndian.AppendUint64(header, uint64(size))
	if _, err := w.Write(header); err != nil {
		return err
	}
	crc := crc32.New(crcTable)
	n, err := tx.WriteTo(io.MultiWriter(w, crc))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("wrote %d bytes of a %d-byte transaction", n, size)
	}
	_, err = w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Restore implements raft.FSM. The snapshot is received into a temporary file
// and checked before anything is replaced; the swap itself (close, rename, fsync
// the directory, reopen) happens under the exclusive lock, so readers see either
// the old state or the new one.
func (s *Store) Restore(rc io.ReadCloser) error {
	defer func() { _ = rc.Close() }()
	if s.closed() {
		return fmt.Errorf("store: restore: %w", ErrClosed)
	}
	tmp, err := s.receive(rc)
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	// After a successful rename there is nothing left to remove.
	defer func() { _ = os.Remove(tmp) }()

	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return fmt.Errorf("store: restore: %w", ErrClosed)
	}
	if err := s.vetSnapshot(tmp); err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if err := s.db.Close(); err != nil {
		s.db = nil
		err = fmt.Errorf("%w: restore: close current state: %w", ErrFailed, err)
		s.failed.Store(&err)
		return err
	}
	s.db = nil
	if err := os.Rename(tmp, s.path); err != nil {
		// The old file is untouched; go back to it.
		return s.reopenLocked(fmt.Errorf("store: restore: %w", err))
	}
	if err := atomicfile.SyncDir(filepath.Dir(s.path)); err != nil {
		// The new state is in place but its rename may not survive a
		// crash; serve it and let raft retry or restore again on restart.
		return s.reopenLocked(fmt.Errorf("store: restore: %w", err))
	}
	if err := s.reopenLocked(nil); err != nil {
		return err
	}
	// The restored state is complete up to its applied index; whatever write
	// failed before is superseded by it.
	s.failed.Store(nil)
	return nil
}

// reopenLocked opens s.path into s.db and returns cause, or the open error (then
// the store is failed: there is no state left to serve).
func (s *Store) reopenLocked(cause error) error {
	s.tally.reset()
	db, err := s.openDB(s.path, nil)
	if err != nil {
		err = fmt.Errorf("%w: restore: reopen: %w", ErrFailed, err)
		s.failed.Store(&err)
		return errors.Join(cause, err)
	}
	s.db = db
	return cause
}

// receive copies a snapshot stream into a synced temporary file next to the
// store and checks it; it returns the file's path. On error no file is left.
func (s *Store) receive(r io.Reader) (path string, err error) {
	f, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+restoreSuffix+"*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(name)
		}
	}()
	size, err := copyFrame(f, r)
	if err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := checkSnapshotFile(name, size, s.opts.Release); err != nil {
		return "", err
	}
	return name, nil
}

// copyFrame checks the frame while copying its body to w and returns the body
// length.
func copyFrame(w io.Writer, r io.Reader) (int64, error) {
	header := make([]byte, snapshotHeaderLen)
	if _, err := io.ReadFull(r, header); err != nil {
		return 0, fmt.Errorf("%w: header: %w", ErrBadSnapshot, err)
	}
	if !bytes.HasPrefix(header, []byte(snapshotMagic)) {
		return 0, fmt.Errorf("%w: no %s magic", ErrBadSnapshot, snapshotMagic)
	}
	if v := header[len(snapshotMagic)]; v < oldestSnapshotFrame || v > snapshotFrameVersion {
		return 0, fmt.Errorf("%w: frame version %d, this binary reads %d to %d", ErrBadSnapshot, v, oldestSnapshotFrame, snapshotFrameVersion)
	}
	size := binary.BigEndian.Uint64(header[len(snapshotMagic)+2:])
	if size == 0 || size > 1<<40 {
		return 0, fmt.Errorf("%w: body length %d", ErrBadSnapshot, size)
	}
	crc := crc32.New(crcTable)
	if err := copyBody(io.MultiWriter(w, crc), r, int64(size)); err != nil {
		return 0, err
	}
	trailer := make([]byte, snapshotTrailerLen+1)
	n, err := io.ReadFull(r, trailer)
	switch {
	case n < snapshotTrailerLen:
		return 0, fmt.Errorf("%w: checksum: %w", ErrBadSnapshot, err)
	case n > snapshotTrailerLen:
		return 0, fmt.Errorf("%w: data after the checksum", ErrBadSnapshot)
	}
	if want, got := binary.BigEndian.Uint32(trailer), crc.Sum32(); want != got {
		return 0, fmt.Errorf("%w: checksum %08x, body hashes to %08x", ErrBadSnapshot, want, got)
	}
	return int64(size), nil
}

func copyBody(w io.Writer, r io.Reader, size int64) error {
	n, err := io.CopyBuffer(w, io.LimitReader(r, size), make([]byte, 1<<20))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%w: body of %d bytes, header says %d", ErrBadSnapshot, n, size)
	}
	return nil
}

// checkSnapshotFile opens a received file read-only and decodes all of it, so a
// snapshot of another schema, or one a bug damaged before checksumming, is
// refused before it replaces anything. Faults from reading past the mapped file
// become errors rather than crashes.
func checkSnapshotFile(path string, size int64, release string) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: unreadable: %v", ErrBadSnapshot, r)
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bbolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("database of %d bytes in a %d-byte file", tx.Size(), size)
		}
		if _, err := checkSchema(tx, release); err != nil {
			return err
		}
		return checkValues(tx)
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	return nil
}

// vetSnapshot holds a received snapshot to the rules this replica applies to
// every command, before it replaces anything: its member list is a claim,
// applied only as far as this replica's witness confirms it against this
// replica's current list (witness.go), and a verdict that differs from this
// replica's own and that the snapshot's evidence, tallied at its latest report
// batch, contradicts is replaced by this replica's own (or dropped). The
// snapshot's rows carry no signatures and are taken as they are (DESIGN.md,
// "What is left"). Called with s.mu held.
func (s *Store) vetSnapshot(path string) error {
	if s.opts.Witness == nil {
		return nil
	}
	var (
		current  map[string]zone.Member
		verdicts map[string]zone.Verdict
	)
	err := s.db.View(func(tx *bbolt.Tx) error {
		ms, err := readMembers(tx)
		if err != nil {
			return err
		}
		current = make(map[string]zone.Member, len(ms))
		for _, m := range ms {
			current[m.Node] = m
		}
		verdicts, err = readVerdicts(tx)
		return err
	})
	if err != nil {
		return err
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: DefaultLockTimeout, NoSync: s.opts.NoSync})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	held := map[string]int{}
	err = db.Update(func(tx *bbolt.Tx) error {
		// A snapshot of a store that kept no claims: its list is the
		// claim.
		if _, ok, err := readClaims(tx); err != nil {
			return err
		} else if !ok {
			ms, err := readMembers(tx)
			if err != nil {
				return err
			}
			if err := putClaims(tx, ms); err != nil {
				return err
			}
		}
		// The snapshot's claim is measured against the list this replica
		// holds now, as a committed member list is.
		_, h, err := settleMembers(tx, s.opts.Witness, current)
		if err != nil {
			return err
		}
		for reason, n := range h {
			held[reason] += n
		}
		return vetVerdicts(tx, verdicts, s.opts.MaxVoteTimeout, held)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for reason, n := range held {
		if c := s.refusals.counter(reason); c != nil {
			c.Add(uint64(n))
		}
	}
	return nil
}

// snapshotVoteTimeout tallies a snapshot's verdicts when the replica sets no
// MaxVoteTimeout: the agent's default --vote-timeout.
const snapshotVoteTimeout = 10 * time.Second

// vetVerdicts keeps each verdict of the snapshot in tx that equals this
// replica's own (own) or that the snapshot's evidence does not contradict.
func vetVerdicts(tx *bbolt.Tx, own map[string]zone.Verdict, voteTimeout time.Duration, held map[string]int) error {
	if voteTimeout <= 0 {
		voteTimeout = snapshotVoteTimeout
	}
	members, err := readMembers(tx)
	if err != nil {
		return err
	}
	last, err := readLastReports(tx)
	if err != nil {
		return err
	}
	matrix, err := readMatrix(tx)
	if err != nil {
		return err
	}
	theirs, err := readVerdicts(tx)
	if err != nil {
		return err
	}
	_, at := evidencePos(tx)
	tally := Tally(members, last, matrix, at, voteTimeout)
	b := tx.Bucket(bucketVerdicts)
	for node, v := range theirs {
		if mine, ok := own[node]; ok && mine == v {
			continue
		}
		t, ok := tally[node]
		if !ok || t.State == zone.Unknown || t.State == v.State {
			continue
		}
		held[RefuseVerdictUnsupported]++
		if mine, ok := own[node]; ok {
			val, err := json.Marshal(mine)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(node), val); err != nil {
				return err
			}
			continue
		}
		if err := b.Delete([]byte(node)); err != nil {
			return err
		}
	}
	return nil
}
