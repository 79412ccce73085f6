package raftzone

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/store"
)

// TestAMemberUpgradedFromTheReleaseBeforeKeepsItsCopyUntilItReports: a
// member restarted on a data dir of schema 1 (v0.2.0's layout) migrates it,
// keeps a copy while it has not yet started cleanly, drops the copy once the
// zone committed its first report, and announces itself.
func TestAMemberUpgradedFromTheReleaseBeforeKeepsItsCopyUntilItReports(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	z.waitConverged(30*time.Second, 3)
	z.stop("node-3")
	for _, f := range []string{"state.db", "view.db"} {
		asReleaseBefore(t, filepath.Join(z.nodes["node-3"].dir, f))
	}
	z.start("node-3")
	n := z.nodes["node-3"]
	poll.Until(t, 30*time.Second, "the copies dropped after a clean start", func() (bool, string) {
		baks, _ := filepath.Glob(filepath.Join(n.dir, "*"+store.BackupSuffix(1)))
		return len(baks) == 0, "still there"
	})
	if logs := n.logs.String(); !strings.Contains(logs, "migrated it, keeping a copy") || !strings.Contains(logs, "started cleanly on the migrated data dir") {
		t.Error("the member did not log its migration and clean start")
	}
	z.waitVerdicts(30*time.Second, allHealthy(z.names()))
	l := z.waitLeader(10 * time.Second)
	poll.Until(t, 20*time.Second, "node-3's announcement committed", func() (bool, string) {
		said, _ := l.srv.store.Announcements()
		want := skew.Announcement{Release: buildinfo.Version(), Level: skew.Current()}
		return said["node-3"] == want, said["node-3"].String()
	})
}

// asReleaseBefore makes a store file of this release look as v0.2.0 left
// it: schema 1, without what schema 2 added.
func asReleaseBefore(t *testing.T, path string) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		if err := meta.Put([]byte("schema"), binary.BigEndian.AppendUint32(nil, 1)); err != nil {
			return err
		}
		if err := meta.Delete([]byte("release")); err != nil {
			return err
		}
		return tx.DeleteBucket([]byte("releases"))
	})
	if err != nil {
		t.Fatal(err)
	}
}
