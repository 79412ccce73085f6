package zone

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"
)

func TestAttestationSignatureCoversEveryField(t *testing.T) {
	key := testKey(t, 1)
	pub := key.Public().(ed25519.PublicKey)
	signed := func() Attestation {
		a := Attestation{Zone: "z", Signer: "n1", At: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC), Reach: []string{"n3", "n2", "n3"},
			Down: []string{"n5", "n4"}}
		a.Sign(key)
		return a
	}
	a := signed()
	if !a.Verify(pub) || !a.Reaches("n2") || !a.Reaches("n3") || a.Reaches("n4") || len(a.Reach) != 2 ||
		!a.FindsDown("n4") || a.FindsDown("n2") {
		t.Fatalf("signed %+v: verifies %v; want n2 and n3 reached, once each", a, a.Verify(pub))
	}
	// Through the annotation, as the webhook reads it.
	got, err := ParseEvidence("z", FormatEvidence([]Attestation{a}))
	if err != nil || len(got) != 1 || !got[0].Verify(pub) {
		t.Fatalf("after a round trip: %+v, %v", got, err)
	}
	for name, change := range map[string]func(*Attestation){
		"zone":   func(a *Attestation) { a.Zone = "y" },
		"signer": func(a *Attestation) { a.Signer = "n2" },
		"at":     func(a *Attestation) { a.At = a.At.Add(time.Millisecond) },
		"reach":  func(a *Attestation) { a.Reach = append(a.Reach, "n4") },
		"fewer":  func(a *Attestation) { a.Reach = a.Reach[:1] },
		"down":   func(a *Attestation) { a.Down = a.Down[:1] },
		// A name moved from one list to the other.
		"moved":  func(a *Attestation) { a.Reach, a.Down = a.Reach[:1], append([]string{a.Reach[1]}, a.Down...) },
		"sig":    func(a *Attestation) { a.Sig[0] ^= 1 },
		"no sig": func(a *Attestation) { a.Sig = nil },
	} {
		a := signed()
		change(&a)
		if a.Verify(pub) {
			t.Errorf("changing %s keeps the attestation's signature valid", name)
		}
	}
	if a.Verify(testKey(t, 2).Public().(ed25519.PublicKey)) {
		t.Error("an attestation verifies under another key")
	}
}

func TestParseEvidenceRefusesWhatItCannotTrust(t *testing.T) {
	a := Attestation{Zone: "z", Signer: "n1", At: time.Now(), Reach: []string{"n2"}}
	a.Sign(testKey(t, 1))
	if got, err := ParseEvidence("z", ""); err != nil || got != nil {
		t.Errorf("no evidence: %v, %v", got, err)
	}
	sig := `"` + strings.Repeat("A", 86) + `=="`
	for _, bad := range []string{
		"{", "{}", `[{"s":"","t":1,"r":[],"g":` + sig + `}]`,
		`[{"s":"n1","t":1,"r":["n3","n2"],"g":` + sig + `}]`,
		`[{"s":"n1","t":1,"r":["n2","n2"],"g":` + sig + `}]`,
		`[{"s":"n1","t":1,"r":[""],"g":` + sig + `}]`,
		`[{"s":"n1","t":1,"r":["n2"],"g":"AAAA"}]`,
		"[" + strings.Repeat(`{"s":"n1","t":1,"r":[],"g":`+sig+`},`, maxAttestations) + `{"s":"n1","t":1,"r":[],"g":` + sig + `}]`,
		strings.Repeat(" ", MaxEvidenceBytes+1),
	} {
		if _, err := ParseEvidence("z", bad); err == nil {
			t.Errorf("ParseEvidence(%.60q) accepted", bad)
		}
	}
	// What does not fit is left out, not written past the bound.
	many := make([]Attestation, 0, 1000)
	for range 1000 {
		many = append(many, a)
	}
	s := FormatEvidence(many)
	got, err := ParseEvidence("z", s)
	if err != nil || len(s) > MaxEvidenceBytes || len(got) == 0 || len(got) == len(many) {
		t.Errorf("1000 attestations: %d bytes, %d parsed, %v; want some, within %d bytes", len(s), len(got), err, MaxEvidenceBytes)
	}
}

// FuzzParseEvidence: the webhook reads this from Leases any agent token may
// write. Whatever it accepts formats back to the same attestations.
func FuzzParseEvidence(f *testing.F) {
	a := Attestation{Zone: "z", Signer: "n1", At: time.UnixMilli(1_700_000_000_000), Reach: []string{"n2", "n3"}, Down: []string{"n4"}}
	a.Sign(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	for _, s := range []string{"", "[]", FormatEvidence([]Attestation{a}), "[{}]", `[{"s":"n1","t":-1,"r":null,"g":""}]`,
		`[{"s":"n1","t":1,"r":[],"d":[],"g":"` + strings.Repeat("A", 86) + `=="}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		atts, err := ParseEvidence("z", s)
		if err != nil {
			return
		}
		again, err := ParseEvidence("z", FormatEvidence(atts))
		if err != nil || len(again) != len(atts) {
			t.Fatalf("%q parsed to %d attestations, which format to %d, %v", s, len(atts), len(again), err)
		}
		for i := range atts {
			if string(again[i].SigningBytes()) != string(atts[i].SigningBytes()) {
				t.Fatalf("%q: attestation %d changed in a round trip", s, i)
			}
		}
	})
}
