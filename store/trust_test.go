package store

import (
	"crypto/ed25519"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// TestReplicaRefusesVerdictsTheEvidenceDoesNotSupport: a leader commits a
// verdict; every replica tallies it again from the same committed reports and
// applies it only when the evidence gives exactly that verdict. Two of three
// members' signed reports say a is dead.
func TestReplicaRefusesVerdictsTheEvidenceDoesNotSupport(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*Store, *applier) {
		s := newStore(t)
		a := newApplier(t, s)
		a.mustApply(members("a", "b", "c"))
		a.mustApply(batch(1, report("b", 1, fail("a"), ok("c", 90)), report("c", 1, fail("a"), ok("b", 90))))
		return s, a
	}
	cases := []struct {
		name   string
		forge  func(a *applier, b *VerdictBatch)
		reason string
	}{
		{"healthy for a dead node", func(_ *applier, b *VerdictBatch) {
			b.Verdicts[0].State, b.Verdicts[0].Pros, b.Verdicts[0].Cons = zone.Healthy, 2, 0
		}, RefuseVerdictUnsupported},
		{"counts that are not the evidence's", func(_ *applier, b *VerdictBatch) { b.Verdicts[0].Cons = 3 }, RefuseVerdictUnsupported},
		{"a zone size that is not the zone's", func(_ *applier, b *VerdictBatch) { b.Verdicts[0].Members = 5 }, RefuseVerdictUnsupported},
		{"unknown replaces nothing", func(_ *applier, b *VerdictBatch) {
			b.Verdicts[0].State, b.Verdicts[0].Cons = zone.Unknown, 0
		}, RefuseVerdictUnsupported},
		{"a vote timeout longer than the replica's", func(_ *applier, b *VerdictBatch) { b.VoteTimeout = time.Hour }, RefuseVerdictUnsupported},
		{"another term than its entry's", func(_ *applier, b *VerdictBatch) { b.Verdicts[0].Term = 9 }, RefuseVerdictTerm},
		{"tallied before the last report batch", func(a *applier, b *VerdictBatch) {
			a.mustApply(batch(2, report("b", 2)))
		}, RefuseVerdictStale},
		{"decided before the evidence it counts", func(_ *applier, b *VerdictBatch) {
			b.Verdicts[0].DecidedAt = at(0)
		}, RefuseVerdictStale},
		{"decided long after: the reports are no longer fresh", func(_ *applier, b *VerdictBatch) {
			b.Verdicts[0].DecidedAt = at(60)
		}, RefuseVerdictUnsupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, a := setup(t)
			s.opts.MaxVoteTimeout = testVoteTimeout
			b := a.decide(at(2), map[string]zone.State{"a": zone.Unhealthy})
			tc.forge(a, &b)
			res := a.mustApply(b)
			if res.Applied != 0 || res.Refused[tc.reason] != 1 {
				t.Fatalf("result %+v, want the verdict refused for %s", res, tc.reason)
			}
			if got := s.Refused(tc.reason); got != 1 {
				t.Errorf("Refused(%s) = %d, want 1", tc.reason, got)
			}
			if _, err := s.Verdict("a"); err == nil {
				t.Error("the refused verdict was stored")
			}
		})
	}
	t.Run("the supported verdict applies", func(t *testing.T) {
		t.Parallel()
		s, a := setup(t)
		s.opts.MaxVoteTimeout = testVoteTimeout
		if res := a.mustApply(a.decide(at(2), map[string]zone.State{"a": zone.Unhealthy})); res.Applied != 1 {
			t.Fatalf("result %+v", res)
		}
		if v, err := s.Verdict("a"); err != nil || v.State != zone.Unhealthy || v.Cons != 2 {
			t.Fatalf("Verdict(a) = %+v, %v", v, err)
		}
	})
	t.Run("a legacy batch names no basis", func(t *testing.T) {
		t.Parallel()
		s, a := setup(t)
		b := a.decide(at(2), map[string]zone.State{"a": zone.Unhealthy})
		body, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte{FormatVersion, byte(TypeVerdictBatch)}, body...)
		a.index++
		res, ok := s.Apply(&raft.Log{Index: a.index, Term: 1, Type: raft.LogCommand, Data: data}).(*ApplyResult)
		if !ok || res.Applied != 0 || res.Refused[RefuseVerdictUnchecked] != 1 {
			t.Fatalf("legacy batch: %+v", res)
		}
	})
}

