package zone

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// attestDomain separates a reach attestation's signature from every other
// statement a node key signs.
const attestDomain = "edgequorum/reach/v1\x00"

// LeaseEvidenceAnnotation on a zone Lease carries the quorum's evidence for the
// nodes the cloud cannot hear from although their zone reaches it: each
// member's signed Attestation of which of those nodes it reaches now (see
// FormatEvidence). The leader gathers it and writes it with its renewals,
// only while some node needs it; it proves nothing about the leader, only
// what the members that signed it say, and the webhook protects such a node
// only on the word of a majority of its peers.
const LeaseEvidenceAnnotation = "edgequorum.io/evidence"

// Limits of what ParseEvidence accepts: the webhook reads it from a Lease any
// agent token may write.
const (
	// MaxEvidenceBytes bounds the annotation, in step with the size the
	// agent policy allows it.
	MaxEvidenceBytes = 64 << 10
	maxAttestations  = 1024
	maxReach         = 1024
	maxNameLen       = 253
)

// Attestation is one member's signed word that, at At by its own clock, it
// reaches each node of Reach (its probes find the node healthy) and reaches
// no part of each node of Down (every probe of the node fails: its kubelet
// port and its agent alike). It is made for the nodes the leader asks about
// and signed with the member's node key, which its own Node registers, so
// nobody else can speak in its name.
type Attestation struct {
	Zone   string
	Signer string
	// At is when the member signed, to the millisecond.
	At time.Time
	// Reach and Down are sorted and hold no name twice.
	Reach []string
	Down  []string
	Sig   []byte
}

// SigningBytes is the canonical encoding of every field but Sig.
func (a *Attestation) SigningBytes() []byte {
	n := len(attestDomain) + 4*3 + len(a.Zone) + len(a.Signer) + 8 + 2*4
	for _, r := range slices.Concat(a.Reach, a.Down) {
		n += 4 + len(r)
	}
	b := make([]byte, 0, n)
	b = append(b, attestDomain...)
	b = appendString(b, a.Zone)
	b = appendString(b, a.Signer)
	b = binary.BigEndian.AppendUint64(b, uint64(a.At.UnixMilli()))
	for _, list := range [][]string{a.Reach, a.Down} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(list)))
		for _, r := range list {
			b = appendString(b, r)
		}
	}
	return b
}

// Sign truncates At to the millisecond, sorts Reach and Down and signs a with
// priv.
func (a *Attestation) Sign(priv ed25519.PrivateKey) {
	a.At = time.UnixMilli(a.At.UnixMilli()).UTC()
	a.Reach = slices.Compact(slices.Sorted(slices.Values(a.Reach)))
	a.Down = slices.Compact(slices.Sorted(slices.Values(a.Down)))
	a.Sig = ed25519.Sign(priv, a.SigningBytes())
}

// Verify reports whether Sig signs a under pub, the key a.Signer's Node
// registers.
func (a *Attestation) Verify(pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize || len(a.Sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, a.SigningBytes(), a.Sig)
}

// Reaches reports whether a says its signer reaches node.
func (a *Attestation) Reaches(node string) bool {
	_, ok := slices.BinarySearch(a.Reach, node)
	return ok
}

// FindsDown reports whether a says every probe of its signer's fails on node.
func (a *Attestation) FindsDown(node string) bool {
	_, ok := slices.BinarySearch(a.Down, node)
	return ok
}

// wireAttestation is an Attestation as the annotation holds it: short keys, a
// Unix-millisecond time.
type wireAttestation struct {
	Signer string   `json:"s"`
	At     int64    `json:"t"`
	Reach  []string `json:"r"`
	Down   []string `json:"d,omitempty"`
	Sig    []byte   `json:"g"`
}

// FormatEvidence renders attestations of zone z as the LeaseEvidenceAnnotation
// value, a JSON array, keeping as many as MaxEvidenceBytes holds in the order
// given; "" for none.
func FormatEvidence(atts []Attestation) string {
	if len(atts) == 0 {
		return ""
	}
	out := make([]wireAttestation, 0, len(atts))
	size := 2
	for _, a := range atts {
		w := wireAttestation{Signer: a.Signer, At: a.At.UnixMilli(), Reach: a.Reach, Down: a.Down, Sig: a.Sig}
		b, err := json.Marshal(w)
		if err != nil {
			continue
		}
		if size+len(b)+1 > MaxEvidenceBytes {
			break
		}
		size += len(b) + 1
		out = append(out, w)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ""
	}
	return string(b)
}

// ParseEvidence reads a LeaseEvidenceAnnotation value of zone z. It checks the
// form, not the signatures: those need the signers' registered keys. Anything
// but what FormatEvidence writes, within its limits, is an error.
func ParseEvidence(z, s string) ([]Attestation, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > MaxEvidenceBytes {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", LeaseEvidenceAnnotation, len(s), MaxEvidenceBytes)
	}
	var ws []wireAttestation
	if err := json.Unmarshal([]byte(s), &ws); err != nil {
		return nil, fmt.Errorf("%s: %w", LeaseEvidenceAnnotation, err)
	}
	if len(ws) > maxAttestations {
		return nil, fmt.Errorf("%s: %d attestations, more than %d", LeaseEvidenceAnnotation, len(ws), maxAttestations)
	}
	out := make([]Attestation, 0, len(ws))
	for i, w := range ws {
		switch {
		case w.Signer == "" || len(w.Signer) > maxNameLen:
			return nil, fmt.Errorf("%s: attestation %d: bad signer", LeaseEvidenceAnnotation, i)
		case len(w.Reach)+len(w.Down) > maxReach:
			return nil, fmt.Errorf("%s: attestation %d: %d nodes, more than %d", LeaseEvidenceAnnotation, i, len(w.Reach)+len(w.Down), maxReach)
		case len(w.Sig) != ed25519.SignatureSize:
			return nil, fmt.Errorf("%s: attestation %d: signature of %d bytes", LeaseEvidenceAnnotation, i, len(w.Sig))
		}
		for _, list := range [][]string{w.Reach, w.Down} {
			if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
				return nil, fmt.Errorf("%s: attestation %d: nodes not sorted or named twice", LeaseEvidenceAnnotation, i)
			}
			for _, r := range list {
				if r == "" || len(r) > maxNameLen {
					return nil, fmt.Errorf("%s: attestation %d: bad node name", LeaseEvidenceAnnotation, i)
				}
			}
		}
		if len(w.Down) == 0 {
			w.Down = nil
		}
		out = append(out, Attestation{Zone: z, Signer: w.Signer, At: time.UnixMilli(w.At).UTC(), Reach: w.Reach, Down: w.Down, Sig: w.Sig})
	}
	return out, nil
}
