package zoneport

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// Whom a member follows.
//
// hashicorp/raft follows any server that sends AppendEntries at a term no
// lower than its own: Raft tolerates crashes, not liars, and a member whose
// box was stolen holds everything it needs to send one. The RPC guard
// (rpcguard.go) therefore asks FollowGuard, for every replication RPC, whether
// the caller can be the leader of the term it claims, from what this member
// itself saw of that term:
//
//   - One leader per term. The first server this member follows in a term is
//     the only one it follows in that term; another claiming the same term
//     is refused (an honest cluster never has two).
//   - A term this member voted in is led by the candidate it voted for (raft
//     keeps the vote in its stable store). A majority of voters voted for the
//     winner, so a server that won no election cannot gather a majority of
//     followers by racing the winner's first heartbeat. Another server of
//     that term is followed only once the leader this member knows has been
//     silent for a heartbeat timeout (the candidate it voted for may have
//     lost).
//   - A term this member did not vote in (a stand-by, a voter that was
//     unreachable during the election) is followed from its first claimant,
//     but not while the leader this member follows is alive: an honest
//     election happens only once a majority lost that leader, or after the
//     leader asked for a transfer, and then it steps down within a heartbeat.
//
// Elections themselves are heard only from voters of the configuration (the
// guard), and a vote request that asks for a leadership transfer — the one
// way to make raft vote while its leader is alive — is counted per candidate
// as a forced election: a stolen voter can still win an election by lying
// about its log, and that must not go unnoticed.

// guardReject reasons of FollowGuard, beside the wire checks' in rpcguard.go.
const (
	RejectSecondLeader    = "second_leader"     // another server already leads this term here
	RejectNotOurCandidate = "not_our_candidate" // this member voted for another candidate in that term
	RejectLeaderAlive     = "leader_alive"      // a new term claimed while this member's leader is alive
	RejectStaleTerm       = "stale_term"        // a term below one this member already follows a leader in
	RejectNotOurLeader    = "not_our_leader"    // TimeoutNow from a server this member does not follow
	RejectStalledLeader   = "stalled_leader"    // a leader this member found to commit none of its reports
)

// FollowGuard holds one member's record of whom it follows; every guarded
// connection of the member shares it. Its functions must be cheap and safe for
// concurrent use.
type FollowGuard struct {
	// localTerm is raft's current term.
	localTerm func() uint64
	// leader is the server this member follows (itself while it leads) and
	// when it last heard from it; id is empty when it follows nobody.
	leader func() (id string, contact time.Time)
	// voted is the last vote raft persisted: its term and the candidate's
	// address. ok is false when it never voted.
	voted func() (term uint64, candidate string, ok bool)
	// silence is how long a leader may be silent and still count as alive:
	// this member's heartbeat timeout.
	silence time.Duration
	now     func() time.Time
	// started is when the member started: it heard from nobody before.
	started time.Time

	mu sync.Mutex
	// term and id are the leader this member accepted replication from in
	// the highest term it accepted any.
	term uint64
	id   string
	// stalled is a leader this member no longer follows in its term: it
	// committed none of this member's reports for the stall timeout.
	stalledTerm uint64
	stalledID   string
}

// FollowConfig is what a FollowGuard reads of its member's Raft.
type FollowConfig struct {
	// LocalTerm is raft's current term.
	LocalTerm func() uint64
	// Leader is the server this member follows (itself while it leads) and
	// when it last heard from it; id is empty when it follows nobody.
	Leader func() (id string, contact time.Time)
	// Voted is the last vote raft persisted: its term and the candidate's
	// address; ok is false when it never voted.
	Voted func() (term uint64, candidate string, ok bool)
	// Silence is how long a leader may be silent and still count as alive:
	// the member's heartbeat timeout.
	Silence time.Duration
}

// NewFollowGuard returns the FollowGuard of a member that starts now, having
// heard from nobody.
func NewFollowGuard(c FollowConfig) *FollowGuard {
	return &FollowGuard{localTerm: c.LocalTerm, leader: c.Leader, voted: c.Voted, silence: c.Silence,
		now: time.Now, started: time.Now()}
}

