package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// SchemaVersion is the layout of buckets and values below, the one this
// binary writes. Bump it on any change a binary of the previous version would
// misread, and teach migrate the step; Open and Restore read OldestSchema up
// to it, migrate older files forward, and refuse newer ones rather than
// guess.
const SchemaVersion uint32 = 2

// OldestSchema is the oldest layout this binary reads and migrates forward:
// release N−1's (v0.2.0 wrote 1).
const OldestSchema uint32 = 1

// On-disk layout (SchemaVersion 2). Node names are keys as they are; integers are
// big-endian; times are Unix nanoseconds (int64) in UTC.
//
//	meta/schema             uint32 SchemaVersion
//	meta/release            the release that last opened the file for writing (2)
//	meta/applied            uint64 index | uint64 term of the last applied log
//	members/<node>          JSON zone.Member
//	reports/<node>          LastReport: uint64 seq | int64 sent-at | int64 received-at |
//	                        byte api-reachable | key id (rest of the value)
//	matrix/<checker>/<peer> Cell: byte ok | float64 bits score | int64 latency | int64 at
//	verdicts/<node>         JSON zone.Verdict
//	releases/<node>         uint16 level | release (rest): the member's last announcement (2)
//
// Matrix rows are nested buckets so that dropping a checker's row is one
// DeleteBucket. Hot values (cells, last reports) are fixed-width binary because
// a full batch writes thousands of them; rarely written ones are JSON so that
// `bbolt get` output stays readable. (2) marks what schema 2 added to 1.
var (
	bucketMeta     = []byte("meta")
	bucketMembers  = []byte("members")
	bucketReports  = []byte("reports")
	bucketMatrix   = []byte("matrix")
	bucketVerdicts = []byte("verdicts")
	bucketReleases = []byte("releases")

	keySchema  = []byte("schema")
	keyApplied = []byte("applied")
	keyRelease = []byte("release")

	// dataBuckets are every top-level bucket besides meta.
	dataBuckets = [][]byte{bucketMembers, bucketReports, bucketMatrix, bucketVerdicts, bucketReleases}
)

// bucketsSince is the schema version that added each data bucket.
var bucketsSince = map[string]uint32{string(bucketReleases): 2}

const (
	cellLen          = 1 + 8 + 8 + 8
	lastReportFixed  = 8 + 8 + 8 + 1
	appliedLen       = 16
	schemaVersionLen = 4
)

var (
	// ErrSchemaVersion means the file was written with a layout this binary
	// does not read: a newer release's, or one older than N−1.
	ErrSchemaVersion = errors.New("unsupported store schema version")
	// ErrNotStore means the file is a bbolt database but not one of ours.
	ErrNotStore = errors.New("not an edgequorum store")
	// ErrCorrupt means a stored value does not decode; the file was damaged
	// or written by something else.
	ErrCorrupt = errors.New("corrupt store value")
)

// initSchema creates the buckets of an empty database and stamps its version,
// or checks an existing one and migrates it forward. It writes only to a
// database with no buckets at all or one of ours, so opening a foreign bbolt
// file never modifies it. It returns the schema the file had.
func initSchema(db *bbolt.DB, release string, beforeMigrate func(*bbolt.Tx, uint32) error) (uint32, error) {
	fresh, stamped := false, false
	var had uint32
	err := db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMeta) != nil {
			v, err := checkSchema(tx, release)
			had = v
			stamped = string(tx.Bucket(bucketMeta).Get(keyRelease)) == orUnstamped(release)
			if err == nil && v < SchemaVersion && beforeMigrate != nil {
				err = beforeMigrate(tx, v)
			}
			return err
		}
		empty := true
		_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
		if !empty {
			return fmt.Errorf("%w: no %q bucket", ErrNotStore, bucketMeta)
		}
		fresh = true
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !fresh {
		if had == SchemaVersion && stamped {
			return had, nil
		}
		return had, db.Update(func(tx *bbolt.Tx) error {
			if err := migrate(tx, had); err != nil {
				return fmt.Errorf("migrate schema %d to %d: %w", had, SchemaVersion, err)
			}
			return stampRelease(tx, release)
		})
	}
	return SchemaVersion, db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)); err != nil {
			return err
		}
		if err := meta.Put(keyApplied, make([]byte, appliedLen)); err != nil {
			return err
		}
		for _, name := range dataBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return stampRelease(tx, release)
	})
}

