package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/edgequorum/edgequorum/zone"
)

// Registration is what the cluster says of one node: the node key its own
// agent registered on its Node (zone.EncodeNodeKey form, empty when none) and
// the zone-port and probe addresses its Node gives.
type Registration struct {
	Key          string
	RaftAddress  string
	ProbeAddress string
}

// Witness is a replica's own view of the cluster, an input besides the log
// that Apply reads (Options.Voters is the other). A member list committed by a leader is a claim: a replica
// pins a member's key and addresses, adds a member or drops one only as far as
// its own view of the cluster confirms, so not even a leader can pin a key
// for a node that the node did not register, or add or remove members the
// cluster does not show. What its view does not confirm yet waits, and
// Settle applies it once the view does.
//
// Lookup must be cheap and safe for concurrent use; Apply calls it for the
// members a command changes, Settle for every member.
type Witness interface {
	// Lookup returns node's registration and whether the node is in the
	// zone. known is false when this replica has no current view of the
	// cluster (the apiserver unreachable, the member list not synced): then
	// nothing about any node is confirmed, neither a change nor a departure.
	Lookup(node string) (reg Registration, inZone, known bool)
}

// Reasons a replica holds back part of a committed member list, the keys of
// ApplyResult.Refused for a MemberSet and of Store.HeldMembers.
const (
	// HoldUnregistered: a member's key or address is not what its Node
	// registers, or this replica cannot see the Node now.
	HoldUnregistered = "unregistered"
	// HoldKeyOfAnother: a member's key is pinned for another member.
	HoldKeyOfAnother = "key_of_another_member"
	// HoldStillInZone: a member left out of the list whose Node still
	// carries the zone label, or whose Node this replica cannot see now,
	// and that the zone has not judged unhealthy.
	HoldStillInZone = "still_in_zone"
)

// keyClaims is where the last committed member list is kept, as its leader
// committed it, so Settle can apply what waits.
var keyClaims = []byte("memberClaims")

// memberIdentity is everything about a member its Node must confirm.
func sameIdentity(a, b zone.Member) bool {
	return a.PublicKey == b.PublicKey && a.RaftAddress == b.RaftAddress && a.ProbeAddress == b.ProbeAddress
}

// settleMembers moves the member list in tx toward the claimed one as far as w
// confirms, and restores any pinned key that differs from the one a member's
// Node registers. A change is measured against pinned, what this replica held
// (nil: the list in tx). It returns what changed the list and what it held
// back, by reason. A nil w takes the claim as it is (stores that are no
// replica: a spare's view, tests of other rules).
func settleMembers(tx *bbolt.Tx, w Witness, pinned map[string]zone.Member) (changed bool, held map[string]int, err error) {
	membersB := tx.Bucket(bucketMembers)
	stored := map[string]zone.Member{}
	err = membersB.ForEach(func(k, v []byte) error {
		m, err := decodeMember(v)
		stored[string(k)] = m
		return err
	})
	if err != nil {
		return false, nil, err
	}
	current := stored
	if pinned != nil {
		current = pinned
	}
	claims, ok, err := readClaims(tx)
	if err != nil {
		return false, nil, err
	}
	if !ok {
		// A store from before claims were kept: its list is the claim.
		claims = current
	}
	if w == nil {
		changed, err = replaceMembers(tx, stored, claims)
		return changed, nil, err
	}
	hold := func(reason string) {
		if held == nil {
			held = map[string]int{}
		}
		held[reason]++
	}
	next := make(map[string]zone.Member, len(claims))
	for node, c := range claims {
		cur, had := current[node]
		switch {
		case had && sameIdentity(cur, c):
			next[node] = c
		default:
			reg, in, known := w.Lookup(node)
			if known && in && reg.Key != "" && reg.Key == c.PublicKey &&
				reg.RaftAddress == c.RaftAddress && reg.ProbeAddress == c.ProbeAddress {
				next[node] = c
				continue
			}
			hold(HoldUnregistered)
			if had {
				// Keep what this replica pinned; take what needs no
				// confirmation (role, kubelet port, join time).
				keep := c
				keep.ServerID, keep.PublicKey, keep.RaftAddress, keep.ProbeAddress = cur.ServerID, cur.PublicKey, cur.RaftAddress, cur.ProbeAddress
				next[node] = keep
			}
		}
	}
	verdicts := tx.Bucket(bucketVerdicts)
	for node, cur := range current {
		if _, claimed := claims[node]; claimed {
			continue
		}
		if _, in, known := w.Lookup(node); known && !in {
			continue
		}
		// A member the zone judged dead may go while its Node stays: an
		// operator's recovery from a lost quorum removes the dead it
		// named once the survivors' reports judged them (the verdict is
		// itself checked against those reports).
		if v := verdicts.Get([]byte(node)); v != nil {
			if vd, err := decodeVerdict(v); err == nil && vd.State == zone.Unhealthy {
				continue
			}
		}
		hold(HoldStillInZone)
		next[node] = cur
	}
	// A key pinned for the wrong node — written by a leader before replicas
	// checked, or claimed now — goes back to the one the member's own Node
	// registers.
	for node, m := range next {
		reg, in, known := w.Lookup(node)
		if known && in && reg.Key != "" && reg.Key != m.PublicKey {
			m.PublicKey = reg.Key
			next[node] = m
		}
	}
	// No key belongs to two members: where one is pinned twice, the member
	// whose Node does not register it (or, unconfirmed, the one that did not
	// hold it already) keeps its old key, or none.
	byKey := map[string][]string{}
	for node, m := range next {
		if m.PublicKey != "" {
			byKey[m.PublicKey] = append(byKey[m.PublicKey], node)
		}
	}
	for key, nodes := range byKey {
		if len(nodes) < 2 {
			continue
		}
		for _, node := range nodes {
			if cur, had := current[node]; had && cur.PublicKey == key {
				if reg, in, known := w.Lookup(node); !known || (in && reg.Key == key) {
					continue
				}
			}
			hold(HoldKeyOfAnother)
			m := next[node]
			m.PublicKey = ""
			if cur, had := current[node]; had && cur.PublicKey != key {
				m.PublicKey = cur.PublicKey
			}
			next[node] = m
		}
	}
	changed, err = replaceMembers(tx, stored, next)
	return changed, held, err
}

