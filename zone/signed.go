package zone

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

// Signature domains: a signature made for one kind of statement can never be
// read as another (reports use signingDomain).
const (
	verdictDomain = "edgequorum/verdict/v1\x00"
	// verdictDomainV2 signs a verdict that carries its SignedTerm.
	verdictDomainV2 = "edgequorum/verdict/v2\x00"
	leaseDomain     = "edgequorum/zone-lease/v1\x00"
)

// LeaseSignatureAnnotation on a zone Lease is its holder's signature over the
// Lease's LeaseClaim, base64. Anyone allowed to write Leases in the namespace
// can write a zone Lease; only the holder's node key can sign one, and the
// webhook honours only signed ones.
const LeaseSignatureAnnotation = "edgequorum.io/signature"

// LeaseEndorsesAnnotation on a zone Lease names the verdicts standing on the
// zone's Nodes that earlier leaders signed and the holder vouches for, each by
// its node and digest (see FormatEndorsements). The holder signs it with its
// claim, so a new leader need not sign every standing verdict again, and
// vouches for exactly those verdicts: not for anything else their signers
// sign.
const LeaseEndorsesAnnotation = "edgequorum.io/endorses"

// verdictDigestBytes is how much of a signature's SHA-256 names a verdict in
// an endorsement: 96 bits, beyond a second preimage.
const verdictDigestBytes = 12

// VerdictDigest names a signed verdict in an endorsement: the start of the
// SHA-256 of its signature, which binds every field and the Node (Ed25519
// signs deterministically), base64url.
func VerdictDigest(sig []byte) string {
	sum := sha256.Sum256(sig)
	return base64.RawURLEncoding.EncodeToString(sum[:verdictDigestBytes])
}

// Endorsements are what a zone Lease vouches for.
type Endorsements struct {
	// Verdicts are the endorsed verdicts: node → VerdictDigest.
	Verdicts map[string]string
	// Leaders are earlier leaders with the highest term of their verdicts
	// the holder vouches for ("node=term"): the form of the release
	// before, read so that its agents keep their zones protected while the
	// webhook is upgraded first. Written no more.
	Leaders map[string]uint64
}

// FormatEndorsements renders endorsed verdicts, node → VerdictDigest, as the
// LeaseEndorsesAnnotation value: "node:digest" pairs sorted by node, joined by
// commas; "" for none. Node names hold neither ',' nor ':'.
func FormatEndorsements(verdicts map[string]string) string {
	names := make([]string, 0, len(verdicts))
	for n := range verdicts {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(verdicts[n])
	}
	return b.String()
}

// ParseEndorsements reads a LeaseEndorsesAnnotation value: "node:digest" pairs,
// or the release before's "node=term" pairs. Anything else is an error: a
// claim that does not parse vouches for nobody.
func ParseEndorsements(s string) (Endorsements, error) {
	e := Endorsements{Verdicts: map[string]string{}, Leaders: map[string]uint64{}}
	if s == "" {
		return e, nil
	}
	for _, pair := range strings.Split(s, ",") {
		if n, d, ok := strings.Cut(pair, ":"); ok {
			raw, err := base64.RawURLEncoding.DecodeString(d)
			if n == "" || err != nil || len(raw) != verdictDigestBytes || strings.Contains(n, "=") {
				return Endorsements{}, fmt.Errorf("%s %q: want node:digest pairs", LeaseEndorsesAnnotation, truncate(s, 48))
			}
			if _, dup := e.Verdicts[n]; dup {
				return Endorsements{}, fmt.Errorf("%s: %s named twice", LeaseEndorsesAnnotation, truncate(n, 48))
			}
			e.Verdicts[n] = d
			continue
		}
		n, t, ok := strings.Cut(pair, "=")
		term, err := strconv.ParseUint(t, 10, 64)
		if !ok || n == "" || err != nil {
			return Endorsements{}, fmt.Errorf("%s %q: want node:digest pairs", LeaseEndorsesAnnotation, truncate(s, 48))
		}
		if _, dup := e.Leaders[n]; dup {
			return Endorsements{}, fmt.Errorf("%s: %s named twice", LeaseEndorsesAnnotation, truncate(n, 48))
		}
		e.Leaders[n] = term
	}
	return e, nil
}

// Vouches reports whether the endorsements vouch for verdict a signed by
// another than the Lease's holder, on node: named by its digest, or, for a
// verdict of the release before (no SignedTerm), by the earlier leader that
// decided and signed it up to the term named.
func (e Endorsements) Vouches(node string, a *Annotation) bool {
	if d, ok := e.Verdicts[node]; ok && len(a.Sig) > 0 && d == VerdictDigest(a.Sig) {
		return true
	}
	t, ok := e.Leaders[a.Signer]
	return ok && a.SignedTerm == 0 && a.Leader == a.Signer && a.Term <= t
}

// SigningBytes is the canonical encoding of every field of a but Sig, bound to
// the Node it is written on: a signed verdict cannot be copied onto another
// node. Strings are length-prefixed and numbers fixed-width. A verdict with a
// SignedTerm is signed under its own domain, with that term; one without is
// the encoding of the release before, so its signatures still verify.
func (a *Annotation) SigningBytes(node string) []byte {
	b := make([]byte, 0, len(verdictDomainV2)+7*4+len(node)+len(a.State)+len(a.Zone)+len(a.Leader)+len(a.Signer)+5*8)
	if a.SignedTerm != 0 {
		b = append(b, verdictDomainV2...)
		b = binary.BigEndian.AppendUint64(b, a.SignedTerm)
	} else {
		b = append(b, verdictDomain...)
	}
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
	// Format is the Lease's format level (LeaseFormatAnnotation), signed
	// from LeaseQuietFormat on, so that no one can pass a quiet renewal off
	// as a busy one or the other way round.
	Format skew.Level
}

// Quiet reports whether the claim is a quiet renewal (LeaseQuietFormat): when
// it was made no member needed the cloud's attention (no member the cloud
// cannot hear from, no vote short), so its holder renews only now and then,
// for DurationSeconds, and at once, with a busy renewal of format 1, as soon
// as one does. A release that renews busily writes format 1, which every
// reader reads, and its successors may too; a leader of v0.3.0 that takes a
// quiet Lease over writes its format 1 over it, and nothing of the quiet one
// stays.
func (c LeaseClaim) Quiet() bool { return c.Format == LeaseQuietFormat }

func (c LeaseClaim) signingBytes() []byte {
	b := make([]byte, 0, len(leaseDomain)+3*4+len(c.Zone)+len(c.Holder)+len(c.Endorses)+5*8)
	b = append(b, leaseDomain...)
	b = appendString(b, c.Zone)
	b = appendString(b, c.Holder)
	b = binary.BigEndian.AppendUint64(b, c.Term)
	b = binary.BigEndian.AppendUint64(b, uint64(c.Renewed.UnixMicro()))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(c.DurationSeconds)))
	b = appendString(b, c.Endorses)
	if c.Format < LeaseQuietFormat {
		// Format 1's bytes, as v0.3.0 signs and checks them.
		return b
	}
	return binary.BigEndian.AppendUint64(b, uint64(c.Format))
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
