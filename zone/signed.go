package zone

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Signature domains: a signature made for one kind of statement can never be
// read as another (reports use signingDomain).
const (
	verdictDomain = "edgequorum/verdict/v1\x00"
	leaseDomain   = "edgequorum/zone-lease/v1\x00"
)

// LeaseSignatureAnnotation on a zone Lease is its holder's signature over the
// Lease's LeaseClaim, base64. Anyone allowed to write Leases in the namespace
// can write a zone Lease; only the holder's node key can sign one, and the
// webhook honours only signed ones.
const LeaseSignatureAnnotation = "edgequorum.io/signature"

// LeaseEndorsesAnnotation on a zone Lease names the earlier leaders whose
// verdicts still stand on the zone's Nodes, each with the highest term of
// those verdicts (see FormatEndorsements). The holder vouches for them in its
// signed claim, so a new leader need not sign every standing verdict again.
const LeaseEndorsesAnnotation = "edgequorum.io/endorses"

// FormatEndorsements renders earlier leaders and their highest terms as the
// LeaseEndorsesAnnotation value: "node=term" pairs sorted by node, joined by
// commas; "" for none. Node names hold neither ',' nor '='.
func FormatEndorsements(m map[string]uint64) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(m[n], 10))
	}
	return b.String()
}

// ParseEndorsements reads a LeaseEndorsesAnnotation value. Anything but the
// form FormatEndorsements writes is an error: a claim that does not parse
// vouches for nobody.
func ParseEndorsements(s string) (map[string]uint64, error) {
	m := map[string]uint64{}
	if s == "" {
		return m, nil
	}
	for _, pair := range strings.Split(s, ",") {
		n, t, ok := strings.Cut(pair, "=")
		term, err := strconv.ParseUint(t, 10, 64)
		if !ok || n == "" || err != nil {
			return nil, fmt.Errorf("%s %q: want node=term pairs", LeaseEndorsesAnnotation, truncate(s, 48))
		}
		if _, dup := m[n]; dup {
			return nil, fmt.Errorf("%s: %s named twice", LeaseEndorsesAnnotation, truncate(n, 48))
		}
		m[n] = term
	}
	return m, nil
}

// SigningBytes is the canonical encoding of every field of a but Sig, bound to
// the Node it is written on: a signed verdict cannot be copied onto another
// node. Strings are length-prefixed and numbers fixed-width.
func (a *Annotation) SigningBytes(node string) []byte {
	b := make([]byte, 0, len(verdictDomain)+7*4+len(node)+len(a.State)+len(a.Zone)+len(a.Leader)+len(a.Signer)+4*8)
	b = append(b, verdictDomain...)
	b = appendString(b, node)
	b = appendString(b, string(a.State))
	b = appendString(b, a.Zone)
	b = binary.BigEndian.AppendUint64(b, a.Term)
	b = appendString(b, a.Leader)
	b = binary.BigEndian.AppendUint64(b, uint64(a.At.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(a.Pros)))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(a.Cons)))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(a.Members)))
	return appendString(b, a.Signer)
}

// Sign makes signer the verdict's Signer and signs it for node with signer's
// node key.
func (a *Annotation) Sign(node, signer string, priv ed25519.PrivateKey) {
	a.Signer = signer
	a.Sig = ed25519.Sign(priv, a.SigningBytes(node))
}

// Verify reports whether Sig is a signature of a, as written on node, under
// pub (the key registered by a.Signer's Node). An unsigned annotation or a key
// of the wrong size never verifies.
func (a *Annotation) Verify(node string, pub ed25519.PublicKey) bool {
	if len(pub) != ed25519.PublicKeySize || len(a.Sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, a.SigningBytes(node), a.Sig)
}

// LeaseClaim is what a zone Lease states and its holder signs: who leads the
// zone, under which Raft term, renewed when, for how long.
type LeaseClaim struct {
	Zone   string
	Holder string
	Term   uint64
	// Renewed is the Lease's renewTime; a Lease stores it to the
	// microsecond, and only that much is signed.
	Renewed         time.Time
	DurationSeconds int32
	// Endorses is the LeaseEndorsesAnnotation value, as written.
	Endorses string
}

func (c LeaseClaim) signingBytes() []byte {
	b := make([]byte, 0, len(leaseDomain)+3*4+len(c.Zone)+len(c.Holder)+len(c.Endorses)+3*8)
	b = append(b, leaseDomain...)
	b = appendString(b, c.Zone)
	b = appendString(b, c.Holder)
	b = binary.BigEndian.AppendUint64(b, c.Term)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Renewed.UnixMicro()))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(c.DurationSeconds)))
	return appendString(b, c.Endorses)
}

// Sign returns the LeaseSignatureAnnotation value for c under the holder's
// node key.
func (c LeaseClaim) Sign(priv ed25519.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(priv, c.signingBytes()))
}

// Verify reports whether sig (a LeaseSignatureAnnotation value) signs c under
// pub, the key registered by c.Holder's Node.
func (c LeaseClaim) Verify(sig string, pub ed25519.PublicKey) bool {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize || len(pub) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.Verify(pub, c.signingBytes(), raw)
}
