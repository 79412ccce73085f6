package zone

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// leaderDomain separates a leader vote's signature from every other statement
// a node key signs.
const leaderDomain = "edgequorum/leader/v1\x00"

// LeaseLeadershipAnnotation on a zone Lease carries the members' signed word
// that the Lease's holder leads the zone in the Lease's term (see
// FormatLeadership). Raft elects a leader by a majority of its voters, but the
// cloud sees none of that: without this, any member's key could sign a claim
// to the zone Lease under any term. The webhook honours a claim that carries
// it only on the votes of a majority of the zone's members, and, once a zone
// has shown it, no claim without it.
const LeaseLeadershipAnnotation = "edgequorum.io/leadership"

// MaxLeadershipBytes bounds the annotation, in step with the size the agent
// policy allows it: a vote is about 110 bytes, so a majority of a zone of a
// few hundred members fits.
const MaxLeadershipBytes = 32 << 10

// maxVotes bounds the votes ParseLeadership accepts.
const maxVotes = 1024

// LeaderVote is one member's signed word that, by its own view of the zone's
// Raft group, Leader leads Zone in Term. A member signs it only for the leader
// its own Raft state (or, for a spare, the view it copied from a server)
// names, with its node key, which its own Node registers.
type LeaderVote struct {
	Zone   string
	Term   uint64
	Leader string
	Signer string
	Sig    []byte
}

// SigningBytes is the canonical encoding of every field but Sig.
func (v *LeaderVote) SigningBytes() []byte {
	b := make([]byte, 0, len(leaderDomain)+4*3+len(v.Zone)+len(v.Leader)+len(v.Signer)+8)
	b = append(b, leaderDomain...)
	b = appendString(b, v.Zone)
	b = binary.BigEndian.AppendUint64(b, v.Term)
	b = appendString(b, v.Leader)
	b = appendString(b, v.Signer)
	return b
}

// Sign signs v with priv, the signer's node key.
func (v *LeaderVote) Sign(priv ed25519.PrivateKey) {
	v.Sig = ed25519.Sign(priv, v.SigningBytes())
}

// Verify reports whether Sig signs v under pub, the key v.Signer's Node
// registers.
func (v *LeaderVote) Verify(pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize || len(v.Sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, v.SigningBytes(), v.Sig)
}

// wireLeadership is the annotation's form: the term and leader once, and
// each signer's signature.
type wireLeadership struct {
	Term   uint64            `json:"t"`
	Leader string            `json:"l"`
	Votes  map[string][]byte `json:"v"`
}

// FormatLeadership renders votes, all for one term and leader, as the
// LeaseLeadershipAnnotation value, keeping as many as MaxLeadershipBytes holds
// (by signer name); "" for none, or for votes that disagree on the term or the
// leader.
func FormatLeadership(votes []LeaderVote) string {
	if len(votes) == 0 {
		return ""
	}
	w := wireLeadership{Term: votes[0].Term, Leader: votes[0].Leader, Votes: map[string][]byte{}}
	size := len(fmt.Sprintf(`{"t":%d,"l":%q,"v":{}}`, w.Term, w.Leader))
	votes = slices.SortedFunc(slices.Values(votes), func(a, b LeaderVote) int { return strings.Compare(a.Signer, b.Signer) })
	for _, v := range votes {
		if v.Term != w.Term || v.Leader != w.Leader || v.Zone != votes[0].Zone {
			return ""
		}
		// "signer":"<88 characters of base64>",
		n := len(v.Signer) + 2 + 1 + 90 + 1
		if size+n > MaxLeadershipBytes {
			break
		}
		size += n
		w.Votes[v.Signer] = v.Sig
	}
	b, err := json.Marshal(w)
	if err != nil || len(b) > MaxLeadershipBytes {
		return ""
	}
	return string(b)
}

// ParseLeadership reads a LeaseLeadershipAnnotation value of zone z. It checks
// the form, not the signatures: those need the signers' registered keys.
// Anything but what FormatLeadership writes, within its limits, is an error.
func ParseLeadership(z, s string) ([]LeaderVote, error) {
	if len(s) > MaxLeadershipBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", LeaseLeadershipAnnotation, len(s), MaxLeadershipBytes)
	}
	var w wireLeadership
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return nil, fmt.Errorf("%s: %w", LeaseLeadershipAnnotation, err)
	}
	switch {
	case w.Term == 0:
		return nil, fmt.Errorf("%s: no term", LeaseLeadershipAnnotation)
	case w.Leader == "" || len(w.Leader) > maxNameLen:
		return nil, fmt.Errorf("%s: bad leader", LeaseLeadershipAnnotation)
	case len(w.Votes) > maxVotes:
		return nil, fmt.Errorf("%s: %d votes, more than %d", LeaseLeadershipAnnotation, len(w.Votes), maxVotes)
	}
	out := make([]LeaderVote, 0, len(w.Votes))
	for _, signer := range slices.Sorted(maps.Keys(w.Votes)) {
		sig := w.Votes[signer]
		switch {
		case signer == "" || len(signer) > maxNameLen:
			return nil, fmt.Errorf("%s: bad signer", LeaseLeadershipAnnotation)
		case len(sig) != ed25519.SignatureSize:
			return nil, fmt.Errorf("%s: vote of %s: signature of %d bytes", LeaseLeadershipAnnotation, signer, len(sig))
		}
		out = append(out, LeaderVote{Zone: z, Term: w.Term, Leader: w.Leader, Signer: signer, Sig: sig})
	}
	return out, nil
}
