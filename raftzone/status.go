package raftzone

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/edgequorum/edgequorum/raftzone/seats"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Status is one member's view of its zone, served at /v1/status and printed by
// `edgequorum status`.
type Status struct {
	Node     string `json:"node"`
	Zone     string `json:"zone"`
	ServerID string `json:"serverID"`
	State    string `json:"state"`
	// Role is voter, standby or spare (see DESIGN.md, "Roles"); empty until
	// the member has joined.
	Role          string `json:"role,omitempty"`
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
	// ForcedElections are the vote requests with the leadership-transfer
	// flag this member saw, per candidate: a voter with many is a stolen or
	// broken box (DESIGN.md, "Trust").
	ForcedElections []zoneport.ForcedElections `json:"forcedElections,omitempty"`
	// ReportsUncommittedSeconds is how long the leader this member follows
	// has committed none of its reports; StalledLeader the last leader it
	// stopped following for that (a node name, with its term).
	ReportsUncommittedSeconds float64 `json:"reportsUncommittedSeconds,omitempty"`
	StalledLeader             string  `json:"stalledLeader,omitempty"`
	StalledTerm               uint64  `json:"stalledTerm,omitempty"`
	// Held counts what this member's replica refused or held back of what
	// its leaders committed, by reason (store.RefusalReasons): reports not
	// signed by their sender, member changes its view of the cluster does
	// not confirm, verdicts the evidence does not support.
	Held map[string]uint64 `json:"held,omitempty"`
	// Release and Level are what this member announces of itself;
	// ZoneLevel the level its zone's formats keep to, the lowest any member
	// announces (servers only: a spare's view does not carry it).
	Release   string     `json:"release"`
	Level     skew.Level `json:"level"`
	ZoneLevel skew.Level `json:"zoneLevel,omitempty"`
	// Unreadable counts the committed entries this replica skipped whole
	// because it could not decode them; UnreadableNewer those of a newer
	// release's format, UnreadableLast the last one's error. Non-zero means
	// this member needs upgrading (DESIGN.md, "Versions").
	Unreadable      uint64    `json:"unreadable,omitempty"`
	UnreadableNewer uint64    `json:"unreadableNewer,omitempty"`
	UnreadableLast  string    `json:"unreadableLast,omitempty"`
	At              time.Time `json:"at"`
}

// MemberStatus is one member as seen in a Status.
type MemberStatus struct {
	Node         string `json:"node"`
	ServerID     string `json:"serverID"`
	RaftAddress  string `json:"raftAddress"`
	ProbeAddress string `json:"probeAddress"`
	// Suffrage is voter, nonvoter, or empty when the member is not in the
	// Raft configuration.
	Suffrage string `json:"suffrage"`
	// Role is voter, standby (a nonvoter) or spare (outside the
	// configuration).
	Role string `json:"role"`
	// LastReportAgeSeconds is how long ago the zone committed the member's
	// last report; absent when it never reported.
	LastReportAgeSeconds *float64 `json:"lastReportAgeSeconds,omitempty"`
	Seq                  uint64   `json:"seq"`
	APIReachable         bool     `json:"apiReachable"`
	// Release and Level are what the member last announced in a committed
	// report; empty and zero for a release before levels or no report yet.
	Release string     `json:"release,omitempty"`
	Level   skew.Level `json:"level,omitempty"`
}

// readySlack is how far the applied index may trail the commit index for a
// member to count as caught up; a member applying a burst is not unready.
const readySlack = 64

// Status returns this member's current view. It reads only local state, so it
// answers even when the zone has no leader.
func (s *Member) Status() Status {
	now := s.clock.Now().UTC()
	self := s.announcement()
	st := Status{Node: s.cfg.Node, Zone: s.cfg.Zone, At: now,
		APIReachable: s.reachesAPI(), Release: self.Release, Level: self.Level}
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
	st.ForcedElections = s.forced.List()
	waiting, stalled, stalledTerm := s.stall.status()
	st.ReportsUncommittedSeconds = waiting.Seconds()
	if stalled != "" {
		st.StalledLeader, st.StalledTerm = stalled, stalledTerm
		if m, ok := s.memberByID(stalled); ok {
			st.StalledLeader = m.Node
		}
	}
	for _, reason := range store.RefusalReasons {
		if n := s.store.Refused(reason); n > 0 {
			if st.Held == nil {
				st.Held = map[string]uint64{}
			}
			st.Held[reason] = n
		}
	}
	if n, newer, last := s.store.Unreadable(); n > 0 {
		st.Unreadable, st.UnreadableNewer, st.UnreadableLast = n, newer, last.Error()
	}
	leaderNode, leaderAddr, hasLeader := s.Leader()
	st.Leader, st.LeaderAddress = leaderNode, leaderAddr
	src := s.state()
	servers := map[string]string{}
	if src == s.viewStore {
		// A spare: everything from the view a server last copied.
		c := s.cluster()
		st.State, st.Term, servers = "Spare", c.Term, c.Servers
		st.AppliedIndex, _ = src.AppliedIndex()
		st.CommitIndex, st.LastIndex = st.AppliedIndex, st.AppliedIndex
		st.Joined = s.isMember()
		st.Ready = st.Joined && hasLeader && s.clock.Since(time.Unix(0, s.lastSync.Load())) <= s.cfg.VoteTimeout
	} else {
		st.State = s.raft.State().String()
		st.Term = s.raft.CurrentTerm()
		st.CommitIndex, st.AppliedIndex, st.LastIndex = s.raft.CommitIndex(), s.raft.AppliedIndex(), s.raft.LastIndex()
		cfg, _ := s.configuration()
		for id, srv := range cfg {
			servers[id] = suffrage(srv.Suffrage)
		}
		_, inCfg := cfg[s.serverID]
		st.Joined = inCfg || s.isMember()
		st.Ready = st.Joined && hasLeader && st.AppliedIndex+readySlack >= st.CommitIndex
	}

	members, _ := src.Members()
	last := s.lastReports()
	said, _ := src.Announcements()
	if src == s.store {
		st.ZoneLevel = s.zoneLevel()
	}
	for _, m := range members {
		ms := MemberStatus{Node: m.Node, ServerID: m.ServerID, RaftAddress: m.RaftAddress, ProbeAddress: m.ProbeAddress,
			Suffrage: servers[m.ServerID], Role: role(servers[m.ServerID])}
		if m.Node == s.cfg.Node && st.Joined {
			st.Role = ms.Role
		}
		if lr, ok := last[m.Node]; ok {
			age := now.Sub(lr.ReceivedAt).Seconds()
			ms.LastReportAgeSeconds = &age
			ms.Seq, ms.APIReachable = lr.Seq, lr.APIReachable
		}
		if a, ok := said[m.Node]; ok {
			ms.Release, ms.Level = a.Release, a.Level
		}
		st.Members = append(st.Members, ms)
	}
	for _, sf := range servers {
		if sf == string(zone.Voter) {
			st.Voters++
		}
	}
	st.WantVoters = seats.DesiredVoters(len(members), s.cfg.Voters)
	st.Forming = st.Joined && st.Voters < st.WantVoters
	verdicts, _ := src.Verdicts()
	st.Verdicts = sortedVerdicts(verdicts)
	slices.SortFunc(st.Members, func(a, b MemberStatus) int { return strings.Compare(a.Node, b.Node) })
	return st
}

// role names a member's role from its suffrage in the configuration.
func role(suffrage string) string {
	switch suffrage {
	case string(zone.Voter):
		return "voter"
	case string(zone.Nonvoter):
		return "standby"
	}
	return "spare"
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
