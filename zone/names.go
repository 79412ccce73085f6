package zone

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

const (
	// DefaultZoneLabel groups nodes into zones unless --zone-label says
	// otherwise. Only edge nodes carry it (managed clouds put
	// topology.kubernetes.io/zone on every cloud node), and NodeRestriction
	// reserves the node-restriction.kubernetes.io/ prefix to administrators, so a
	// kubelet can neither set it on itself nor move its node into another zone.
	DefaultZoneLabel = "node-restriction.kubernetes.io/edgequorum-zone"
	// AnnotationKey is the Node annotation carrying the zone's verdict; the
	// webhook reads it, only the zone leader writes it.
	AnnotationKey = "edgequorum.io/verdict"
	// LeaseTermAnnotation on a zone Lease is the Raft term its holder renews
	// it under. It fences renewals (a higher term belongs to a newer leader),
	// and a new term tells the webhook that new verdicts may vouch for nodes.
	LeaseTermAnnotation = "edgequorum.io/term"
	// OutOfServiceAnnotation marks a Node the webhook's failover tainted out
	// of service, with when. It lies outside edgequorum.io/, so agent
	// tokens cannot write it; the leader reads it to stop gathering
	// evidence for a node the failover has acted on.
	OutOfServiceAnnotation = "failover.edgequorum.io/out-of-service"
	// DefaultLeaseNamespace is where zone and genesis Leases live.
	DefaultLeaseNamespace = "edgequorum-system"
)

// Annotation is the JSON stored under AnnotationKey. Field names are an API: the
// webhook and operators' tooling parse them.
type Annotation struct {
	State   State     `json:"state"`
	Zone    string    `json:"zone"`
	Term    uint64    `json:"term"`
	Leader  string    `json:"leader"`
	At      time.Time `json:"at"`
	Pros    int       `json:"pros"`
	Cons    int       `json:"cons"`
	Members int       `json:"members"`
	// Signer is the member whose node key made Sig: the zone Lease's holder
	// when it was written, which need not be Leader (a new leader signs the
	// verdicts its predecessors decided). The webhook honours a verdict only
	// if Signer holds, or just held, the zone Lease.
	Signer string `json:"signer,omitempty"`
	// SignedTerm is the Raft term Signer led when it signed: a verdict
	// signed under a newer term supersedes any signed under an older one,
	// whatever their decision times, so an earlier leader's word ends with
	// its leadership. Zero on verdicts of releases before it existed, which
	// are ordered by Term.
	SignedTerm uint64 `json:"signedTerm,omitempty"`
	// Sig is Signer's Ed25519 signature over SigningBytes for the Node the
	// annotation is on.
	Sig []byte `json:"sig,omitempty"`
	// V is the level of the annotation's format (VerdictFormat of the
	// level its writer's readers read); zero on verdicts of releases
	// before levels. A
	// format whose signed bytes change is signed under a new domain, so V
	// itself need not be signed.
	V skew.Level `json:"v,omitempty"`
}

// SigningTerm is the term the verdict was signed under: SignedTerm, or for a
// verdict of an earlier release that carries none, the term it was decided in.
func (a *Annotation) SigningTerm() uint64 {
	if a.SignedTerm != 0 {
		return a.SignedTerm
	}
	return a.Term
}

// AnnotationFor renders a committed verdict for the Node object of v.Node,
// in the newest format readers of level at read.
func AnnotationFor(zoneName string, v Verdict, at skew.Level) Annotation {
	return Annotation{State: v.State, Zone: zoneName, Term: v.Term, Leader: v.Leader,
		At: v.DecidedAt.UTC(), Pros: v.Pros, Cons: v.Cons, Members: v.Members, V: VerdictFormat(at)}
}

// ParseAnnotation decodes an annotation value, rejecting unknown states so that a
// hand-edited or foreign annotation never vouches for a node, and a format of
// a newer release with an error wrapping skew.ErrTooNew.
func ParseAnnotation(s string) (Annotation, error) {
	var a Annotation
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return Annotation{}, fmt.Errorf("parse %s annotation: %w", AnnotationKey, err)
	}
	if _, err := checkLevel(AnnotationKey+" annotation", a.V, skew.UpgradeWebhook); err != nil {
		return Annotation{}, fmt.Errorf("parse %w", err)
	}
	if !a.State.Valid() || a.State == "" {
		return Annotation{}, fmt.Errorf("parse %s annotation: unknown state %q", AnnotationKey, a.State)
	}
	return a, nil
}

// LeaseName is the zone Lease the leader renews: the webhook's proof that the
// zone's quorum is alive and reaches the cloud.
func LeaseName(zoneName string) string { return objectName("edgequorum-", zoneName) }

// GenesisLeaseName is the object whose atomic Create decides which member may
// bootstrap the zone's Raft cluster.
func GenesisLeaseName(zoneName string) string { return objectName("edgequorum-genesis-", zoneName) }

// objectName turns a label value (which may hold upper case, '_' and up to 63
// characters) into a valid object name. Values that had to change get a short hash
// suffix so two zones never share a Lease.
func objectName(prefix, zoneName string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, zoneName)
	clean = strings.Trim(clean, "-.")
	if clean == zoneName && clean != "" {
		return prefix + clean
	}
	sum := sha256.Sum256([]byte(zoneName))
	if clean == "" {
		return prefix + hex.EncodeToString(sum[:5])
	}
	return prefix + clean + "-" + hex.EncodeToString(sum[:5])
}
