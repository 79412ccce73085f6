package agent

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

// fixedMembers is a member list that is always available.
type fixedMembers []string

func (m fixedMembers) Candidates() ([]zoneport.Candidate, bool) {
	out := make([]zoneport.Candidate, 0, len(m))
	for _, n := range m {
		out = append(out, zoneport.Candidate{Node: n})
	}
	return out, true
}

// TestGenesisTakesOverASquattedClaim: a genesis Lease made by a token of
// another zone is taken over by the zone's first member, once: the zone's own
// founder, and any founder while a node of the zone holds the zone Lease, are
// obeyed.
func TestGenesisTakesOverASquattedClaim(t *testing.T) {
	ctx := context.Background()
	const ns, zoneName = "edgequorum-system", "edge-a"
	lease := func(name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{genesisClusterAnnotation: "c-" + holder, genesisFounderIDAnnotation: "id-" + holder}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
	}
	rec := raftzone.GenesisRecord{ClusterID: "mine", Founder: "edge-a-1", FounderID: "id-edge-a-1"}
	for _, tc := range []struct {
		name        string
		objects     []*coordinationv1.Lease
		wantCreated bool
		wantFounder string
	}{
		{"no claim", nil, true, "edge-a-1"},
		{"claimed by a node of another zone", []*coordinationv1.Lease{lease(zone.GenesisLeaseName(zoneName), "edge-b-1")}, true, "edge-a-1"},
		{"and the zone Lease too", []*coordinationv1.Lease{lease(zone.GenesisLeaseName(zoneName), "edge-b-1"), lease(zone.LeaseName(zoneName), "edge-b-1")}, true, "edge-a-1"},
		{"claimed by a node of the zone", []*coordinationv1.Lease{lease(zone.GenesisLeaseName(zoneName), "edge-a-2")}, false, "edge-a-2"},
		{"a founder that left while its cluster leads", []*coordinationv1.Lease{lease(zone.GenesisLeaseName(zoneName), "gone"), lease(zone.LeaseName(zoneName), "edge-a-2")}, false, "gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, l := range tc.objects {
				if _, err := client.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			g := leaseGenesis{client: wrap.Clientset(client), namespace: ns, members: fixedMembers{"edge-a-1", "edge-a-2"}}
			got, created, err := g.Claim(ctx, zoneName, rec)
			if err != nil {
				t.Fatal(err)
			}
			if created != tc.wantCreated || got.Founder != tc.wantFounder {
				t.Fatalf("Claim = %+v, created %v; want founder %s, created %v", got, created, tc.wantFounder, tc.wantCreated)
			}
			if created && got.ClusterID != "mine" {
				t.Fatalf("took over with cluster %q, want ours", got.ClusterID)
			}
		})
	}
}
