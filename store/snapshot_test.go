package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/zone"
)

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		target func(t *testing.T) *Store
	}{
		{"fresh store", func(t *testing.T) *Store { return newStore(t) }},
		{"store with other state", func(t *testing.T) *Store {
			s := newStore(t)
			a := newApplier(t, s)
			a.mustApply(members("a", "e", "ghost"))
			a.mustApply(batch(7, report("e", 40, ok("a", 1), ok("ghost", 2))))
			storeVerdicts(t, s, verdict("ghost", zone.Healthy))
			for range 20 {
				a.mustApply(batch(8))
			}
			return s
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := newStore(t)
			populate(t, src)
			want := readAPI(t, src)
			data := snapshotBytes(t, src)

			dst := tt.target(t)
			if err := dst.Restore(readCloser(data)); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if got := readAPI(t, dst); !reflect.DeepEqual(got, want) {
				t.Errorf("restored store answers differently\n got %+v\nwant %+v", got, want)
			}
			if got, want := rawDump(t, dst), rawDump(t, src); !reflect.DeepEqual(got, want) {
				t.Errorf("restored buckets differ\n got %v\nwant %v", got, want)
			}
			// The restored state keeps working as an FSM from its index on.
			a := newApplier(t, dst)
			if res := a.mustApply(batch(9, report("a", 3, fail("b")))); res.Applied != 1 {
				t.Errorf("apply after restore: %+v", res)
			}
			assertNoLeftovers(t, dst)
		})
	}
}

// TestSnapshotThroughRaftStore persists through raft's own file snapshot store,
// which is what the agent uses, and restores what it reads back.
func TestSnapshotThroughRaftStore(t *testing.T) {
	t.Parallel()
	src := newStore(t)
	populate(t, src)
	idx, term := src.AppliedIndex()

	snaps, err := raft.NewFileSnapshotStore(t.TempDir(), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, idx, term, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	_, rc, err := snaps.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	dst := newStore(t)
	if err := dst.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if got, want := readAPI(t, dst), readAPI(t, src); !reflect.DeepEqual(got, want) {
		t.Errorf("restored store answers differently\n got %+v\nwant %+v", got, want)
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	t.Parallel()
	src := newStore(t)
	populate(t, src)
	good := snapshotBytes(t, src)
	body := good[snapshotHeaderLen : len(good)-snapshotTrailerLen]

	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte(strings.Repeat("not a snapshot ", 1000))},
		{"wrong magic", append([]byte("XQSNAP"), good[6:]...)},
		{"unknown frame version", patch(good, len(snapshotMagic), 9)},
		{"header only", good[:snapshotHeaderLen]},
		{"truncated body", good[:len(good)/2]},
		{"missing checksum", good[:len(good)-snapshotTrailerLen]},
		{"flipped body byte", patch(good, snapshotHeaderLen+len(body)/2, good[snapshotHeaderLen+len(body)/2]^0x40)},
		{"flipped checksum", patch(good, len(good)-1, good[len(good)-1]^1)},
		{"trailing data", append(append([]byte{}, good...), 0)},
		{"zero length", frame(nil)},
		{"garbage under a valid checksum", frame(bytes.Repeat([]byte{0xa5}, 8192))},
		{"truncated database under a valid checksum", frame(body[:len(body)-4096])},
		{"foreign bbolt file", frame(boltFile(t, func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucket([]byte("foo"))
			return err
		}))},
		{"newer schema", frame(rewrite(t, body, func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
		}))},
		{"missing bucket", frame(rewrite(t, body, func(tx *bbolt.Tx) error {
			return tx.DeleteBucket(bucketVerdicts)
		}))},
		{"undecodable member", frame(rewrite(t, body, func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketMembers).Put([]byte("a"), []byte("{"))
		}))},
		{"short cell", frame(rewrite(t, body, func(tx *bbolt.Tx) error {
			return tx.Bucket(bucketMatrix).Bucket([]byte("a")).Put([]byte("b"), []byte{1})
		}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			a := newApplier(t, s)
			a.mustApply(members("a", "e"))
			a.mustApply(batch(3, report("e", 2, ok("a", 12))))
			before := readState(t, s)
			err := s.Restore(readCloser(tt.data))
			if !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("Restore = %v, want ErrBadSnapshot", err)
			}
			if after := readState(t, s); !reflect.DeepEqual(before, after) {
				t.Errorf("failed Restore changed state\nbefore %+v\n after %+v", before, after)
			}
			if err := s.Err(); err != nil {
				t.Errorf("failed Restore failed the store: %v", err)
			}
			assertNoLeftovers(t, s)
		})
	}
}