// Replication decides whether the server callerID at callerAddr may replicate
// (AppendEntries, InstallSnapshot) to this member at term. It records the
// caller as the leader of term when it lets the RPC through.
func (f *FollowGuard) Replication(callerID, callerAddr string, term uint64) *Refusal {
	if f == nil {
		return nil
	}
	local := f.localTerm()
	if term < local {
		// raft refuses it and answers with the newer term, which is how a
		// stale leader learns to step down.
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if term == f.stalledTerm && callerID == f.stalledID {
		return Refuse(RejectStalledLeader, "%s led term %d without committing this member's reports", callerID, term)
	}
	switch {
	case term == f.term:
		if callerID != f.id {
			return Refuse(RejectSecondLeader, "term %d: %s claims to lead it, but this member follows %s", term, callerID, f.id)
		}
		return nil
	case term < f.term:
		return Refuse(RejectStaleTerm, "term %d: this member follows %s in the later term %d", term, f.id, f.term)
	}
	// A term this member follows nobody in yet.
	leaderID, contact := f.leader()
	now := f.now()
	if vt, cand, ok := f.voted(); ok && vt == term {
		// Raft marks the vote as contact, and the process start counts
		// as one too: a member that restarts knows nothing of who won.
		if cand != callerAddr && now.Sub(later(contact, f.started)) < f.silence {
			return Refuse(RejectNotOurCandidate, "term %d: this member voted for %s, not %s", term, cand, callerAddr)
		}
	} else if leaderID != "" && leaderID != callerID && now.Sub(contact) < f.silence {
		return Refuse(RejectLeaderAlive, "term %d: %s claims it while this member's leader %s is alive", term, callerID, leaderID)
	}
	f.term, f.id = term, callerID
	return nil
}

// TimeoutNow decides whether callerID may tell this member to start an
// election at once: only the leader it follows may (a leadership transfer).
func (f *FollowGuard) TimeoutNow(callerID string) *Refusal {
	if f == nil {
		return nil
	}
	// A member that follows nobody may campaign anyway: a voter's
	// TimeoutNow only hurries that. One that follows a leader hears it from
	// that leader alone (a leadership transfer).
	if id, _ := f.leader(); id != "" && id != callerID {
		return Refuse(RejectNotOurLeader, "timeout now from %s, but this member follows %q", callerID, id)
	}
	return nil
}

// LeaderAlive reports whether this member follows a leader other than id that
// it heard from within a heartbeat timeout.
func (f *FollowGuard) LeaderAlive(id string) bool {
	if f == nil {
		return false
	}
	leaderID, contact := f.leader()
	return leaderID != "" && leaderID != id && f.now().Sub(contact) < f.silence
}

// Stall stops following leaderID in term: the leader has committed none of
// this member's reports for the stall timeout. Raft then hears nothing from it,
// times out and campaigns; the rest of the zone does the same once the stalled
// leader starves it too.
func (f *FollowGuard) Stall(term uint64, leaderID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalledTerm, f.stalledID = term, leaderID
}

// following returns the leader this member accepted in the highest term.
func (f *FollowGuard) following() (term uint64, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term, f.id
}

// ForcedElectionLog counts the vote requests that asked for a leadership
// transfer, per candidate node: the one way to make a member vote while its
// leader is alive. An honest zone forces one per leader that stops or loses
// the cloud, and a candidate is the target of a few of them at most while a
// zone rolls; a voter that keeps forcing them is a stolen box or a broken one.
// Beyond forcedElectionBudget in forcedElectionWindow a candidate's transfer
// votes are refused: raft then grants it a vote only once the leader is
// silent, as in any election, and a handover that meets the budget costs a
// heartbeat timeout instead of a transfer.
type ForcedElectionLog struct {
	mu   sync.Mutex
	by   map[string]*forcedRecord
	now  func() time.Time
	note func(node string, allowed bool)
}

const (
	forcedElectionWindow = 10 * time.Minute
	forcedElectionBudget = 5
)

type forcedRecord struct {
	ForcedElections
	recent []time.Time // within the window
}

// ForcedElections is how many elections one candidate forced (asked votes
// for with the leadership-transfer flag) as a member saw them.
type ForcedElections struct {
	Node  string    `json:"node"`
	Count int       `json:"count"`
	Last  time.Time `json:"last"`
	// Refused counts the requests refused over the budget.
	Refused int `json:"refused,omitempty"`
}

// NewForcedElectionLog returns an empty log that tells note of every forced
// election it records and whether it was within the candidate's budget.
func NewForcedElectionLog(note func(node string, allowed bool)) *ForcedElectionLog {
	return &ForcedElectionLog{now: time.Now, note: note}
}

// Add records one forced election by node and reports whether it is within
// the budget.
func (f *ForcedElectionLog) Add(node string) bool {
	now := f.now()
	f.mu.Lock()
	if f.by == nil {
		f.by = map[string]*forcedRecord{}
	}
	e := f.by[node]
	if e == nil {
		e = &forcedRecord{ForcedElections: ForcedElections{Node: node}}
		f.by[node] = e
	}
	keep := e.recent[:0]
	for _, t := range e.recent {
		if now.Sub(t) < forcedElectionWindow {
			keep = append(keep, t)
		}
	}
	e.recent = keep
	e.Count++
	e.Last = now.UTC()
	allowed := len(e.recent) < forcedElectionBudget
	if allowed {
		e.recent = append(e.recent, now)
	} else {
		e.Refused++
	}
	f.mu.Unlock()
	if f.note != nil {
		f.note(node, allowed)
	}
	return allowed
}

func (f *ForcedElectionLog) List() []ForcedElections {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ForcedElections, 0, len(f.by))
	for _, e := range f.by {
		out = append(out, e.ForcedElections)
	}
	slices.SortFunc(out, func(a, b ForcedElections) int { return strings.Compare(a.Node, b.Node) })
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