// fakeWitness is a replica's view of the cluster, set by the test.
type fakeWitness struct {
	mu    sync.Mutex
	known bool
	regs  map[string]Registration // nodes in the zone
}

func newFakeWitness(nodes ...string) *fakeWitness {
	w := &fakeWitness{known: true, regs: map[string]Registration{}}
	for _, n := range nodes {
		w.register(n, nodeKey(n))
	}
	return w
}

func (w *fakeWitness) register(node string, key ed25519.PrivateKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := member(node)
	w.regs[node] = Registration{Key: zone.EncodeNodeKey(key.Public().(ed25519.PublicKey)), RaftAddress: m.RaftAddress, ProbeAddress: m.ProbeAddress}
}

func (w *fakeWitness) remove(node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.regs, node)
}

func (w *fakeWitness) setKnown(v bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known = v
}

func (w *fakeWitness) Lookup(node string) (Registration, bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, in := w.regs[node]
	return r, in, w.known
}

func witnessStore(t *testing.T, w Witness) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{Witness: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func keyOf(t *testing.T, s *Store, node string) string {
	t.Helper()
	m, err := s.Member(node)
	if err != nil {
		t.Fatalf("Member(%s): %v", node, err)
	}
	return m.PublicKey
}

// TestReplicaPinsOnlyKeysTheNodesRegister: the key re-pin a stolen box
// committed as leader — its own key, or a fresh one, for every other member —
// is held back by every replica whose own view of the cluster shows the keys
// the members' Nodes register, and by every replica that cannot see the
// cluster; nothing pins a key to two members.
func TestReplicaPinsOnlyKeysTheNodesRegister(t *testing.T) {
	t.Parallel()
	stolen := nodeKey("c")
	_, fresh, _ := ed25519.GenerateKey(nil)
	repin := func(key ed25519.PrivateKey) MemberSet {
		m := members("a", "b", "c")
		for i := range m.Members {
			if m.Members[i].Node != "c" {
				m.Members[i].PublicKey = zone.EncodeNodeKey(key.Public().(ed25519.PublicKey))
			}
		}
		return m
	}
	for _, tc := range []struct {
		name   string
		set    MemberSet
		known  bool
		reason string
	}{
		{"the stolen box's own key", repin(stolen), true, HoldUnregistered},
		{"a fresh key", repin(fresh), true, HoldUnregistered},
		{"a fresh key while the cloud is out of sight", repin(fresh), false, HoldUnregistered},
		{"the stolen box's own key while the cloud is out of sight", repin(stolen), false, HoldUnregistered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newFakeWitness("a", "b", "c")
			s := witnessStore(t, w)
			a := newApplier(t, s)
			a.mustApply(members("a", "b", "c"))
			w.setKnown(tc.known)
			res := a.mustApply(tc.set)
			if res.Refused[tc.reason] == 0 {
				t.Fatalf("result %+v, want refusals for %s", res, tc.reason)
			}
			for _, n := range []string{"a", "b", "c"} {
				if got, want := keyOf(t, s, n), member(n).PublicKey; got != want {
					t.Errorf("%s's key is %s, want its own %s", n, got, want)
				}
			}
			// Reports signed by the real members still apply; one signed
			// with the re-pinned key does not.
			forged := report("a", 2, fail("b"))
			if err := forged.SignNode(stolen); err != nil {
				t.Fatal(err)
			}
			res = a.mustApply(batch(3, report("b", 1, ok("a", 90)), forged))
			if res.Applied != 1 || res.Refused[RefuseSignature] != 1 {
				t.Errorf("reports after the re-pin: %+v", res)
			}
		})
	}
	t.Run("a key another member holds", func(t *testing.T) {
		t.Parallel()
		w := newFakeWitness("a", "b", "c")
		s := witnessStore(t, w)
		a := newApplier(t, s)
		a.mustApply(members("a", "b", "c"))
		// c registers a's public key on its own Node (it may write only its
		// own), and the leader pins it for c.
		w.register("c", nodeKey("a"))
		m := members("a", "b", "c")
		m.Members[2].PublicKey = member("a").PublicKey
		res := a.mustApply(m)
		if res.Refused[HoldKeyOfAnother] == 0 {
			t.Fatalf("result %+v, want %s", res, HoldKeyOfAnother)
		}
		if keyOf(t, s, "c") == member("a").PublicKey || keyOf(t, s, "a") != member("a").PublicKey {
			t.Fatalf("a's key pinned for c: a=%s c=%s", keyOf(t, s, "a"), keyOf(t, s, "c"))
		}
	})
}

