// Package store owns a zone's replicated state as one bbolt file per agent: the
// member list, the latest report of every sender, the checker × checked matrix of
// probe results, and the committed verdicts. It is the Raft FSM of the zone's
// group (Apply, ApplyBatch, Snapshot, Restore), the encoding of the commands the
// leader appends (ReportBatch, VerdictBatch, MemberSet) and the rules a report
// must meet to enter one (ValidateReport, SeqInReach), the verdict rule
// (Tally), and a typed read API. It also holds a spare's copy of the zone: a
// server exports the part of its replica a spare needs (ExportView,
// ExportViewParts, with digests of the stored bytes), and the spare imports it
// into a store of its own (ImportView) that answers the same read API.
//
// It must not import Kubernetes or any network code; of hashicorp/raft it uses
// only the FSM interfaces and their types (Log, FSMSnapshot, SnapshotSink),
// never a transport. It decides nothing a
// leader decides, but checks all of it: the verdict rule lives here so the
// leader and every replica apply the same one, and a replica applies a
// committed verdict only when the committed evidence, tallied again, gives
// exactly that verdict (verdict.go); every report's node signature is verified
// again on apply against the key this replica pinned. Apply reads no clock.
// Besides the log and its own settings it reads only this replica's own view
// of its cluster, given in Options: the Witness (which key and addresses each node's Node
// registers and whether it is in the zone), against which it checks every
// member list a leader commits (witness.go), and Voters (the voters of this
// replica's own Raft configuration), which bounds whom a recovery's verdicts
// may judge. What the witness does not confirm yet waits, and Settle applies
// it once it does, so replicas that see the same cluster hold the same state.
// Every other rule is deterministic, so every replica holding the same log
// applies it the same way.
//
// # Durability and replay
//
// The file is persistent across restarts, while raft replays its log into the FSM
// after one. Each commit therefore stores the index and term of the last applied
// log in the same transaction, and Apply skips logs at or below it. The store
// fsyncs every commit unless Options.NoSync is set.
//
// The agent should set raft.Config.NoSnapshotRestoreOnStart: the file already
// holds at least the latest snapshot's state, and restoring it on every start
// would only rewrite the file. With that setting, the agent should restore the
// latest snapshot itself if AppliedIndex is below its index: a crash between raft
// saving an installed snapshot and Restore renaming it into place leaves the file
// behind raft. (Rejected commands do not advance AppliedIndex either; restoring
// is then redundant but harmless.) The applied index only means something within
// one Raft cluster: an agent that starts with empty raft stores must remove the
// store file too, or its replica would skip the new cluster's first logs.
//
// # Concurrency contract
//
// The read methods are safe for concurrent use with each other, with Apply and
// with Restore. Each read runs in one bbolt read transaction, so it sees the state
// between two commits, never part of one; two separate reads may see different
// states.
//
// Apply, ApplyBatch, Snapshot and Restore follow raft's contract: raft calls them
// from one goroutine, and the store serialises them anyway. FSMSnapshot.Persist
// runs concurrently with Apply: Snapshot opens a read transaction and Persist
// streams it, while later commits stay invisible to it. An unreleased snapshot
// pins that transaction, so Close and Restore wait until it is persisted or
// released; never call them while holding one.
//
// Restore replaces the state atomically: it receives the stream into a temporary
// file beside the store, checks it (its member list and verdicts by the rules
// Apply uses, against this replica's current ones), then swaps files under an
// exclusive lock. A damaged snapshot returns an error and leaves the current
// state in place.
package store
