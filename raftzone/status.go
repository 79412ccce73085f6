package raftzone

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/zone"
)

// Status is one member's view of its zone, served at /v1/status and printed by
// `edgequorum status`.
type Status struct {
	Node          string `json:"node"`
	Zone          string `json:"zone"`
	ServerID      string `json:"serverID"`
	State         string `json:"state"`
	Term          uint64 `json:"term"`
	Leader        string `json:"leader,omitempty"`
	LeaderAddress string `json:"leaderAddress,omitempty"`
	CommitIndex   uint64 `json:"commitIndex"`
	AppliedIndex  uint64 `json:"appliedIndex"`
	LastIndex     uint64 `json:"lastIndex"`
	Joined        bool   `json:"joined"`
	// Voters is how many voters the zone's configuration holds, WantVoters
	// how many it should hold for its member count (--voters at most).
	// Forming is true while it holds fewer: the zone is still being built,
	// or short of voters it could have.
	Voters     int            `json:"voters"`
	WantVoters int            `json:"wantVoters"`
	Forming    bool           `json:"forming"`
	Ready      bool           `json:"ready"`
	Members    []MemberStatus `json:"members"`
	Verdicts   []zone.Verdict `json:"verdicts"`
	// APIReachable is whether this member reaches the Kubernetes API.
	APIReachable bool `json:"apiReachable"`
	// LastAPIWrite is this member's last successful API write (leaders only
	// write); PendingWrites the verdicts waiting for the apiserver.
	LastAPIWrite  *time.Time `json:"lastAPIWrite,omitempty"`
	PendingWrites int        `json:"pendingWrites"`
	At            time.Time  `json:"at"`
}

// MemberStatus is one member as seen in a Status.
type MemberStatus struct {
	Node         string `json:"node"`
	ServerID     string `json:"serverID"`
	RaftAddress  string `json:"raftAddress"`
	ProbeAddress string `json:"probeAddress"`
	// Suffrage is voter, nonvoter, or empty when the member is not (yet) in
	// the Raft configuration.
	Suffrage string `json:"suffrage"`
	// LastReportAgeSeconds is how long ago the zone committed the member's
	// last report; absent when it never reported.
	LastReportAgeSeconds *float64 `json:"lastReportAgeSeconds,omitempty"`
	Seq                  uint64   `json:"seq"`
	APIReachable         bool     `json:"apiReachable"`
}

// readySlack is how far the applied index may trail the commit index for a
// member to count as caught up; a member applying a burst is not unready.
const readySlack = 64

// Status returns this member's current view. It reads only local state, so it
// answers even when the zone has no leader.
func (s *Server) Status() Status {
	now := s.clock.Now().UTC()
	st := Status{Node: s.cfg.Node, Zone: s.cfg.Zone, At: now,
		APIReachable: s.reachesAPI()}
	if w := s.deps.Writes; w != nil {
		if t := w.LastWrite(); !t.IsZero() {
			t = t.UTC()
			st.LastAPIWrite = &t
		}
		st.PendingWrites = w.Pending()
	}
	if !s.isStarted() {
		st.State = "Starting"
		return st
	}
	st.ServerID = s.serverID
	st.State = s.raft.State().String()
	st.Term = s.raft.CurrentTerm()
	st.CommitIndex, st.AppliedIndex, st.LastIndex = s.raft.CommitIndex(), s.raft.AppliedIndex(), s.raft.LastIndex()
	leaderNode, leaderAddr, hasLeader := s.Leader()
	st.Leader, st.LeaderAddress = leaderNode, leaderAddr

	cfg, _ := s.configuration()
	_, st.Joined = cfg[s.serverID]
	st.Ready = st.Joined && hasLeader && st.AppliedIndex+readySlack >= st.CommitIndex

	members, _ := s.store.Members()
	last := s.lastReports()
	for _, m := range members {
		ms := MemberStatus{Node: m.Node, ServerID: m.ServerID, RaftAddress: m.RaftAddress, ProbeAddress: m.ProbeAddress}
		if srv, ok := cfg[m.ServerID]; ok {
			ms.Suffrage = suffrage(srv.Suffrage)
		}
		if lr, ok := last[m.Node]; ok {
			age := now.Sub(lr.ReceivedAt).Seconds()
			ms.LastReportAgeSeconds = &age
			ms.Seq, ms.APIReachable = lr.Seq, lr.APIReachable
		}
		st.Members = append(st.Members, ms)
	}
	for _, srv := range cfg {
		if srv.Suffrage == raft.Voter {
			st.Voters++
		}
	}
	st.WantVoters = desiredVoters(len(cfg), s.cfg.Voters)
	st.Forming = st.Joined && st.Voters < st.WantVoters
	verdicts, _ := s.store.Verdicts()
	st.Verdicts = sortedVerdicts(verdicts)
	slices.SortFunc(st.Members, func(a, b MemberStatus) int { return strings.Compare(a.Node, b.Node) })
	return st
}

func suffrage(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return string(zone.Voter)
	case raft.Nonvoter:
		return string(zone.Nonvoter)
	}
	return "staging"
}
