package zonerun

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// TestAnnounceWebhookReadsOnRealAPIServer checks that what the benchmark
// writes to stand for a webhook is what a zone leader reads, with the
// agent's rights: the reads Lease parses, at the level announced, and a
// second announcement (a rerun on a kept cluster) rewrites it.
func TestAnnounceWebhookReadsOnRealAPIServer(t *testing.T) {
	c := testcluster.StartT(t, testcluster.Options{NoCloudNode: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := c.UserConfig(AgentUser, "system:serviceaccounts", "system:serviceaccounts:"+zone.DefaultLeaseNamespace, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	readLevel := func() skew.Level {
		t.Helper()
		l, err := agent.CoordinationV1().Leases(zone.DefaultWebhookNamespace).Get(ctx, zone.WebhookReadsLease, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the agent reads the webhook's reads Lease: %v", err)
		}
		rs, err := zone.ParseWebhookReads(l.Annotations)
		if err != nil {
			t.Fatalf("the reads Lease does not parse: %v", err)
		}
		if _, ok := rs[AnnouncedReplica]; !ok || len(rs) != 1 {
			t.Fatalf("entries %v, want %s's alone", rs, AnnouncedReplica)
		}
		return zone.WebhookLevel(rs)
	}
	for _, level := range []skew.Level{skew.Current(), skew.Oldest()} {
		if err := AnnounceWebhookReads(ctx, c, level); err != nil {
			t.Fatalf("announce %s: %v", level, err)
		}
		if got := readLevel(); got != level {
			t.Errorf("after announcing %s the agent reads level %s", level, got)
		}
	}
}
