package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/zone"
)

func TestOpenRefusesForeignFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		want    error
	}{
		{"newer schema", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			err = s.db.Update(func(tx *bbolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint32(nil, 7))
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, ErrSchemaVersion},
		{"bbolt file of someone else", func(t *testing.T, path string) {
			writeBolt(t, path, func(tx *bbolt.Tx) error {
				_, err := tx.CreateBucket([]byte("raft-log"))
				return err
			})
		}, ErrNotStore},
		{"missing data bucket", func(t *testing.T, path string) {
			s, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.db.Update(func(tx *bbolt.Tx) error { return tx.DeleteBucket(bucketMatrix) }); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "fsm.db")
			tt.prepare(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{})
			if !errors.Is(err, tt.want) {
				t.Errorf("Open = %v, want %v", err, tt.want)
			}
			if s != nil {
				_ = s.Close()
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Error("a refused Open modified the file")
			}
		})
	}

	t.Run("not a bbolt file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "fsm.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 8192), 0o600); err != nil {
			t.Fatal(err)
		}
		if s, err := Open(path, Options{}); err == nil {
			_ = s.Close()
			t.Error("Open of garbage succeeded")
		}
	})
}

func writeBolt(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
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
}

func TestOpenOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero value", Options{}, true},
		{"no sync", Options{NoSync: true}, true},
		{"negative lock timeout", Options{LockTimeout: -time.Second}, false},
		{"negative mmap size", Options{InitialMmapSize: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(filepath.Join(t.TempDir(), "fsm.db"), tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("Open = %v, want ok=%v", err, tt.ok)
			}
			if s == nil {
				return
			}
			defer s.Close()
			if !s.db.NoFreelistSync || s.db.FreelistType != bbolt.FreelistMapType || s.db.NoSync != tt.opts.NoSync {
				t.Errorf("bbolt options NoFreelistSync=%v FreelistType=%v NoSync=%v",
					s.db.NoFreelistSync, s.db.FreelistType, s.db.NoSync)
			}
		})
	}
}

func TestOpenTimesOutOnLockedFile(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	second, err := Open(s.Path(), Options{LockTimeout: 10 * time.Millisecond})
	if err == nil {
		_ = second.Close()
		t.Fatal("second Open of a file in use succeeded")
	}
}

func TestOpenRemovesRestoreLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "fsm.db")
	leftover := path + restoreSuffix + "123"
	unrelated := filepath.Join(dir, "raft.db")
	for _, p := range []string{leftover, unrelated} {
		if err := os.WriteFile(p, []byte("half a snapshot"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openStore(t, path)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover of an interrupted Restore still there: %v", err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("Open removed an unrelated file: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	populate(t, s)
	data := snapshotBytes(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	reads := map[string]func() error{
		"Members":     func() error { _, err := s.Members(); return err },
		"Member":      func() error { _, err := s.Member("a"); return err },
		"LastReport":  func() error { _, err := s.LastReport("a"); return err },
		"LastReports": func() error { _, err := s.LastReports(); return err },
		"Matrix":      func() error { _, err := s.Matrix(); return err },
		"Verdicts":    func() error { _, err := s.Verdicts(); return err },
		"Verdict":     func() error { _, err := s.Verdict("a"); return err },
		"Snapshot":    func() error { _, err := s.Snapshot(); return err },
		"Restore":     func() error { return s.Restore(readCloser(data)) },
	}
	for name, read := range reads {
		if err := read(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed store = %v, want ErrClosed", name, err)
		}
	}
	if seq := s.LastSeq("a"); seq != 0 {
		t.Errorf("LastSeq on a closed store = %d", seq)
	}
	if idx, term := s.AppliedIndex(); idx != 0 || term != 0 {
		t.Errorf("AppliedIndex on a closed store = %d, %d", idx, term)
	}
	resp := s.Apply(&raft.Log{Index: 99, Type: raft.LogCommand, Data: mustEncode(t, members("a"))})
	if !isErr(resp, ErrClosed) {
		t.Errorf("Apply on a closed store = %v, want ErrClosed", resp)
	}
}

func TestMembersSorted(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	a := newApplier(t, s)
	a.mustApply(members("node-c", "node-a", "node-b"))
	got, err := s.Members()
	if err != nil {
		t.Fatal(err)
	}
	want := []zone.Member{member("node-a"), member("node-b"), member("node-c")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Members = %+v, want %+v", got, want)
	}
}
