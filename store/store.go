package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// Defaults for Options fields left zero.
const (
	// DefaultLockTimeout bounds the wait for the file lock, so a second agent
	// pointed at the same data dir fails instead of hanging.
	DefaultLockTimeout = 10 * time.Second
	// DefaultInitialMmapSize is large enough that a zone of a few hundred
	// members never remaps. A remap waits for every open read transaction,
	// and a snapshot's read transaction stays open while raft persists it, so
	// a remap would stall Apply for the length of a snapshot write.
	DefaultInitialMmapSize = 64 << 20
)

var (
	// ErrClosed is returned by reads on a closed store.
	ErrClosed = errors.New("store is closed")
	// ErrNotFound means the node has no record of the kind asked for.
	ErrNotFound = errors.New("not found")
	// ErrFailed is returned by Apply and Snapshot once a write transaction
	// has failed. The store then refuses further writes until it is reopened
	// or restored: applying later logs on top of a missing one would make
	// this replica silently diverge from the zone.
	ErrFailed = errors.New("store failed")
)

// Options tune Open. The zero value is the production setting.
type Options struct {
	// NoSync skips fsync on commit. Only for tests and benchmarks that do not
	// measure durability: with it, a crash can lose applied logs while raft
	// believes they are applied.
	NoSync bool
	// LockTimeout bounds the wait for the file lock; zero means
	// DefaultLockTimeout.
	LockTimeout time.Duration
	// InitialMmapSize is the initial size of the memory map in bytes; zero
	// means DefaultInitialMmapSize. It reserves address space; bbolt also
	// extends the file by up to 16 MiB ahead of use, as a sparse file.
	InitialMmapSize int
	// SigMemo, when set, remembers the report signatures this process
	// verified, so a report the leader's intake verified is not verified
	// again when the leader applies it. Nil verifies every report.
	SigMemo *zone.SigMemo
	// Witness is the replica's own view of the cluster: which key each node
	// registers and whether it is in the zone (witness.go). A replica checks
	// every member list a leader commits against it. Nil takes member lists
	// as committed: only for stores that are no replica of a zone (a
	// spare's view, tests of other rules).
	Witness Witness
	// Voters returns the server IDs of the voters of this replica's latest
	// Raft configuration; known is false while it has none. A recovery's
	// verdicts (VerdictBatch.Recovery) apply only to members that are no
	// voters. Nil refuses every recovery verdict.
	Voters func() (voters map[string]bool, known bool)
	// MaxVoteTimeout is the longest vote timeout a leader may tally a
	// verdict with for this replica to accept it: this member's own
	// --vote-timeout, so a leader cannot count opinions older than every
	// honest member would. Zero accepts any.
	MaxVoteTimeout time.Duration
	// Level is the protocol level this replica reads (package skew); zero
	// means skew.Current(). Only a test that simulates a member of another
	// release sets it.
	Level skew.Level
	// Release is this build's release, stamped into the file and named
	// when a newer release's file is refused. Empty says "an unstamped
	// build".
	Release string
}