// replaceMembers writes next as the member list. A node that left takes
// everything about it along, so a later node of the same name starts clean. A
// node that came back with a new server ID (its data dir was wiped) restarts
// its seq and its own row, but what others observed about it stays valid.
func replaceMembers(tx *bbolt.Tx, current, next map[string]zone.Member) (bool, error) {
	membersB, reports, matrix, verdicts, releases := tx.Bucket(bucketMembers), tx.Bucket(bucketReports),
		tx.Bucket(bucketMatrix), tx.Bucket(bucketVerdicts), tx.Bucket(bucketReleases)
	changed := false
	var removed []string
	for _, node := range sortedKeys(current) {
		mem, stays := next[node]
		switch {
		case !stays:
			removed = append(removed, node)
			changed = true
			if err := forget(membersB, reports, matrix, verdicts, releases, node); err != nil {
				return false, err
			}
		case mem.ServerID != current[node].ServerID:
			if err := reports.Delete([]byte(node)); err != nil {
				return false, err
			}
			if err := deleteBucket(matrix, []byte(node)); err != nil {
				return false, err
			}
		}
	}
	if len(removed) > 0 {
		if err := dropColumns(matrix, removed); err != nil {
			return false, err
		}
	}
	for _, node := range sortedKeys(next) {
		if cur, ok := current[node]; ok && cur == next[node] {
			continue
		}
		changed = true
		val, err := json.Marshal(next[node])
		if err != nil {
			return false, err
		}
		if err := membersB.Put([]byte(node), val); err != nil {
			return false, err
		}
	}
	return changed, nil
}

func readClaims(tx *bbolt.Tx) (map[string]zone.Member, bool, error) {
	raw := tx.Bucket(bucketMeta).Get(keyClaims)
	if raw == nil {
		return nil, false, nil
	}
	var ms []zone.Member
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, false, fmt.Errorf("%w: member claims: %w", ErrCorrupt, err)
	}
	out := make(map[string]zone.Member, len(ms))
	for _, m := range ms {
		out[m.Node] = m
	}
	return out, true, nil
}

func putClaims(tx *bbolt.Tx, ms []zone.Member) error {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b zone.Member) int { return strings.Compare(a.Node, b.Node) })
	raw, err := json.Marshal(ms)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketMeta).Put(keyClaims, raw)
}

// Settle moves this replica's member list toward the last committed one as far
// as its witness now confirms, and restores every pinned key that differs from
// the one the member's own Node registers. The agent calls it when its view
// of the cluster changes and after a snapshot replaced the state. It writes no
// log position: it only applies what the committed log asked for, or what the
// members' own Nodes say, and reads nothing a leader sent since.
func (s *Store) Settle() (changed bool, err error) {
	if s.opts.Witness == nil {
		return false, nil
	}
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if err := s.Err(); err != nil {
		return false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return false, ErrClosed
	}
	// Most rounds change nothing: roll those back rather than commit, which
	// would write and fsync the file every round on every member.
	tx, err := s.db.Begin(true)
	if err == nil {
		changed, _, err = settleMembers(tx, s.opts.Witness, nil)
		switch {
		case err == nil && changed:
			err = tx.Commit()
		default:
			_ = tx.Rollback()
		}
	}
	if err != nil {
		return false, fmt.Errorf("store: settle members: %w", err)
	}
	return changed, nil
}

// MemberClaims is the member list as its leader last committed it, before this
// replica's checks: the leader builds the next list from it, so that what its
// own replica holds back is not committed again every round.
func (s *Store) MemberClaims() ([]zone.Member, error) {
	var out []zone.Member
	err := s.view(func(tx *bbolt.Tx) error {
		claims, ok, err := readClaims(tx)
		if err != nil {
			return err
		}
		if !ok {
			out, err = readMembers(tx)
			return err
		}
		for _, node := range sortedKeys(claims) {
			out = append(out, claims[node])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: member claims: %w", err)
	}
	return out, nil
}
