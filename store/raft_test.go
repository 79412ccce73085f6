package store

import (
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// These tests run the store under real hashicorp/raft with its in-memory
// transport and log store: the leader's Apply responses, replication to every
// replica, a late joiner caught up by InstallSnapshot (our Restore), and the
// log replay after a restart.

// waitLimit fails a test that would otherwise hang; nothing depends on its length.
const waitLimit = 30 * time.Second

// watchedFSM is the store with a signal after every change, so tests wait for
// a replica to reach an index instead of sleeping.
type watchedFSM struct {
	*Store
	mu       sync.Mutex
	changed  chan struct{}
	restores atomic.Int32
}

func watch(s *Store) *watchedFSM { return &watchedFSM{Store: s, changed: make(chan struct{})} }

func (w *watchedFSM) ApplyBatch(logs []*raft.Log) []any {
	defer w.notify()
	return w.Store.ApplyBatch(logs)
}

func (w *watchedFSM) Apply(l *raft.Log) any { return w.ApplyBatch([]*raft.Log{l})[0] }

func (w *watchedFSM) Restore(rc io.ReadCloser) error {
	defer w.notify()
	w.restores.Add(1)
	return w.Store.Restore(rc)
}

func (w *watchedFSM) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watchedFSM) waitIndex(t *testing.T, index uint64) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		w.mu.Lock()
		changed := w.changed
		w.mu.Unlock()
		if got, _ := w.AppliedIndex(); got >= index {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			got, _ := w.AppliedIndex()
			t.Fatalf("replica stuck at index %d, want %d", got, index)
		}
	}
}

// node is one raft server over a store. Its log store and snapshot store
// outlive restarts, as the agent's files do.
type node struct {
	id    raft.ServerID
	path  string
	fsm   *watchedFSM
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	trans *raft.InmemTransport
	raft  *raft.Raft
}

func newNode(t *testing.T, id string) *node {
	t.Helper()
	n := &node{id: raft.ServerID(id), path: filepath.Join(t.TempDir(), "fsm.db"),
		logs: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore()}
	n.start(t, true)
	t.Cleanup(func() { n.stop(t) })
	return n
}