// Validate reports options that cannot work, naming the field.
func (o Options) Validate() error {
	if o.LockTimeout < 0 {
		return fmt.Errorf("store: Options.LockTimeout %v is negative", o.LockTimeout)
	}
	if o.InitialMmapSize < 0 {
		return fmt.Errorf("store: Options.InitialMmapSize %d is negative", o.InitialMmapSize)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.LockTimeout == 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.InitialMmapSize == 0 {
		o.InitialMmapSize = DefaultInitialMmapSize
	}
	if o.Level == skew.Unannounced {
		o.Level = skew.Current()
	}
	return o
}

func (o Options) bolt() *bbolt.Options {
	return &bbolt.Options{
		Timeout: o.LockTimeout,
		NoSync:  o.NoSync,
		// The freelist is rebuilt from the pages on open instead of being
		// written on every commit; commits are what we do most.
		NoFreelistSync:  true,
		FreelistType:    bbolt.FreelistMapType,
		InitialMmapSize: o.InitialMmapSize,
	}
}

// LastReport is the latest applied report of one sender. Its results are merged
// into the Matrix; what stays here is what the leader needs per sender: the seq
// that rejects replays, freshness, and apiserver reachability.
type LastReport struct {
	// Seq is the sender's sequence number; the next report must exceed it.
	Seq uint64 `json:"seq"`
	// SentAt is the sender's clock, informative only.
	SentAt time.Time `json:"sentAt"`
	// ReceivedAt is the leader's clock when it batched the report; freshness
	// is judged against it because every replica agrees on it.
	ReceivedAt time.Time `json:"receivedAt"`
	// APIReachable is whether the sender reached the Kubernetes API.
	APIReachable bool `json:"apiReachable"`
	// KeyID is the zone key the report was signed with.
	KeyID string `json:"keyID"`
}

// Cell is one checker's latest opinion of one peer.
type Cell struct {
	OK      bool          `json:"ok"`
	Score   float64       `json:"score"`
	Latency time.Duration `json:"latency"`
	// At is the receive time of the report that last changed the cell. A
	// report without a result for this peer refreshes the checker's
	// LastReport but not this time.
	At time.Time `json:"at"`
}

// Matrix maps checker → checked → Cell. It holds only current members, and
// never a member's opinion of itself.
type Matrix map[string]map[string]Cell

// Store is one replica of a zone's state in a bbolt file. It implements
// raft.BatchingFSM; see the package comment for the concurrency contract.
type Store struct {
	path string
	opts Options

	// applyMu serialises the writers: Apply, ApplyBatch, Restore and the
	// start of Snapshot. raft already calls them from one goroutine; the lock
	// keeps direct callers (tests, tools) within the same contract.
	applyMu sync.Mutex

	// mu guards db, the handle Restore swaps. Readers and Apply hold it
	// shared (bbolt orders their transactions); Restore and Close hold it
	// exclusively, so nobody sees the handle mid-swap.
	mu sync.RWMutex
	db *bbolt.DB

	// failed is set when a write transaction fails; see ErrFailed.
	failed atomic.Pointer[error]

	// refusals count what this replica refused or held back on apply, by
	// reason; see Refused.
	refusals refusals

	// unreadable counts committed entries this replica could not decode;
	// see Unreadable.
	unreadable unreadable
	// tally keeps the matrix rows tallies decoded (tallyrows.go).
	tally tallyRows
}

// unreadable counts log entries that did not decode and keeps the last
// error, so a member of an older release can say what it met.
type unreadable struct {
	mu      sync.Mutex
	total   uint64
	tooNew  uint64
	last    error
	lastIdx uint64
}

func (u *unreadable) note(index uint64, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.total++
	if errors.Is(err, skew.ErrTooNew) {
		u.tooNew++
	}
	u.last, u.lastIdx = err, index
}

// Unreadable says how many committed log entries this replica skipped
// because it could not decode them since the store was opened, how many of
// those a newer release wrote (skew.ErrTooNew), and the last one's error
// (nil if none). A non-zero tooNew means the zone's leader used a format
// this member does not read: the zone judges on, this member's copy of the
// state lacks those entries until it is upgraded.
func (s *Store) Unreadable() (total, tooNew uint64, last error) {
	s.unreadable.mu.Lock()
	defer s.unreadable.mu.Unlock()
	return s.unreadable.total, s.unreadable.tooNew, s.unreadable.last
}

// Announcements returns what each member last announced of its release,
// by node; a member without an entry has announced nothing (a release
// before levels, or no report yet).
func (s *Store) Announcements() (map[string]skew.Announcement, error) {
	out := make(map[string]skew.Announcement)
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketReleases).ForEach(func(k, v []byte) error {
			a, err := decodeAnnouncement(v)
			if err != nil {
				return fmt.Errorf("announcement of %q: %w", k, err)
			}
			out[string(k)] = a
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: announcements: %w", err)
	}
	return out, nil
}

// Open opens or creates the store file at path. The directory must exist.
func Open(path string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Store{path: path, opts: opts.withDefaults()}
	db, err := s.openDB(path, s.keepBeforeMigrating)
	if err != nil {
		return nil, err
	}
	// Only with the file lock held: another process that holds it may be
	// in the middle of a Restore of its own.
	removeRestoreLeftovers(path)
	s.db = db
	return s, nil
}

// openDB opens path and brings its schema up to date; beforeMigrate, if
// set, runs on the old file first.
func (s *Store) openDB(path string, beforeMigrate func(*bbolt.Tx, uint32) error) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, 0o600, s.opts.bolt())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if _, err := initSchema(db, s.opts.Release, beforeMigrate); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return db, nil
}

// BackupSuffix names the copy Open keeps of a data dir it migrates forward:
// the store file's name, then ".schema<N>.bak" for the schema the copy is
// of. An operator rolls back to the release before by putting it in place
// of the store file.
func BackupSuffix(schema uint32) string { return fmt.Sprintf(".schema%d.bak", schema) }

// keepBeforeMigrating copies the file, as it is before the migration, next
// to it, synced, so a release that fails to start on the migrated file can
// be rolled back with the data it had.
func (s *Store) keepBeforeMigrating(tx *bbolt.Tx, schema uint32) error {
	bak := s.path + BackupSuffix(schema)
	tmp := bak + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("keep a copy before migrating: %w", err)
	}
	_, err = tx.WriteTo(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, bak)
	}
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(bak))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("keep a copy before migrating: %w", err)
	}
	return nil
}