// TestApplyDuringPersist checks raft's contract that Apply runs while a snapshot
// is being written, and that the snapshot holds the state of its own moment.
func TestApplyDuringPersist(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	populate(t, s)
	want := readAPI(t, s)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()

	// Persist blocks on the pipe until we read it, so it is mid-write while we
	// apply.
	pr, pw := io.Pipe()
	persisted := make(chan error, 1)
	go func() {
		persisted <- snap.Persist(&pipeSink{PipeWriter: pw})
	}()
	head := make([]byte, snapshotHeaderLen)
	if _, err := io.ReadFull(pr, head); err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c", "d", "e"))
	a.mustApply(batch(30, report("e", 1, ok("a", 1)), report("a", 30, fail("e"))))

	rest, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-persisted; err != nil {
		t.Fatalf("Persist: %v", err)
	}
	dst := newStore(t)
	if err := dst.Restore(readCloser(append(head, rest...))); err != nil {
		t.Fatal(err)
	}
	if got := readAPI(t, dst); !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot saw later applies\n got %+v\nwant %+v", got, want)
	}
}

type pipeSink struct{ *io.PipeWriter }

func (p *pipeSink) ID() string    { return "pipe" }
func (p *pipeSink) Cancel() error { return p.CloseWithError(errors.New("cancelled")) }

// TestReadsDuringRestore checks that every read sees either the state before the
// restore or the one after, never a mix or an error.
func TestReadsDuringRestore(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	populate(t, s)
	old := readAPI(t, s)

	other := newStore(t)
	a := newApplier(t, other)
	a.mustApply(members("b", "c", "e"))
	a.mustApply(batch(50, report("e", 9, ok("b", 33), fail("c")), report("c", 2, ok("e", 3))))
	storeVerdicts(t, other, verdict("e", zone.Healthy))
	next := readAPI(t, other)
	data := snapshotBytes(t, other)

	reads := []struct {
		name string
		read func() (any, error)
		old  any
		next any
	}{
		{"Members", func() (any, error) { return s.Members() }, old.Members, next.Members},
		{"LastReports", func() (any, error) { return s.LastReports() }, old.Reports, next.Reports},
		{"Matrix", func() (any, error) { return s.Matrix() }, old.Matrix, next.Matrix},
		{"Verdicts", func() (any, error) { return s.Verdicts() }, old.Verdicts, next.Verdicts},
		{"AppliedIndex", func() (any, error) { i, _ := s.AppliedIndex(); return i, nil }, old.Index, next.Index},
	}
	stop := make(chan struct{})
	started := sync.WaitGroup{}
	var wg sync.WaitGroup
	errs := make(chan error, len(reads))
	for _, r := range reads {
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			for {
				got, err := r.read()
				switch {
				case err != nil:
					errs <- fmt.Errorf("%s: %w", r.name, err)
					return
				case !reflect.DeepEqual(got, r.old) && !reflect.DeepEqual(got, r.next):
					errs <- fmt.Errorf("%s saw a third state: %+v", r.name, got)
					return
				}
				if first {
					started.Done()
					first = false
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	started.Wait()
	restoreErr := s.Restore(readCloser(data))
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if restoreErr != nil {
		t.Fatalf("Restore: %v", restoreErr)
	}
	if got := readAPI(t, s); !reflect.DeepEqual(got, next) {
		t.Errorf("after Restore\n got %+v\nwant %+v", got, next)
	}
}

func TestSnapshotReleaseWithoutPersist(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	populate(t, s)
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap.Release()
	snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err == nil || !sink.cancelled {
		t.Errorf("Persist after Release = %v (cancelled %v), want error and cancelled sink", err, sink.cancelled)
	}
	// A released snapshot no longer pins the file: Close must not wait.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// patch returns a copy of b with b[i] = v.
func patch(b []byte, i int, v byte) []byte {
	c := append([]byte{}, b...)
	c[i] = v
	return c
}

// frame wraps body as a snapshot stream with a correct checksum, so the tests
// reach the checks behind it.
func frame(body []byte) []byte {
	out := append([]byte(snapshotMagic), snapshotFrameVersion, 0)
	out = binary.BigEndian.AppendUint64(out, uint64(len(body)))
	out = append(out, body...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(body, crcTable))
}

// boltFile returns the bytes of a new bbolt file prepared by fn.
func boltFile(t *testing.T, fn func(*bbolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rewrite returns a copy of the store file body changed by fn.
func rewrite(t *testing.T, body []byte, fn func(*bbolt.Tx) error) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertNoLeftovers(t *testing.T, s *Store) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(s.Path()) {
			t.Errorf("left behind %s", e.Name())
		}
	}
}