// migrate brings a file of schema from up to SchemaVersion within tx, one
// step at a time. Each step only adds: a file it changed reads the same to
// every rule, with nothing known yet where the step added room.
func migrate(tx *bbolt.Tx, from uint32) error {
	for v := from; v < SchemaVersion; v++ {
		switch v {
		case 1: // 1 → 2: members' announcements, none known yet.
			if _, err := tx.CreateBucketIfNotExists(bucketReleases); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: no migration from schema %d", ErrSchemaVersion, v)
		}
	}
	return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion))
}

func stampRelease(tx *bbolt.Tx, release string) error {
	return tx.Bucket(bucketMeta).Put(keyRelease, []byte(orUnstamped(release)))
}

func orUnstamped(release string) string {
	if release == "" {
		return unstamped
	}
	return release
}

// unstamped is what a file says of a build whose Options named no release.
const unstamped = "an unstamped build"

// writtenBy is the release meta/release names, or what the schema tells.
func writtenBy(tx *bbolt.Tx, schema uint32) string {
	if r := tx.Bucket(bucketMeta).Get(keyRelease); len(r) > 0 {
		return string(r)
	}
	if schema == 1 {
		return "v0.2.0"
	}
	return "an unknown release"
}

// checkSchema verifies the version stamp and that every bucket of that
// version exists, so the read API and Apply can assume them once migrate has
// run. It returns the file's schema. self names this binary's release in the
// refusal of a newer file.
func checkSchema(tx *bbolt.Tx, self string) (uint32, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, fmt.Errorf("%w: no %q bucket", ErrNotStore, bucketMeta)
	}
	v := meta.Get(keySchema)
	if len(v) != schemaVersionLen {
		return 0, fmt.Errorf("%w: schema key holds %d bytes", ErrNotStore, len(v))
	}
	got := binary.BigEndian.Uint32(v)
	self = orUnstamped(self)
	switch {
	case got > SchemaVersion:
		return got, fmt.Errorf("%w: the data dir has schema %d, written by edgequorum %s; this is %s, which reads schemas %d to %d: "+
			"run %s or later on it, or, to roll back, restore the copy the upgrade kept (the store file's .schema%d.bak)",
			ErrSchemaVersion, got, writtenBy(tx, got), self, OldestSchema, SchemaVersion, writtenBy(tx, got), SchemaVersion)
	case got < OldestSchema:
		return got, fmt.Errorf("%w: the data dir has schema %d, older than this release (%s) reads (%d to %d): "+
			"upgrade through each release in between, or wipe the data dir and let the member rejoin",
			ErrSchemaVersion, got, self, OldestSchema, SchemaVersion)
	}
	if a := meta.Get(keyApplied); len(a) != appliedLen {
		return got, fmt.Errorf("%w: applied index holds %d bytes", ErrCorrupt, len(a))
	}
	for _, name := range dataBuckets {
		if since, ok := bucketsSince[string(name)]; ok && got < since {
			continue
		}
		if tx.Bucket(name) == nil {
			return got, fmt.Errorf("%w: no %q bucket", ErrCorrupt, name)
		}
	}
	return got, nil
}