// MigrationBackups are the copies earlier opens kept before migrating this
// store's file. The agent drops them (DropMigrationBackups) once its member
// has started cleanly on the migrated file; until then they are the way
// back.
func (s *Store) MigrationBackups() []string {
	found, _ := filepath.Glob(filepath.Join(filepath.Dir(s.path), escapeGlob(filepath.Base(s.path))+".schema*.bak"))
	return found
}

// DropMigrationBackups removes the copies MigrationBackups lists.
func (s *Store) DropMigrationBackups() error {
	var errs []error
	for _, f := range s.MigrationBackups() {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: drop migration backups: %w", err)
	}
	return nil
}

// removeRestoreLeftovers deletes temporary files of a Restore that a crash
// interrupted; until the rename, they are garbage.
func removeRestoreLeftovers(path string) {
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), escapeGlob(filepath.Base(path))+restoreSuffix+"*"))
	for _, f := range leftovers {
		_ = os.Remove(f)
	}
}

func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}

// Close releases the file. It waits for snapshots not yet released, since
// their read transactions pin the file. Closing twice is a no-op.
func (s *Store) Close() error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("store: close %s: %w", s.path, err)
	}
	return nil
}

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Err returns the write failure that stopped Apply (wrapping ErrFailed), or nil
// while the store is healthy. An agent should report itself not ready and
// restart: raft then replays the logs this replica missed.
func (s *Store) Err() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Store) closed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db == nil
}

// view runs fn in a read transaction on the current handle.
func (s *Store) view(fn func(*bbolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ErrClosed
	}
	return s.db.View(fn)
}

// Members returns every member, sorted by node name.
func (s *Store) Members() ([]zone.Member, error) {
	var out []zone.Member
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		out, err = readMembers(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	return out, nil
}

func readMembers(tx *bbolt.Tx) ([]zone.Member, error) {
	var out []zone.Member
	// bbolt iterates keys in byte order, which is the order we promise.
	err := tx.Bucket(bucketMembers).ForEach(func(_, v []byte) error {
		m, err := decodeMember(v)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

// Member returns the member record of node, or an error wrapping ErrNotFound.
func (s *Store) Member(node string) (zone.Member, error) {
	var m zone.Member
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketMembers).Get([]byte(node))
		if v == nil {
			return ErrNotFound
		}
		var err error
		m, err = decodeMember(v)
		return err
	})
	if err != nil {
		return zone.Member{}, fmt.Errorf("store: member %q: %w", node, err)
	}
	return m, nil
}

// LastReport returns the latest applied report of node, or an error wrapping
// ErrNotFound if none was applied since it (last) joined.
func (s *Store) LastReport(node string) (LastReport, error) {
	var r LastReport
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketReports).Get([]byte(node))
		if v == nil {
			return ErrNotFound
		}
		var err error
		r, err = decodeLastReport(v)
		return err
	})
	if err != nil {
		return LastReport{}, fmt.Errorf("store: last report of %q: %w", node, err)
	}
	return r, nil
}

// LastReports returns the latest applied report of every sender that has one.
func (s *Store) LastReports() (map[string]LastReport, error) {
	var out map[string]LastReport
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		out, err = readLastReports(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: last reports: %w", err)
	}
	return out, nil
}

func readLastReports(tx *bbolt.Tx) (map[string]LastReport, error) {
	out := make(map[string]LastReport)
	err := tx.Bucket(bucketReports).ForEach(func(k, v []byte) error {
		r, err := decodeLastReport(v)
		if err != nil {
			return err
		}
		out[string(k)] = r
		return nil
	})
	return out, err
}

// LastSeq is the seq of node's latest applied report: intake rejects a report
// whose seq does not exceed it. Zero means none was applied (or the store is
// closed); Apply enforces the rule again, so a stale answer here can only
// let a replay into a batch, never into the state.
func (s *Store) LastSeq(node string) uint64 {
	r, err := s.LastReport(node)
	if err != nil {
		return 0
	}
	return r.Seq
}

// Matrix returns every stored cell.
func (s *Store) Matrix() (Matrix, error) {
	var out Matrix
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		out, err = readMatrix(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: matrix: %w", err)
	}
	return out, nil
}

