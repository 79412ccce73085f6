package zone

import (
	"bytes"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

func TestAReportsAnnouncementIsSignedWithIt(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	r := Report{Zone: "z", From: "a", Seq: 1, SentAt: time.Unix(1, 0), KeyID: "k"}
	unannounced, err := r.SigningBytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(unannounced, []byte(signingDomain)) {
		t.Error("a report without an announcement is no longer signed as the release before signed it")
	}
	r.Release, r.Level = "v0.3.0", skew.Level1
	if err := r.SignNode(priv); err != nil {
		t.Fatal(err)
	}
	if !r.VerifySig(pub) {
		t.Fatal("an announced report does not verify")
	}
	for _, change := range []func(*Report){
		func(r *Report) { r.Level = 2 },
		func(r *Report) { r.Release = "v9.9.9" },
		func(r *Report) { r.Level, r.Release = skew.Unannounced, "" },
	} {
		forged := r
		change(&forged)
		if forged.VerifySig(pub) {
			t.Errorf("a changed announcement %q/%v still verifies", forged.Release, forged.Level)
		}
	}
}
