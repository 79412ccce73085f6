package zone

import (
	"crypto/ed25519"
	"encoding/json"
	"math"
	"testing"
	"time"
)

func testKey(t *testing.T, seed byte) ed25519.PrivateKey {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	return ed25519.NewKeyFromSeed(s)
}

func TestVerdictSignatureCoversEveryField(t *testing.T) {
	key := testKey(t, 1)
	pub := key.Public().(ed25519.PublicKey)
	signed := func() Annotation {
		a := Annotation{State: Healthy, Zone: "z", Term: 7, Leader: "n1", At: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC),
			Pros: 2, Cons: 1, Members: 3}
		a.Sign("n2", "n1", key)
		return a
	}
	a := signed()
	// Through the annotation's JSON, as the webhook reads it.
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAnnotation(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Verify("n2", pub) {
		t.Fatal("a signed verdict does not verify after a JSON round trip")
	}
	if got.Verify("n3", pub) {
		t.Error("a verdict signed for n2 verifies on n3")
	}
	if got.Verify("n2", testKey(t, 2).Public().(ed25519.PublicKey)) {
		t.Error("a verdict verifies under another key")
	}
	for name, change := range map[string]func(*Annotation){
		"state":   func(a *Annotation) { a.State = Unhealthy },
		"zone":    func(a *Annotation) { a.Zone = "y" },
		"term":    func(a *Annotation) { a.Term = math.MaxUint64 },
		"leader":  func(a *Annotation) { a.Leader = "n9" },
		"at":      func(a *Annotation) { a.At = a.At.Add(time.Nanosecond) },
		"pros":    func(a *Annotation) { a.Pros++ },
		"cons":    func(a *Annotation) { a.Cons-- },
		"members": func(a *Annotation) { a.Members++ },
		"signer":  func(a *Annotation) { a.Signer = "n2" },
		"sig":     func(a *Annotation) { a.Sig[0] ^= 1 },
		"no sig":  func(a *Annotation) { a.Sig = nil },
	} {
		a := signed()
		change(&a)
		if a.Verify("n2", pub) {
			t.Errorf("changing %s keeps the signature valid", name)
		}
	}
}

func TestLeaseClaimSignature(t *testing.T) {
	key := testKey(t, 3)
	pub := key.Public().(ed25519.PublicKey)
	c := LeaseClaim{Zone: "z", Holder: "n1", Term: 4, Renewed: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), DurationSeconds: 15}
	sig := c.Sign(key)
	// A Lease keeps renewTime to the microsecond: the nanoseconds it drops
	// were never signed.
	read := c
	read.Renewed = c.Renewed.Add(999 * time.Nanosecond).Truncate(time.Microsecond)
	if !read.Verify(sig, pub) {
		t.Fatal("a signed claim does not verify")
	}
	for name, change := range map[string]func(*LeaseClaim){
		"zone":     func(c *LeaseClaim) { c.Zone = "y" },
		"holder":   func(c *LeaseClaim) { c.Holder = "n2" },
		"term":     func(c *LeaseClaim) { c.Term = math.MaxUint64 },
		"renewed":  func(c *LeaseClaim) { c.Renewed = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC) },
		"duration": func(c *LeaseClaim) { c.DurationSeconds = 1 << 30 },
		"endorses": func(c *LeaseClaim) { c.Endorses = "n9=4" },
	} {
		c := c
		change(&c)
		if c.Verify(sig, pub) {
			t.Errorf("changing %s keeps the Lease signature valid", name)
		}
	}
	for _, bad := range []string{"", "!!", "AAAA"} {
		if c.Verify(bad, pub) {
			t.Errorf("signature %q verifies", bad)
		}
	}
}

func TestEndorsements(t *testing.T) {
	m := map[string]uint64{"n2": 4, "n10": math.MaxUint64, "a": 0}
	s := FormatEndorsements(m)
	if s != "a=0,n10=18446744073709551615,n2=4" {
		t.Fatalf("FormatEndorsements = %q", s)
	}
	got, err := ParseEndorsements(s)
	if err != nil || len(got) != 3 || got["n10"] != math.MaxUint64 || got["a"] != 0 {
		t.Fatalf("ParseEndorsements(%q) = %v, %v", s, got, err)
	}
	if got, err := ParseEndorsements(""); err != nil || len(got) != 0 {
		t.Errorf("no endorsements: %v, %v", got, err)
	}
	for _, bad := range []string{"n1", "n1=", "=4", "n1=-1", "n1=4,", "n1=4,n1=5", "n1=4;n2=5", "n1=18446744073709551616"} {
		if _, err := ParseEndorsements(bad); err == nil {
			t.Errorf("ParseEndorsements(%q) accepted", bad)
		}
	}
}

// FuzzParseEndorsements: the webhook reads this from Leases edge credentials
// write. Whatever it accepts, formatting gives back the same endorsements.
func FuzzParseEndorsements(f *testing.F) {
	for _, s := range []string{"", "a=0,n10=18446744073709551615,n2=4", "n1=4,n1=5", "=", ",,", "n1=4;n2=5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseEndorsements(s)
		if err != nil {
			return
		}
		again, err := ParseEndorsements(FormatEndorsements(m))
		if err != nil || len(again) != len(m) {
			t.Fatalf("%q parsed to %v, which formats to something that parses to %v, %v", s, m, again, err)
		}
		for n, term := range m {
			if again[n] != term {
				t.Fatalf("%q: %s=%d became %d", s, n, term, again[n])
			}
		}
	})
}
