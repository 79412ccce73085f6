package zone

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"

	"github.com/edgequorum/edgequorum/skew"
)

// signingDomain separates report MACs from any other HMAC made with the zone key
// (the transport handshake uses its own label).
const signingDomain = "edgequorum/report/v1\x00"

// signingDomainV2 signs a report that carries its sender's announcement
// (Release and Level); one without is signed as the release before signed it.
const signingDomainV2 = "edgequorum/report/v2\x00"

// ErrUnsorted is returned by SigningBytes when Results are not strictly sorted by
// peer: two encodings of the same report must never differ.
var ErrUnsorted = errors.New("report results are not strictly sorted by peer")

// SortResults puts results into the order SigningBytes requires.
func SortResults(rs []Result) {
	slices.SortFunc(rs, func(a, b Result) int { return strings.Compare(a.Peer, b.Peer) })
}

// SigningBytes is the canonical encoding of every field of r except MAC and Sig. Strings
// are length-prefixed and numbers fixed-width, so no two distinct reports share an
// encoding and no JSON library quirk can change what was signed.
func (r *Report) SigningBytes() ([]byte, error) {
	for i := 1; i < len(r.Results); i++ {
		if r.Results[i-1].Peer >= r.Results[i].Peer {
			return nil, ErrUnsorted
		}
	}
	n := len(signingDomainV2) + 70 + len(r.Zone) + len(r.From) + len(r.KeyID) + len(r.Release)
	for _, res := range r.Results {
		n += 4 + len(res.Peer) + 1 + 8 + 8
	}
	b := make([]byte, 0, n)
	if r.Level != skew.Unannounced {
		b = append(b, signingDomainV2...)
		b = binary.BigEndian.AppendUint16(b, uint16(r.Level))
		b = appendString(b, r.Release)
	} else {
		b = append(b, signingDomain...)
	}
	b = appendString(b, r.Zone)
	b = appendString(b, r.From)
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(r.SentAt.UnixNano()))
	b = append(b, boolByte(r.APIReachable))
	b = appendString(b, r.KeyID)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Results)))
	for _, res := range r.Results {
		b = appendString(b, res.Peer)
		b = append(b, boolByte(res.OK))
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(res.Score))
		b = binary.BigEndian.AppendUint64(b, uint64(res.Latency))
	}
	return b, nil
}

// ComputeMAC returns HMAC-SHA256(key, SigningBytes(r)).
func (r *Report) ComputeMAC(key []byte) ([]byte, error) {
	msg, err := r.SigningBytes()
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil), nil
}

// Sign sets KeyID and MAC. The key id is part of what is signed, so a MAC cannot
// be moved to another key.
func (r *Report) Sign(keyID string, key []byte) error {
	r.KeyID = keyID
	mac, err := r.ComputeMAC(key)
	if err != nil {
		return err
	}
	r.MAC = mac
	return nil
}

// VerifyMAC reports whether r.MAC is a valid MAC of r under key, in constant time.
func (r *Report) VerifyMAC(key []byte) bool {
	want, err := r.ComputeMAC(key)
	if err != nil {
		return false
	}
	return hmac.Equal(want, r.MAC)
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// SignNode sets Sig, the sender's own signature over the bytes the MAC covers.
// Call it after Sign: the key id is among the signed bytes.
func (r *Report) SignNode(priv ed25519.PrivateKey) error {
	msg, err := r.SigningBytes()
	if err != nil {
		return err
	}
	r.Sig = ed25519.Sign(priv, msg)
	return nil
}

// VerifySig reports whether r.Sig is From's signature under pub. A report
// without a signature, or a key of the wrong size, never verifies.
func (r *Report) VerifySig(pub ed25519.PublicKey) bool { return r.VerifySigMemo(pub, nil) }

// VerifySigMemo is VerifySig through memo, for a process that meets the same
// report more than once.
func (r *Report) VerifySigMemo(pub ed25519.PublicKey, memo *SigMemo) bool {
	if len(pub) != ed25519.PublicKeySize || len(r.Sig) != ed25519.SignatureSize {
		return false // before encoding the report: nothing to verify
	}
	msg, err := r.SigningBytes()
	if err != nil {
		return false
	}
	return memo.Verify(pub, msg, r.Sig)
}