// TestReplicaSettlesWhatItsViewConfirmsLater: a wiped node's new key, a new
// member and a departure that this replica's view did not show yet when the
// member list committed are applied once it does; a departure of a node whose
// Node still carries the zone label never is.
func TestReplicaSettlesWhatItsViewConfirmsLater(t *testing.T) {
	t.Parallel()
	w := newFakeWitness("a", "b", "c")
	s := witnessStore(t, w)
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c"))

	_, wiped, _ := ed25519.GenerateKey(nil)
	next := members("a", "b", "d")
	next.Members[1].PublicKey = zone.EncodeNodeKey(wiped.Public().(ed25519.PublicKey))
	next.Members[1].ServerID = "id-b-2"
	res := a.mustApply(next) // b's new key, d and c's departure: none confirmed yet
	if res.Refused[HoldUnregistered] != 2 || res.Refused[HoldStillInZone] != 1 {
		t.Fatalf("result %+v", res)
	}
	ms, _ := s.Members()
	if len(ms) != 3 || ms[2].Node != "c" || keyOf(t, s, "b") != member("b").PublicKey {
		t.Fatalf("members after the unconfirmed list: %+v", ms)
	}

	w.register("b", wiped)
	w.register("d", nodeKey("d"))
	w.remove("c")
	if changed, err := s.Settle(); err != nil || !changed {
		t.Fatalf("Settle = %v, %v", changed, err)
	}
	ms, _ = s.Members()
	var names []string
	for _, m := range ms {
		names = append(names, m.Node)
	}
	if len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "d" || keyOf(t, s, "b") != next.Members[1].PublicKey {
		t.Fatalf("members after Settle: %+v", ms)
	}
	if changed, err := s.Settle(); err != nil || changed {
		t.Fatalf("a second Settle changed %v, %v", changed, err)
	}
}

// TestSettleRestoresAKeyRepinnedInAnOldDataDir: a data dir written before
// replicas checked keys may hold a member pinned to a key its Node does not
// register; Settle restores the registered one.
func TestSettleRestoresAKeyRepinnedInAnOldDataDir(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "fsm.db")
	old, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := newApplier(t, old)
	m := members("a", "b", "c")
	for i := range m.Members {
		m.Members[i].PublicKey = member("c").PublicKey
	}
	a.mustApply(m)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	w := newFakeWitness("a", "b", "c")
	w.setKnown(false)
	s, err := Open(path, Options{Witness: w})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Settle(); err != nil {
		t.Fatal(err)
	}
	if keyOf(t, s, "a") != member("c").PublicKey {
		t.Fatal("Settle changed a key while the cloud was out of sight")
	}
	w.setKnown(true)
	if _, err := s.Settle(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if got := keyOf(t, s, n); got != member(n).PublicKey {
			t.Errorf("%s's key %s, want the one its Node registers", n, got)
		}
	}
}

