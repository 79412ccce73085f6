package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// asSchema1 turns a store file into the layout release v0.2.0 wrote: schema
// 1, no releases bucket, no release stamp.
func asSchema1(t *testing.T, path string) {
	t.Helper()
	writeBolt(t, path, func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint32(nil, 1)); err != nil {
			return err
		}
		if err := meta.Delete(keyRelease); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketReleases)
	})
}

// releaseBeforeFile writes a populated store file at path in the layout
// v0.2.0 wrote and returns its state as the read API shows it.
func releaseBeforeFile(t *testing.T, path string) state {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, s)
	want := readAPI(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	asSchema1(t, path)
	return want
}

func TestOpenMigratesTheReleaseBeforesDataDirAndKeepsACopy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fsm.db")
	want := releaseBeforeFile(t, path)
	old := dumpFile(t, path)

	s, err := Open(path, Options{Release: "v0.3.0"})
	if err != nil {
		t.Fatalf("Open of a schema-1 data dir: %v", err)
	}
	if got := readAPI(t, s); !reflect.DeepEqual(got, want) {
		t.Errorf("state changed in the migration:\nbefore %+v\n after %+v", want, got)
	}
	if _, err := s.Announcements(); err != nil {
		t.Errorf("Announcements after migration: %v", err)
	}
	baks := s.MigrationBackups()
	if len(baks) != 1 || !strings.HasSuffix(baks[0], BackupSuffix(1)) {
		t.Fatalf("MigrationBackups = %v, want one %s copy", baks, BackupSuffix(1))
	}
	if kept := dumpFile(t, baks[0]); !reflect.DeepEqual(kept, old) {
		t.Error("the kept copy does not hold what the file held before the migration")
	}
	// A restart before the member started cleanly keeps the copy; a clean
	// start drops it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	if got := s.MigrationBackups(); len(got) != 1 {
		t.Fatalf("after a second open: MigrationBackups = %v, want the copy kept", got)
	}
	if err := s.DropMigrationBackups(); err != nil {
		t.Fatal(err)
	}
	if got := s.MigrationBackups(); len(got) != 0 {
		t.Errorf("after DropMigrationBackups: %v", got)
	}
}

func TestOpenRefusesANewerReleasesDataDirNamingIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fsm.db")
	s, err := Open(path, Options{Release: "v0.9.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Release: "v0.3.0"})
	if !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Open = %v, want ErrSchemaVersion", err)
	}
	for _, part := range []string{"written by edgequorum v0.9.0", "this is v0.3.0", "run v0.9.0 or later", BackupSuffix(SchemaVersion)} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q does not say %q", err, part)
		}
	}
}

func TestAReportsAnnouncementIsKeptPerMemberUntilItLeaves(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c"))
	a.mustApply(batch(1, announced(report("a", 1, ok("b", 90))), report("b", 1, ok("a", 90))))
	got, err := s.Announcements()
	if err != nil {
		t.Fatal(err)
	}
	if want := (skew.Announcement{Release: "v0.3.0", Level: skew.Level1}); got["a"] != want || len(got) != 1 {
		t.Errorf("Announcements = %v, want only a: %v", got, want)
	}
	// A report without one (a release before levels) clears it.
	a.mustApply(batch(2, report("a", 2, ok("b", 90))))
	if got, _ := s.Announcements(); len(got) != 0 {
		t.Errorf("after an unannounced report: %v, want none", got)
	}
	a.mustApply(batch(3, announced(report("a", 3, ok("b", 90)))))
	a.mustApply(members("b", "c"))
	if got, _ := s.Announcements(); len(got) != 0 {
		t.Errorf("after a left: %v, want none", got)
	}
}

// announced is r as a v0.3.0 member says it, signed again.
func announced(r zone.Report) zone.Report {
	r.Release, r.Level = "v0.3.0", skew.Level1
	return resign(r)
}

func TestAForgedAnnouncementIsNotTheSenders(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("a", "b"))
	r := announced(report("a", 1, ok("b", 90)))
	r.Level = 9 // changed after a signed it
	res := a.mustApply(batch(1, r))
	if res.Refused[RefuseSignature] != 1 {
		t.Errorf("Refused = %v, want the report refused as not a's", res.Refused)
	}
	if got, _ := s.Announcements(); len(got) != 0 {
		t.Errorf("Announcements = %v after a forged one", got)
	}
}

func TestANewerReleasesEntryIsSkippedWholeAndCounted(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("a", "b"))
	before := readState(t, s)
	for _, data := range [][]byte{
		{FormatVersion + 1, byte(TypeMemberSet), '{', '}'},
		{FormatVersion, 200, '{', '}'},
	} {
		a.index++
		resp := s.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: data})
		if err, _ := resp.(error); !errors.Is(err, skew.ErrTooNew) {
			t.Errorf("apply %x = %v, want an error wrapping skew.ErrTooNew", data[:2], resp)
		}
	}
	if after := readState(t, s); !reflect.DeepEqual(before, after) {
		t.Error("an entry this replica cannot read changed its state")
	}
	total, tooNew, last := s.Unreadable()
	if total != 2 || tooNew != 2 || last == nil {
		t.Errorf("Unreadable = %d, %d, %v; want 2, 2, an error", total, tooNew, last)
	}
	// The zone goes on: the next entry applies.
	a.mustApply(batch(1, report("a", 1, ok("b", 90))))
}

func TestAReaderBelowATypesLevelCallsItNewer(t *testing.T) {
	t.Parallel()
	data := mustEncode(t, members("a"))
	if _, err := DecodeCommandAt(data, skew.Unannounced); !errors.Is(err, skew.ErrTooNew) || !errors.Is(err, ErrUnknownType) {
		t.Errorf("DecodeCommandAt(level 0) = %v, want ErrUnknownType and skew.ErrTooNew", err)
	}
	if _, err := DecodeCommandAt(data, skew.Level1); err != nil {
		t.Errorf("DecodeCommandAt(level 1) = %v", err)
	}
	for typ := range CommandType(255) {
		if l, ok := TypeLevel(typ); ok && l > skew.Current() {
			t.Errorf("type %v is of %v, above what this build speaks (%v)", typ, l, skew.Current())
		}
	}
}

// dumpFile reads every key and value of a bbolt file, by bucket path.
func dumpFile(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	if err := db.View(func(tx *bbolt.Tx) error { return dumpTx(tx, out) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestASnapshotOfTheReleaseBeforeIsRestoredAndMigrated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "leader.db")
	want := releaseBeforeFile(t, path)
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var frame bytes.Buffer
	if err := db.View(func(tx *bbolt.Tx) error { return writeSnapshot(&frame, tx) }); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()

	follower := newStore(t)
	if err := follower.Restore(io.NopCloser(&frame)); err != nil {
		t.Fatalf("Restore of a schema-1 snapshot: %v", err)
	}
	if got := readAPI(t, follower); !reflect.DeepEqual(got, want) {
		t.Errorf("restored state differs:\nwant %+v\n got %+v", want, got)
	}
	if _, err := follower.Announcements(); err != nil {
		t.Errorf("Announcements after restoring a schema-1 snapshot: %v", err)
	}
}
