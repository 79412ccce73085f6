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

	"github.com/edgequorum/edgequorum/zone"
)

// SchemaVersion is the layout of buckets and values below. Bump it on any change
// a binary of the previous version would misread; Open and Restore refuse files
// of another version rather than guess.
const SchemaVersion uint32 = 1

// On-disk layout (SchemaVersion 1). Node names are keys as they are; integers are
// big-endian; times are Unix nanoseconds (int64) in UTC.
//
//	meta/schema             uint32 SchemaVersion
//	meta/applied            uint64 index | uint64 term of the last applied log
//	members/<node>          JSON zone.Member
//	reports/<node>          LastReport: uint64 seq | int64 sent-at | int64 received-at |
//	                        byte api-reachable | key id (rest of the value)
//	matrix/<checker>/<peer> Cell: byte ok | float64 bits score | int64 latency | int64 at
//	verdicts/<node>         JSON zone.Verdict
//
// Matrix rows are nested buckets so that dropping a checker's row is one
// DeleteBucket. Hot values (cells, last reports) are fixed-width binary because
// a full batch writes thousands of them; rarely written ones are JSON so that
// `bbolt get` output stays readable.
var (
	bucketMeta     = []byte("meta")
	bucketMembers  = []byte("members")
	bucketReports  = []byte("reports")
	bucketMatrix   = []byte("matrix")
	bucketVerdicts = []byte("verdicts")

	keySchema  = []byte("schema")
	keyApplied = []byte("applied")

	// dataBuckets are every top-level bucket besides meta.
	dataBuckets = [][]byte{bucketMembers, bucketReports, bucketMatrix, bucketVerdicts}
)

const (
	cellLen          = 1 + 8 + 8 + 8
	lastReportFixed  = 8 + 8 + 8 + 1
	appliedLen       = 16
	schemaVersionLen = 4
)

var (
	// ErrSchemaVersion means the file was written with a layout this binary
	// does not know.
	ErrSchemaVersion = errors.New("unsupported store schema version")
	// ErrNotStore means the file is a bbolt database but not one of ours.
	ErrNotStore = errors.New("not an edgequorum store")
	// ErrCorrupt means a stored value does not decode; the file was damaged
	// or written by something else.
	ErrCorrupt = errors.New("corrupt store value")
)

// initSchema creates the buckets of an empty database and stamps its version, or
// checks an existing one. It writes only to a database with no buckets at all, so
// opening a foreign bbolt file never modifies it.
func initSchema(db *bbolt.DB) error {
	fresh := false
	err := db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketMeta) != nil {
			return checkSchema(tx)
		}
		empty := true
		_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return nil })
		if !empty {
			return fmt.Errorf("%w: no %q bucket", ErrNotStore, bucketMeta)
		}
		fresh = true
		return nil
	})
	if err != nil || !fresh {
		return err
	}
	return db.Update(func(tx *bbolt.Tx) error {
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
		return nil
	})
}

// checkSchema verifies the version stamp and that every bucket exists, so the
// read API and Apply can assume them.
func checkSchema(tx *bbolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("%w: no %q bucket", ErrNotStore, bucketMeta)
	}
	v := meta.Get(keySchema)
	if len(v) != schemaVersionLen {
		return fmt.Errorf("%w: schema key holds %d bytes", ErrNotStore, len(v))
	}
	if got := binary.BigEndian.Uint32(v); got != SchemaVersion {
		return fmt.Errorf("%w: file has version %d, this binary reads %d", ErrSchemaVersion, got, SchemaVersion)
	}
	if a := meta.Get(keyApplied); len(a) != appliedLen {
		return fmt.Errorf("%w: applied index holds %d bytes", ErrCorrupt, len(a))
	}
	for _, name := range dataBuckets {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("%w: no %q bucket", ErrCorrupt, name)
		}
	}
	return nil
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
	var m zone.Member
	if err := decodeJSON(v, &m); err != nil {
		return zone.Member{}, fmt.Errorf("%w: member: %w", ErrCorrupt, err)
	}
	return m, nil
}

func decodeVerdict(v []byte) (zone.Verdict, error) {
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