// TestRestoreHoldsASnapshotToTheSameRules: a snapshot that pins a key no Node
// registers, or carries a verdict its own evidence contradicts, does not
// replace this replica's key or verdict.
func TestRestoreHoldsASnapshotToTheSameRules(t *testing.T) {
	t.Parallel()
	// The forger's state: c's key pinned for a, and "healthy" for a while
	// b and c say it is dead.
	forger := newStore(t)
	fa := newApplier(t, forger)
	m := members("a", "b", "c")
	m.Members[0].PublicKey = member("c").PublicKey
	fa.mustApply(m)
	fa.mustApply(batch(10, report("b", 1, fail("a")), report("c", 1, fail("a"))))
	forged := verdict("a", zone.Healthy)
	storeVerdicts(t, forger, forged)
	data := snapshotBytes(t, forger)

	w := newFakeWitness("a", "b", "c")
	s := witnessStore(t, w)
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c"))
	mine := verdict("a", zone.Unhealthy)
	storeVerdicts(t, s, mine)

	if err := s.Restore(readCloser(data)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		if got := keyOf(t, s, n); got != member(n).PublicKey {
			t.Errorf("%s's key %s after the snapshot, want its own", n, got)
		}
	}
	if v, err := s.Verdict("a"); err != nil || v != mine {
		t.Errorf("Verdict(a) = %+v, %v after the snapshot; want this replica's %+v", v, err, mine)
	}
	if s.Refused(RefuseVerdictUnsupported) != 1 || s.Refused(HoldUnregistered) == 0 {
		t.Errorf("refusals: verdict %d, members %d", s.Refused(RefuseVerdictUnsupported), s.Refused(HoldUnregistered))
	}
}

// TestReplicaAppliesARecoveryOnlyToSilentMembersWithoutAVote: an operator's
// recovery judges the lost voters unhealthy although the survivors are too few
// for a tally; a replica applies that only for members that are no voters of
// its latest Raft configuration and have been silent for the vote timeout.
func TestReplicaAppliesARecoveryOnlyToSilentMembersWithoutAVote(t *testing.T) {
	t.Parallel()
	servers := map[string]bool{"id-a": true, "id-b": true}
	s, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{MaxVoteTimeout: testVoteTimeout,
		Voters: func() (map[string]bool, bool) { return servers, true }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newApplier(t, s)
	a.mustApply(members("a", "b", "c", "d", "e"))
	// c and d died long ago; e reported a moment ago; a and b survive.
	a.mustApply(batch(1, report("c", 1, ok("a", 90)), report("d", 1, ok("a", 90))))
	a.mustApply(batch(30, report("a", 1, fail("c")), report("b", 1, fail("c")), report("e", 1, ok("a", 90))))
	judge := func(nodes ...string) VerdictBatch {
		b := VerdictBatch{Basis: a.index, VoteTimeout: testVoteTimeout, Recovery: true}
		for _, n := range nodes {
			b.Verdicts = append(b.Verdicts, zone.Verdict{Node: n, State: zone.Unhealthy, Members: 5, Term: 1, Leader: "a", DecidedAt: at(35)})
		}
		return b
	}
	res := a.mustApply(judge("c", "d", "e", "a"))
	if res.Applied != 2 || res.Refused[RefuseVerdictUnsupported] != 2 {
		t.Fatalf("recovery verdicts: %+v, want c and d applied, e (it reports) and a (a voter) refused", res)
	}
	for node, want := range map[string]bool{"c": true, "d": true, "e": false, "a": false} {
		if _, err := s.Verdict(node); (err == nil) != want {
			t.Errorf("verdict of %s stored %v, want %v", node, err == nil, want)
		}
	}
	// Without a configuration to tell the voters, nothing.
	servers = nil
	other, err := Open(filepath.Join(t.TempDir(), "fsm.db"), Options{MaxVoteTimeout: testVoteTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	o := newApplier(t, other)
	o.mustApply(members("a", "b", "c"))
	o.mustApply(batch(30, report("a", 1, fail("c"))))
	b := VerdictBatch{Basis: o.index, VoteTimeout: testVoteTimeout, Recovery: true,
		Verdicts: []zone.Verdict{{Node: "c", State: zone.Unhealthy, Members: 3, Term: 1, Leader: "a", DecidedAt: at(35)}}}
	if res := o.mustApply(b); res.Applied != 0 {
		t.Fatalf("a recovery verdict applied without a configuration: %+v", res)
	}
}
