package zonerun

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/skew"
	"github.com/edgequorum/edgequorum/zone"
)

// AnnouncedReplica is the webhook replica AnnounceWebhookReads enters in the
// reads Lease.
const AnnouncedReplica = "zonerun-announced"

// AnnounceWebhookReads makes the cluster look, to zone leaders, as if a
// webhook replica of this build serves it, without running one: it installs
// deploy/webhook's namespace and RBAC (the agents' right to read the reads
// Lease among them) and writes zone.WebhookReadsLease with one entry that
// reads level. A leader writes formats above skew.Oldest (quiet zone Lease
// renewals, for one) only while every webhook replica reads them, so a
// cluster without that Lease makes every leader renew as for a webhook of
// the oldest release: a benchmark that measures what a zone costs in a
// shipped cloud announces the webhook this way, at skew.Current(). Nothing
// renews the entry, and nothing needs to: leaders never judge its age.
func AnnounceWebhookReads(ctx context.Context, c *testcluster.Cluster, level skew.Level) error {
	if _, err := installWebhookRBAC(ctx, c, WebhookInstall); err != nil {
		return err
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: zone.WebhookReadsLease, Namespace: webhookNamespace,
		Annotations: map[string]string{}}}
	if err := zone.SetWebhookReads(l.Annotations, map[string]zone.WebhookReplica{
		AnnouncedReplica: {Level: level, Release: buildinfo.Version(), At: time.Now().UTC().Truncate(time.Second)},
	}); err != nil {
		return fmt.Errorf("zonerun: webhook reads: %w", err)
	}
	leases := c.Client().CoordinationV1().Leases(webhookNamespace)
	cur, err := leases.Get(ctx, l.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	case err == nil:
		cur.Annotations = l.Annotations
		_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("zonerun: write lease %s/%s: %w", webhookNamespace, zone.WebhookReadsLease, err)
	}
	return nil
}
