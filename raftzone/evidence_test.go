package raftzone

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zoneport"
)

// TestEvidenceForAMemberCutFromTheCloud: once a member's reports say it does
// not reach the apiserver, the leader wants evidence for it, and every member
// that reaches it signs, with its own node key, that it does; once the zone
// judges a dead member unhealthy, the leader wants evidence for it too, and
// every running member signs that it finds it down.
func TestEvidenceForAMemberCutFromTheCloud(t *testing.T) {
	z := newTestZone(t, 4)
	z.startAll()
	leader := z.waitConverged(60*time.Second, 4)
	var cut, dead *testNode
	for _, n := range z.running() {
		switch {
		case n == leader:
		case cut == nil:
			cut = n
		case dead == nil:
			dead = n
		}
	}
	if got := leader.srv.WantEvidence(); len(got) != 0 {
		t.Fatalf("evidence wanted for %v in a zone that all reaches the cloud", got)
	}
	cut.api.down.Store(true)
	poll.Until(t, 30*time.Second, "evidence wanted for "+cut.name, func() (bool, string) {
		got := leader.srv.WantEvidence()
		return slices.Equal(got, []string{cut.name}), fmt.Sprint(got)
	})
	z.stop(dead.name)
	z.setDead(dead.name, true)
	poll.Until(t, 30*time.Second, "evidence wanted for "+dead.name+", judged unhealthy", func() (bool, string) {
		got := leader.srv.WantEvidence()
		return slices.Equal(got, []string{cut.name, dead.name}) || slices.Equal(got, []string{dead.name, cut.name}),
			fmt.Sprint(got)
	})

	atts := leader.srv.GatherEvidence(context.Background(), []string{cut.name, dead.name})
	signers := map[string]bool{}
	for _, a := range atts {
		signers[a.Signer] = true
		key, err := zoneport.LoadOrCreateNodeKey(z.nodes[a.Signer].dir)
		if err != nil {
			t.Fatal(err)
		}
		if a.Zone != testZoneName || !a.Verify(key.Public().(ed25519.PublicKey)) {
			t.Errorf("attestation of %s: zone %q, verifies %v; want %q, signed with its node key", a.Signer, a.Zone,
				a.Verify(key.Public().(ed25519.PublicKey)), testZoneName)
		}
		if a.Reaches(dead.name) || !a.FindsDown(dead.name) {
			t.Errorf("%s attests reach %v, down %v; want %s down, as it is", a.Signer, a.Reach, a.Down, dead.name)
		}
		if a.FindsDown(cut.name) {
			t.Errorf("%s attests %s down, which is alive", a.Signer, cut.name)
		}
		if a.Signer == cut.name && a.Reaches(cut.name) {
			t.Errorf("%s attests for itself", cut.name)
		}
		if a.Signer != cut.name && !a.Reaches(cut.name) {
			t.Errorf("%s does not attest it reaches %s, which is alive", a.Signer, cut.name)
		}
	}
	for _, n := range z.running() {
		if !signers[n.name] {
			t.Errorf("no attestation from %s, which runs", n.name)
		}
	}
	if signers[dead.name] {
		t.Errorf("an attestation from %s, which is stopped", dead.name)
	}
}