// checkValues decodes every stored value. Restore runs it on an incoming
// snapshot before the snapshot replaces anything, so a damaged or foreign file is
// refused while the current state is still in place.
func checkValues(tx *bbolt.Tx) error {
	err := tx.Bucket(bucketMembers).ForEach(func(k, v []byte) error {
		m, err := decodeMember(v)
		if err == nil && m.Node != string(k) {
			err = fmt.Errorf("%w: member %q stored under %q", ErrCorrupt, m.Node, k)
		}
		return err
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketReports).ForEach(func(k, v []byte) error {
		_, err := decodeLastReport(v)
		return err
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketVerdicts).ForEach(func(k, v []byte) error {
		vd, err := decodeVerdict(v)
		if err == nil && vd.Node != string(k) {
			err = fmt.Errorf("%w: verdict for %q stored under %q", ErrCorrupt, vd.Node, k)
		}
		return err
	})
	if err != nil {
		return err
	}
	if rel := tx.Bucket(bucketReleases); rel != nil {
		err = rel.ForEach(func(k, v []byte) error {
			_, err := decodeAnnouncement(v)
			return err
		})
		if err != nil {
			return err
		}
	}
	matrix := tx.Bucket(bucketMatrix)
	return matrix.ForEachBucket(func(k []byte) error {
		return matrix.Bucket(k).ForEach(func(_, v []byte) error {
			_, err := decodeCell(v)
			return err
		})
	})
}

// appliedPos reads the index and term of the last applied log.
func appliedPos(tx *bbolt.Tx) (index, term uint64) {
	v := tx.Bucket(bucketMeta).Get(keyApplied)
	if len(v) != appliedLen {
		return 0, 0
	}
	return binary.BigEndian.Uint64(v[:8]), binary.BigEndian.Uint64(v[8:])
}

func putApplied(tx *bbolt.Tx, index, term uint64) error {
	v := make([]byte, 0, appliedLen)
	v = binary.BigEndian.AppendUint64(v, index)
	v = binary.BigEndian.AppendUint64(v, term)
	return tx.Bucket(bucketMeta).Put(keyApplied, v)
}

func encodeCell(dst []byte, c Cell) []byte {
	ok := byte(0)
	if c.OK {
		ok = 1
	}
	dst = append(dst, ok)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(c.Score))
	dst = binary.BigEndian.AppendUint64(dst, uint64(c.Latency))
	return binary.BigEndian.AppendUint64(dst, uint64(c.At.UnixNano()))
}

func decodeCell(v []byte) (Cell, error) {
	if len(v) != cellLen || v[0] > 1 {
		return Cell{}, fmt.Errorf("%w: matrix cell of %d bytes", ErrCorrupt, len(v))
	}
	return Cell{
		OK:      v[0] == 1,
		Score:   math.Float64frombits(binary.BigEndian.Uint64(v[1:9])),
		Latency: time.Duration(binary.BigEndian.Uint64(v[9:17])),
		At:      unixNano(v[17:25]),
	}, nil
}

func encodeLastReport(r LastReport) []byte {
	v := make([]byte, 0, lastReportFixed+len(r.KeyID))
	v = binary.BigEndian.AppendUint64(v, r.Seq)
	v = binary.BigEndian.AppendUint64(v, uint64(r.SentAt.UnixNano()))
	v = binary.BigEndian.AppendUint64(v, uint64(r.ReceivedAt.UnixNano()))
	reach := byte(0)
	if r.APIReachable {
		reach = 1
	}
	v = append(v, reach)
	return append(v, r.KeyID...)
}

func decodeLastReport(v []byte) (LastReport, error) {
	if len(v) < lastReportFixed || v[24] > 1 {
		return LastReport{}, fmt.Errorf("%w: last report of %d bytes", ErrCorrupt, len(v))
	}
	return LastReport{
		Seq:          binary.BigEndian.Uint64(v[0:8]),
		SentAt:       unixNano(v[8:16]),
		ReceivedAt:   unixNano(v[16:24]),
		APIReachable: v[24] == 1,
		KeyID:        string(v[lastReportFixed:]),
	}, nil
}

func unixNano(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
}

func decodeMember(v []byte) (zone.Member, error) {
	return memberMemo.decode(v, decodeMemberJSON)
}

func decodeMemberJSON(v []byte) (zone.Member, error) {
	var m zone.Member
	if err := decodeJSON(v, &m); err != nil {
		return zone.Member{}, fmt.Errorf("%w: member: %w", ErrCorrupt, err)
	}
	return m, nil
}

func decodeVerdict(v []byte) (zone.Verdict, error) {
	return verdictMemo.decode(v, decodeVerdictJSON)
}

func decodeVerdictJSON(v []byte) (zone.Verdict, error) {
	var vd zone.Verdict
	if err := decodeJSON(v, &vd); err != nil {
		return zone.Verdict{}, fmt.Errorf("%w: verdict: %w", ErrCorrupt, err)
	}
	return vd, nil
}

func decodeJSON(v []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

// encodeAnnouncement is a releases/<node> value.
func encodeAnnouncement(a skew.Announcement) []byte {
	v := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(a.Release)), uint16(a.Level))
	return append(v, a.Release...)
}

func decodeAnnouncement(v []byte) (skew.Announcement, error) {
	if len(v) < 2 {
		return skew.Announcement{}, fmt.Errorf("%w: announcement of %d bytes", ErrCorrupt, len(v))
	}
	a := skew.Announcement{Level: skew.Level(binary.BigEndian.Uint16(v)), Release: string(v[2:])}
	if err := a.Validate(); err != nil {
		return skew.Announcement{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return a, nil
}