func readMatrix(tx *bbolt.Tx) (Matrix, error) {
	out := make(Matrix)
	// The leader reads the whole matrix every vote period. The same node
	// names key every row, so each is made into a string once, and each row
	// is sized like the one before it instead of growing cell by cell.
	names := make(map[string]string)
	size := 0
	matrix := tx.Bucket(bucketMatrix)
	err := matrix.ForEachBucket(func(checker []byte) error {
		row, err := decodeRowNamed(matrix.Bucket(checker), size, names)
		size = len(row)
		if len(row) > 0 {
			out[string(checker)] = row
		}
		return err
	})
	return out, err
}

// MatrixRow returns one checker's committed opinions (checked → cell), empty if
// it has none. A member diffs its next report against its own row, which is far
// cheaper than reading the whole matrix in a large zone.
func (s *Store) MatrixRow(checker string) (map[string]Cell, error) {
	var row map[string]Cell
	err := s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketMatrix).Bucket([]byte(checker))
		if b == nil {
			row = map[string]Cell{}
			return nil
		}
		var err error
		row, err = decodeRow(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: matrix row of %s: %w", checker, err)
	}
	return row, nil
}

// RowGaps names the members, checker aside, that checker's row holds no
// cell about, sorted. The leader tells a reporting member what its replica
// lacks: a replica drops a result about a peer its own view of the cluster
// has not confirmed yet (Witness), and the member, which diffs its reports
// against its own replica's row, would otherwise never send that result
// again. The leader answers every report so, hence one pass over the keys of
// both buckets, in step (bbolt keeps them sorted), and nothing decoded.
func (s *Store) RowGaps(checker string) ([]string, error) {
	var gaps []string
	err := s.view(func(tx *bbolt.Tx) error {
		members := tx.Bucket(bucketMembers).Cursor()
		var cells *bbolt.Cursor
		if row := tx.Bucket(bucketMatrix).Bucket([]byte(checker)); row != nil {
			cells = row.Cursor()
		}
		var cell []byte
		if cells != nil {
			cell, _ = cells.First()
		}
		for peer, _ := members.First(); peer != nil; peer, _ = members.Next() {
			for cell != nil && bytes.Compare(cell, peer) < 0 {
				cell, _ = cells.Next()
			}
			if string(peer) != checker && !bytes.Equal(cell, peer) {
				gaps = append(gaps, string(peer))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: row gaps of %s: %w", checker, err)
	}
	return gaps, nil
}

func decodeRow(b *bbolt.Bucket) (map[string]Cell, error) {
	return decodeRowNamed(b, 0, nil)
}

// decodeRowNamed decodes a row into a map sized for size cells. With names
// non-nil, a peer name already in it is shared rather than allocated again, and
// new ones are added.
func decodeRowNamed(b *bbolt.Bucket, size int, names map[string]string) (map[string]Cell, error) {
	row := make(map[string]Cell, size)
	err := b.ForEach(func(peer, v []byte) error {
		c, err := decodeCell(v)
		if err != nil {
			return err
		}
		name, ok := names[string(peer)]
		if !ok {
			name = string(peer)
			if names != nil {
				names[name] = name
			}
		}
		row[name] = c
		return nil
	})
	return row, err
}

// Verdicts returns the latest committed verdict of every member that has one.
func (s *Store) Verdicts() (map[string]zone.Verdict, error) {
	var out map[string]zone.Verdict
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		out, err = readVerdicts(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: verdicts: %w", err)
	}
	return out, nil
}

func readVerdicts(tx *bbolt.Tx) (map[string]zone.Verdict, error) {
	out := make(map[string]zone.Verdict)
	err := tx.Bucket(bucketVerdicts).ForEach(func(k, v []byte) error {
		vd, err := decodeVerdict(v)
		if err != nil {
			return err
		}
		out[string(k)] = vd
		return nil
	})
	return out, err
}

// Verdict returns node's latest committed verdict, or an error wrapping
// ErrNotFound.
func (s *Store) Verdict(node string) (zone.Verdict, error) {
	var vd zone.Verdict
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketVerdicts).Get([]byte(node))
		if v == nil {
			return ErrNotFound
		}
		var err error
		vd, err = decodeVerdict(v)
		return err
	})
	if err != nil {
		return zone.Verdict{}, fmt.Errorf("store: verdict of %q: %w", node, err)
	}
	return vd, nil
}

// AppliedIndex is the raft index and term of the last log that Apply took into
// account; logs at or below it are skipped. A rejected command (bad encoding)
// does not move it, since it changed nothing. Zero on a closed store.
func (s *Store) AppliedIndex() (index, term uint64) {
	_ = s.view(func(tx *bbolt.Tx) error {
		index, term = appliedPos(tx)
		return nil
	})
	return index, term
}

// sortedKeys returns m's keys in order, so Apply touches bbolt in the same
// order on every replica.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
