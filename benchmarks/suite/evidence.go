package suite

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

// EvidenceCost is what the quorum's evidence adds to a zone's Lease renewals:
// while some of the zone's nodes cannot reach the cloud on their own, every
// member's signed attestation of which of them it reaches rides along with
// each renewal (raftzone.Member.GatherEvidence, apiwriter's Lease). Sizes are
// of the real encoding (zone.FormatEvidence, Ed25519 signatures) at each zone
// size, with node names as long as a typical site's.
type EvidenceCost struct {
	N int
	// Cut are the nodes individually cut for each column: none, one, and a
	// tenth of the zone (rounded up).
	Cut [3]int
	// Bytes is the evidence annotation per renewal for each column.
	Bytes [3]int
	// Votes is the leadership annotation every renewal carries: the votes
	// of a majority of the members and one more that the holder leads.
	Votes int
}

// evidenceCost encodes the evidence of a zone of n with 0, 1 and 10 % of its
// nodes cut from the cloud while their peers reach them.
func evidenceCost(n int) EvidenceCost {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	at := time.Date(2026, 11, 23, 12, 0, 0, 123456789, time.UTC)
	peer := func(i int) string { return fmt.Sprintf("edge-site-042-%03d", i) }
	c := EvidenceCost{N: n, Cut: [3]int{0, 1, (n + 9) / 10}}
	var votes []zone.LeaderVote
	for i := range min(n, n/2+2) {
		v := zone.LeaderVote{Zone: "site-042", Term: 12345, Leader: peer(0), Signer: peer(i)}
		v.Sign(priv)
		votes = append(votes, v)
	}
	c.Votes = len(zone.FormatLeadership(votes))
	for col, k := range c.Cut {
		if k == 0 {
			continue
		}
		var cut []string
		for i := range k {
			cut = append(cut, peer(n-1-i))
		}
		atts := make([]zone.Attestation, 0, n)
		for i := range n {
			a := zone.Attestation{Zone: "site-042", Signer: peer(i), At: at}
			for _, x := range cut {
				if x != peer(i) {
					a.Reach = append(a.Reach, x)
				}
			}
			a.Sign(priv)
			atts = append(atts, a)
		}
		c.Bytes[col] = len(zone.FormatEvidence(atts))
	}
	return c
}

// writeEvidence reports what the quorum's evidence costs the apiserver: bytes
// per zone Lease renewal and MB per zone and hour (a renewal every 5 s), with
// none, one and a tenth of a zone's nodes individually cut, next to the zone
// Lease alone.
func writeEvidence(b *strings.Builder, rep *Report) {
	const renew = 5 * time.Second // the zone Lease renewal
	perHour := float64(time.Hour / renew)
	b.WriteString("A node the cloud cannot hear from while its zone reaches the cloud is protected only on the signed word " +
		"of a majority of its peers (DESIGN.md, \"API trust\"). While some node needs it, every zone Lease renewal carries " +
		"each member's signed attestation of which such nodes it reaches; with none cut it carries nothing. A node the zone judges " +
		"dead costs as much as a cut one (its peers attest it down, for the failover) until the failover marks it. Computed from " +
		"the real encoding (node names of 18 characters): bytes per renewal, and MB per zone and hour at a renewal every 5 s, " +
		"next to the zone Lease alone and to the leader votes every renewal carries (a majority of the members and one more, " +
		"each signed that the holder leads in its term: DESIGN.md, \"The zone's word on who leads it\").\n\n")
	row(b, "N", "0 cut", "1 cut: bytes / MB per hour", "10 % cut: nodes, bytes / MB per hour", "zone Lease alone, MB per hour",
		"leader votes: bytes / MB per hour")
	rule(b, 6)
	lease := float64(leaseBytes) * perHour / 1e6
	for _, r := range rep.Sizes {
		c := evidenceCost(r.N)
		mb := func(col int) string { return num(float64(c.Bytes[col])*perHour/1e6, 2) }
		row(b, sizeLabel(r), "0",
			fmt.Sprintf("%d / %s", c.Bytes[1], mb(1)),
			fmt.Sprintf("%d: %d / %s", c.Cut[2], c.Bytes[2], mb(2)),
			num(lease, 2),
			fmt.Sprintf("%d / %s", c.Votes, num(float64(c.Votes)*perHour/1e6, 2)))
	}
}

// leaseBytes is about what one zone Lease renewal sends: the Lease object with
// its term, members and signature annotations.
const leaseBytes = 700
