package zone

import (
	"crypto/ed25519"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
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
			Pros: 2, Cons: 1, Members: 3, SignedTerm: 8}
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
		// Dropped, the verdict reads as one of the release before.
		"signed term":         func(a *Annotation) { a.SignedTerm = math.MaxUint64 },
		"signed term dropped": func(a *Annotation) { a.SignedTerm = 0 },
	} {
		a := signed()
		change(&a)
		if a.Verify("n2", pub) {
			t.Errorf("changing %s keeps the signature valid", name)
		}
	}
	// A verdict of the release before, with no signing term, still verifies,
	// and is ordered by the term it was decided in.
	old := signed()
	old.SignedTerm = 0
	old.Sign("n2", "n1", key)
	if !old.Verify("n2", pub) || old.SigningTerm() != 7 || a.SigningTerm() != 8 {
		t.Errorf("a verdict without a signing term: verifies %v, signing term %d (want 7); with one: %d (want 8)",
			old.Verify("n2", pub), old.SigningTerm(), a.SigningTerm())
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

// TestQuietLeaseClaimSignature: format 1 signs what v0.3.0 signs, whether
// its level is written or not; the quiet format signs its level too, so a
// quiet renewal cannot be passed off as a busy one nor the other way round.
func TestQuietLeaseClaimSignature(t *testing.T) {
	key := testKey(t, 3)
	pub := key.Public().(ed25519.PublicKey)
	busy := LeaseClaim{Zone: "z", Holder: "n1", Term: 4, Renewed: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), DurationSeconds: 57}
	sig := busy.Sign(key)
	for _, f := range []skew.Level{skew.Unannounced, skew.Level1} {
		c := busy
		c.Format = f
		if !c.Verify(sig, pub) || c.Quiet() {
			t.Errorf("a format-1 claim read at level %d: verifies %v, quiet %v", f, c.Verify(sig, pub), c.Quiet())
		}
	}
	quiet := busy
	quiet.Format = LeaseQuietFormat
	qsig := quiet.Sign(key)
	if !quiet.Verify(qsig, pub) || !quiet.Quiet() {
		t.Fatal("a signed quiet claim does not verify as quiet")
	}
	if quiet.Verify(sig, pub) {
		t.Error("a busy renewal's signature verifies it marked quiet")
	}
	for _, f := range []skew.Level{skew.Level1, LeaseQuietFormat + 1} {
		c := quiet
		c.Format = f
		if c.Verify(qsig, pub) {
			t.Errorf("a quiet renewal's signature verifies it as format %d", f)
		}
	}
}

func TestEndorsements(t *testing.T) {
	d1, d2 := VerdictDigest([]byte("sig-1")), VerdictDigest([]byte("sig-2"))
	m := map[string]string{"n2": d2, "n10": d1}
	s := FormatEndorsements(m)
	if s != "n10:"+d1+",n2:"+d2 {
		t.Fatalf("FormatEndorsements = %q", s)
	}
	got, err := ParseEndorsements(s)
	if err != nil || len(got.Verdicts) != 2 || got.Verdicts["n10"] != d1 || got.Verdicts["n2"] != d2 || len(got.Leaders) != 0 {
		t.Fatalf("ParseEndorsements(%q) = %v, %v", s, got, err)
	}
	if got, err := ParseEndorsements(""); err != nil || len(got.Verdicts)+len(got.Leaders) != 0 {
		t.Errorf("no endorsements: %v, %v", got, err)
	}
	// The release before's form is still read.
	legacy := "a=0,n10=18446744073709551615,n2=4"
	if got, err := ParseEndorsements(legacy); err != nil || len(got.Leaders) != 3 || got.Leaders["n10"] != math.MaxUint64 {
		t.Errorf("ParseEndorsements(%q) = %v, %v", legacy, got, err)
	}
	for _, bad := range []string{"n1", "n1=", "=4", "n1=-1", "n1=4,", "n1=4,n1=5", "n1=4;n2=5", "n1=18446744073709551616",
		"n1:", ":" + d1, "n1:" + d1 + "A", "n1:" + d1[:15], "n1:!" + d1[1:], "n1:" + d1 + ",n1:" + d2, "n=1:" + d1} {
		if _, err := ParseEndorsements(bad); err == nil {
			t.Errorf("ParseEndorsements(%q) accepted", bad)
		}
	}
}

func TestEndorsementsVouch(t *testing.T) {
	a := Annotation{State: Healthy, Zone: "z", Term: 3, Leader: "n1", Signer: "n1", SignedTerm: 3, Sig: []byte("sig-1")}
	e := Endorsements{Verdicts: map[string]string{"n2": VerdictDigest(a.Sig)}}
	if !e.Vouches("n2", &a) {
		t.Error("the verdict named does not stand")
	}
	other := a
	other.Sig = []byte("sig-2") // another verdict by the same signer and term
	if e.Vouches("n2", &other) || e.Vouches("n3", &a) {
		t.Error("an endorsement vouches for a verdict it does not name")
	}
	// The release before's: by signer, and only for its own verdicts.
	old := Endorsements{Leaders: map[string]uint64{"n1": 3}}
	legacy := a
	legacy.SignedTerm = 0
	if !old.Vouches("n2", &legacy) || old.Vouches("n2", &a) {
		t.Error("a leader endorsement must vouch for that leader's verdicts without a signing term, and only those")
	}
}

// FuzzParseEndorsements: the webhook reads this from Leases edge credentials
// write. Whatever verdicts it accepts, formatting gives back the same.
func FuzzParseEndorsements(f *testing.F) {
	for _, s := range []string{"", "a=0,n10=18446744073709551615,n2=4", "n1=4,n1=5", "=", ",,", "n1=4;n2=5",
		"n1:" + VerdictDigest([]byte("x")), "n1:" + VerdictDigest([]byte("x")) + ",n2=4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEndorsements(s)
		if err != nil {
			return
		}
		again, err := ParseEndorsements(FormatEndorsements(e.Verdicts))
		if err != nil || len(again.Verdicts) != len(e.Verdicts) {
			t.Fatalf("%q parsed to %v, which formats to something that parses to %v, %v", s, e, again, err)
		}
		for n, d := range e.Verdicts {
			if again.Verdicts[n] != d {
				t.Fatalf("%q: %s:%s became %s", s, n, d, again.Verdicts[n])
			}
		}
	})
}
