package raftzone

import (
	"slices"
	"strings"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zoneport"
)

// This file holds what callers outside the leader's duties read of the zone:
// no caller outside raftzone gets the store itself, only these answers.

// Peers returns the zone's other members: the cluster's member list while it
// is available, else the replicated member list, which survives a cloud
// outage and a restart during one. It is the one answer to "who are my peers"
// that both joining (whom to ask) and probing (whom to judge) use.
func (s *Member) Peers() []zoneport.Candidate { return s.peers(s.isStarted()) }

// peers is Peers for callers that know whether the store is open: Run's own
// loops read it from their first round.
func (s *Member) peers(storeOpen bool) []zoneport.Candidate {
	var out []zoneport.Candidate
	if cs, ok := s.deps.Members.Candidates(); ok {
		for _, c := range cs {
			if c.Node != s.cfg.Node {
				out = append(out, c)
			}
		}
	} else if storeOpen {
		ms, err := s.state().Members()
		if err != nil {
			s.log.Error("read member list", "err", err)
		}
		for _, m := range ms {
			if m.Node != s.cfg.Node {
				out = append(out, zoneport.Candidate{Node: m.Node, ProbeAddress: m.ProbeAddress, RaftAddress: m.RaftAddress, KubeletPort: m.KubeletPort})
			}
		}
	}
	slices.SortFunc(out, func(a, b zoneport.Candidate) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// lastReports reads every member's last committed report; on a read error it
// returns none, which makes every member look stale rather than fresh.
func (s *Member) lastReports() map[string]store.LastReport {
	last, err := s.state().LastReports()
	if err != nil {
		s.log.Error("read last reports", "err", err)
		return nil
	}
	return last
}
