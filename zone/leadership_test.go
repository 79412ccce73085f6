package zone

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

func testVotes(term uint64, leader string, signers ...string) ([]LeaderVote, map[string]ed25519.PublicKey) {
	keys := map[string]ed25519.PublicKey{}
	var out []LeaderVote
	for i, s := range signers {
		seed := make([]byte, ed25519.SeedSize)
		seed[0] = byte(i + 1)
		priv := ed25519.NewKeyFromSeed(seed)
		keys[s] = priv.Public().(ed25519.PublicKey)
		v := LeaderVote{Zone: "z", Term: term, Leader: leader, Signer: s}
		v.Sign(priv)
		out = append(out, v)
	}
	return out, keys
}

// TestLeadershipRoundTrip: what FormatLeadership writes, ParseLeadership reads
// back, and every vote still verifies under its signer's key, and under no
// other term, leader or zone.
func TestLeadershipRoundTrip(t *testing.T) {
	votes, keys := testVotes(7, "n1", "n3", "n1", "n2")
	raw := FormatLeadership(votes)
	got, err := ParseLeadership("z", raw)
	if err != nil || len(got) != 3 {
		t.Fatalf("ParseLeadership(%s) = %v, %v", raw, got, err)
	}
	for i, v := range got {
		if want := []string{"n1", "n2", "n3"}[i]; v.Signer != want || v.Term != 7 || v.Leader != "n1" || !v.Verify(keys[v.Signer]) {
			t.Errorf("vote %d: %+v, verifies %v; want %s's for n1 in term 7", i, v, v.Verify(keys[v.Signer]), want)
		}
		for _, change := range []func(*LeaderVote){
			func(v *LeaderVote) { v.Term++ },
			func(v *LeaderVote) { v.Leader = "n2" },
			func(v *LeaderVote) { v.Zone = "other" },
			func(v *LeaderVote) { v.Signer = "n9" },
		} {
			forged := v
			change(&forged)
			if forged.Verify(keys[v.Signer]) {
				t.Errorf("vote %+v verifies after a change", forged)
			}
		}
	}
	if s := FormatLeadership(append(votes, LeaderVote{Zone: "z", Term: 8, Leader: "n1", Signer: "n4", Sig: votes[0].Sig})); s != "" {
		t.Errorf("votes of two terms formatted as %s", s)
	}
	if FormatLeadership(nil) != "" {
		t.Error("no votes formatted as something")
	}
}

// TestLeadershipBounded: a zone of a few hundred members keeps its majority
// within the bound, and more votes than fit are dropped, not the annotation.
func TestLeadershipBounded(t *testing.T) {
	var signers []string
	for i := range 400 {
		signers = append(signers, "edge-node-"+strings.Repeat("x", 8)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	votes, _ := testVotes(3, signers[0], signers...)
	raw := FormatLeadership(votes)
	got, err := ParseLeadership("z", raw)
	if err != nil || len(raw) > MaxLeadershipBytes {
		t.Fatalf("%d bytes: %v", len(raw), err)
	}
	if len(got) < 201 {
		t.Errorf("%d of 400 votes kept in %d bytes; want a majority", len(got), len(raw))
	}
}

func FuzzParseLeadership(f *testing.F) {
	votes, _ := testVotes(7, "n1", "n1", "n2")
	for _, s := range []string{"", "{}", FormatLeadership(votes), `{"t":1,"l":"n1","v":{"":""}}`, `{"t":0,"l":"","v":null}`,
		`{"t":1,"l":"n1","v":{"n2":"` + strings.Repeat("A", 86) + `=="}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseLeadership("z", s)
		if err != nil {
			return
		}
		if len(got) == 0 {
			return
		}
		again, err := ParseLeadership("z", FormatLeadership(got))
		if err != nil || len(again) != len(got) {
			t.Fatalf("%q parsed to %d votes, formatted and parsed again to %d, %v", s, len(got), len(again), err)
		}
	})
}
