package raftzone

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/zoneport"
)

func peerNames(cs []zoneport.Candidate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Node+"@"+c.ProbeAddress)
	}
	return fmt.Sprint(out)
}

// TestPeersFollowTheCloudThenTheZone: while the cluster's member list is
// available Peers is that list (a node the zone has not admitted yet
// included), and a member restarted while the cloud is away knows its peers
// from the replicated member list the moment it has started, so it probes and
// rejoins them at once.
func TestPeersFollowTheCloudThenTheZone(t *testing.T) {
	z := newTestZone(t, 3)
	all := z.candidates()
	before, err := New(testConfig(z.nodes["node-1"]), Deps{Members: z.list, Genesis: z.genesis})
	if err != nil {
		t.Fatal(err)
	}
	z.list.set(nil, false)
	if got := before.Peers(); len(got) != 0 {
		t.Fatalf("Peers before Run with no member list = %s, want none", peerNames(got))
	}
	z.list.set(all, true)

	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	var follower *testNode
	for _, n := range z.running() {
		if n != l {
			follower = n
			break
		}
	}
	others := func(self *testNode, extra ...zoneport.Candidate) string {
		var want []zoneport.Candidate
		for _, c := range append(all, extra...) {
			if c.Node != self.name {
				want = append(want, c)
			}
		}
		return peerNames(want)
	}
	if got, want := peerNames(follower.srv.Peers()), others(follower); got != want {
		t.Fatalf("Peers with the member list = %s, want %s", got, want)
	}

	newcomer := zoneport.Candidate{Node: "node-9", ProbeAddress: z.prefix + "9", RaftAddress: z.prefix + "9:9470"}
	z.list.set(append(all, newcomer), true)
	if got, want := peerNames(follower.srv.Peers()), others(follower, newcomer); got != want {
		t.Fatalf("Peers after a Node appeared = %s, want %s", got, want)
	}

	// The cloud goes away and the follower restarts.
	z.list.set(nil, false)
	z.stop(follower.name)
	follower = z.start(follower.name)
	if got, want := peerNames(follower.srv.Peers()), others(follower); got != want {
		t.Fatalf("Peers right after a restart during a cloud outage = %s, want the replicated list %s", got, want)
	}
}
