package suite

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

// EvidenceCost is what the API would carry per zone if a healthy verdict had to
// come with the signed evidence of a quorum of the node's peers, so that not
// even a compromised leader alone could keep a dead node protected. Sizes are
// of real encodings (JSON, Ed25519 signatures in base64) at each zone size.
type EvidenceCost struct {
	N int
	// Verdict is the signed verdict annotation shipped today, in bytes.
	Verdict int
	// Attested is that annotation plus one signed attestation ("peer P
	// healthy at t", 64-byte signature) from each of a majority of members.
	Attested int
	// Reports is that annotation plus the majority's whole signed reports
	// (a result for every peer), the only signed evidence members send
	// today.
	Reports int
}

// evidenceCost encodes the three annotations for a node of a zone of n.
func evidenceCost(n int) EvidenceCost {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	at := time.Date(2026, 11, 23, 12, 0, 0, 123456789, time.UTC)
	peer := func(i int) string { return fmt.Sprintf("edge-site-%03d", i) }
	a := zone.Annotation{State: zone.Healthy, Zone: "site-042", Term: 1234, Leader: peer(0), At: at,
		Pros: n/2 + 1, Members: n}
	a.Sign(peer(1), peer(0), priv)
	size := func(v any) int {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return len(b)
	}
	verdict := size(a)
	type attestation struct {
		From string    `json:"from"`
		At   time.Time `json:"at"`
		Sig  []byte    `json:"sig"`
	}
	majority := n/2 + 1
	var atts []attestation
	var reports []zone.Report
	for i := range majority {
		atts = append(atts, attestation{From: peer(i), At: at, Sig: ed25519.Sign(priv, []byte(peer(i)))})
		r := zone.Report{Zone: "site-042", From: peer(i), Seq: 1 << 50, SentAt: at, KeyID: "k1", MAC: make([]byte, 32)}
		for j := range n {
			if j != i {
				r.Results = append(r.Results, zone.Result{Peer: peer(j), OK: true, Score: 100})
			}
		}
		if err := r.SignNode(priv); err != nil {
			panic(err)
		}
		reports = append(reports, r)
	}
	return EvidenceCost{N: n, Verdict: verdict, Attested: verdict + size(atts), Reports: verdict + size(reports)}
}

// writeEvidence reports the cost of quorum evidence: per verdict write, and
// per zone and hour when the evidence is kept fresh, that is rewritten on every
// node with each zone Lease renewal. Evidence that is not kept fresh proves
// nothing against a compromised leader: it can keep showing the last healthy
// quorum of a node that died after it.
func writeEvidence(b *strings.Builder, rep *Report) {
	const renew = 5 * time.Second // the zone Lease renewal
	perHour := float64(time.Hour / renew)
	b.WriteString("What a healthy verdict would cost if it carried the signed evidence of a majority of its peers " +
		"(not shipped; see DESIGN.md, \"API trust\"). Bytes per Node annotation, and per zone and hour to the apiserver " +
		"when the evidence is rewritten on every node with each zone Lease renewal (every 5 s), which it must be to prove " +
		"anything about now.\n\n")
	row(b, "N", "signed verdict (shipped)", "+ majority attestations", "+ majority reports",
		"attestations, fresh: MB per zone per hour", "today: zone Lease, MB per zone per hour")
	rule(b, 6)
	lease := float64(leaseBytes) * perHour / 1e6
	for _, r := range rep.Sizes {
		c := evidenceCost(r.N)
		row(b, sizeLabel(r), fmt.Sprint(c.Verdict), fmt.Sprint(c.Attested), fmt.Sprint(c.Reports),
			num(float64(c.Attested*r.N)*perHour/1e6, 1), num(lease, 2))
	}
}

// leaseBytes is about what one zone Lease renewal sends: the Lease object with
// its term, members and signature annotations.
const leaseBytes = 700