func (n *node) start(t *testing.T, skipRestore bool) {
	t.Helper()
	s, err := Open(n.path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.fsm = watch(s)
	conf := raft.DefaultConfig()
	conf.LocalID = n.id
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 1 << 20 // snapshots only when the test asks
	conf.TrailingLogs = 1
	conf.NoSnapshotRestoreOnStart = skipRestore
	conf.LogOutput = io.Discard
	_, n.trans = raft.NewInmemTransport(raft.ServerAddress(n.id))
	r, err := raft.NewRaft(conf, n.fsm, n.logs, n.logs, n.snaps, n.trans)
	if err != nil {
		t.Fatal(err)
	}
	n.raft = r
}

func (n *node) stop(t *testing.T) {
	t.Helper()
	if n.raft == nil {
		return
	}
	if err := n.raft.Shutdown().Error(); err != nil {
		t.Errorf("shutdown %s: %v", n.id, err)
	}
	_ = n.trans.Close()
	if err := n.fsm.Close(); err != nil {
		t.Errorf("close %s: %v", n.id, err)
	}
	n.raft = nil
}

func (n *node) awaitLeadership(t *testing.T) {
	t.Helper()
	select {
	case <-n.raft.LeaderCh():
	case <-time.After(waitLimit):
		t.Fatalf("%s never became leader", n.id)
	}
}

// apply appends cmd through raft and returns the response and the log index.
func (n *node) apply(t *testing.T, cmd Command) (any, uint64) {
	t.Helper()
	f := n.raft.Apply(mustEncode(t, cmd), waitLimit)
	if err := f.Error(); err != nil {
		t.Fatalf("raft apply %v: %v", cmd.Type(), err)
	}
	return f.Response(), f.Index()
}

func connect(nodes ...*node) {
	for _, a := range nodes {
		for _, b := range nodes {
			if a != b {
				a.trans.Connect(b.trans.LocalAddr(), b.trans)
			}
		}
	}
}

func TestRaftReplicas(t *testing.T) {
	t.Parallel()
	n0, n1, n2 := newNode(t, "n0"), newNode(t, "n1"), newNode(t, "n2")
	connect(n0, n1, n2)
	// The founder bootstraps alone and adds the others, as genesis does.
	boot := raft.Configuration{Servers: []raft.Server{{ID: n0.id, Address: n0.trans.LocalAddr()}}}
	if err := n0.raft.BootstrapCluster(boot).Error(); err != nil {
		t.Fatal(err)
	}
	n0.awaitLeadership(t)
	if err := n0.raft.AddVoter(n1.id, n1.trans.LocalAddr(), 0, waitLimit).Error(); err != nil {
		t.Fatal(err)
	}

	resp, _ := n0.apply(t, members("a", "b", "c"))
	if r, ok := resp.(*ApplyResult); !ok || r.Applied != 3 {
		t.Fatalf("member set response %+v", resp)
	}
	resp, _ = n0.apply(t, batch(1, report("a", 1, ok("b", 90)), report("ghost", 1)))
	if r, ok := resp.(*ApplyResult); !ok || r.Applied != 1 || r.Skipped != 1 {
		t.Fatalf("report batch response %+v", resp)
	}
	f := n0.raft.Apply([]byte{FormatVersion + 1, byte(TypeMemberSet)}, waitLimit)
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	if !isErr(f.Response(), ErrUnknownVersion) {
		t.Fatalf("bad command response %v, want ErrUnknownVersion", f.Response())
	}
	for i := range 5 {
		n0.apply(t, batch(2+i, report("b", uint64(1+i), ok("a", float64(10*i)), fail("c"))))
	}
	n0.apply(t, VerdictBatch{Verdicts: []zone.Verdict{verdict("a", zone.Healthy)}})

	// n2 joins after the leader compacted its log, as a member whose data dir
	// was wiped does: it can only catch up from a snapshot.
	if err := n0.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if err := n0.raft.AddVoter(n2.id, n2.trans.LocalAddr(), 0, waitLimit).Error(); err != nil {
		t.Fatal(err)
	}
	_, last := n0.apply(t, batch(9, report("c", 1, ok("a", 1), ok("b", 2))))

	want := readAPI(t, n0.fsm.Store)
	for _, n := range []*node{n1, n2} {
		n.fsm.waitIndex(t, last)
		if got := readAPI(t, n.fsm.Store); !reflect.DeepEqual(got, want) {
			t.Errorf("replica %s differs from the leader\n got %+v\nwant %+v", n.id, got, want)
		}
	}
	if n2.fsm.restores.Load() == 0 {
		t.Error("the late joiner was not caught up by a snapshot")
	}
}

func TestRaftRestartReplaysIdempotently(t *testing.T) {
	t.Parallel()
	for _, skipRestore := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoSnapshotRestoreOnStart=%v", skipRestore), func(t *testing.T) {
			t.Parallel()
			n := newNode(t, "n0")
			boot := raft.Configuration{Servers: []raft.Server{{ID: n.id, Address: n.trans.LocalAddr()}}}
			if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
				t.Fatal(err)
			}
			n.awaitLeadership(t)
			n.apply(t, members("a", "b"))
			n.apply(t, batch(1, report("a", 1, ok("b", 90))))
			if err := n.raft.Snapshot().Error(); err != nil {
				t.Fatal(err)
			}
			// Logs after the snapshot are what raft replays.
			n.apply(t, batch(2, report("a", 2, fail("b")), report("b", 1, ok("a", 70))))
			n.apply(t, VerdictBatch{Verdicts: []zone.Verdict{verdict("b", zone.Unhealthy)}})
			before := readAPI(t, n.fsm.Store)

			n.stop(t)
			n.start(t, skipRestore)
			n.awaitLeadership(t)
			if err := n.raft.Barrier(waitLimit).Error(); err != nil {
				t.Fatal(err)
			}
			if after := readAPI(t, n.fsm.Store); !reflect.DeepEqual(before, after) {
				t.Errorf("restart changed state\nbefore %+v\n after %+v", before, after)
			}
			resp, _ := n.apply(t, batch(3, report("a", 3, ok("b", 99))))
			if r, ok := resp.(*ApplyResult); !ok || r.Applied != 1 || r.AlreadyApplied {
				t.Errorf("apply after restart: %+v", resp)
			}
		})
	}
}
