package raftzone

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/internal/slots/gridtick"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
)

// clusterWitness is this member's own view of the cluster as its replica checks
// member lists with (store.Witness): the keys and addresses the zone's Nodes
// register, from the cluster's member list, and only while this member reaches
// the apiserver. With the cloud out of sight nothing is confirmed: a leader
// can then change no member's key, add no member and drop none on this replica
// (DESIGN.md, "Trust").
type clusterWitness struct {
	s *Member

	mu   sync.Mutex
	at   time.Time
	view map[string]store.Registration // nil when not known
}

// witnessRefresh is how long one read of the member list answers lookups: a
// member list of 129 is read once per apply or settle, not once per member.
const witnessRefresh = 250 * time.Millisecond

// Lookup implements store.Witness. It never reads the store: the store calls it
// inside Apply.
func (w *clusterWitness) Lookup(node string) (store.Registration, bool, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.at.IsZero() || now.Sub(w.at) >= witnessRefresh {
		w.at, w.view = now, w.read()
	}
	if w.view == nil {
		return store.Registration{}, false, false
	}
	reg, in := w.view[node]
	return reg, in, true
}

func (w *clusterWitness) read() map[string]store.Registration {
	s := w.s
	if !s.reachesAPI() {
		return nil
	}
	cands, ok := s.deps.Members.Candidates()
	if !ok {
		return nil
	}
	out := make(map[string]store.Registration, len(cands))
	for _, c := range cands {
		reg := store.Registration{RaftAddress: c.RaftAddress, ProbeAddress: c.ProbeAddress}
		if c.PublicKey != nil {
			reg.Key = zone.EncodeNodeKey(c.PublicKey)
		}
		out[c.Node] = reg
	}
	return out
}

// settlePeriod is how often a replica applies what its view of the cluster
// confirmed since a member list was committed.
const settlePeriod = 2 * time.Second

// settleLoop applies, every settlePeriod, what this replica held back of the
// committed member list once its view of the cluster confirms it, and
// restores pinned keys that differ from the ones the Nodes register
// (store.Settle).
func (s *Member) settleLoop(ctx context.Context) {
	t := gridtick.NewOn(s.clock, slots.ZoneGrid(s.cfg.Zone), s.cfg.ReportPeriod, settlePeriod, rand.Float64())
	defer t.Stop()
	for {
		s.settle()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Next()
		}
	}
}

func (s *Member) settle() {
	changed, err := s.store.Settle()
	switch {
	case err != nil:
		s.log.Warn("settling the member list against the cluster's view failed", "err", err)
	case changed:
		s.members.invalidate()
		s.port.Reread()
		s.log.Info("member list settled: applied what the cluster now confirms of the committed list, or restored keys the Nodes register")
	}
}
