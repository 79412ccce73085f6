package agent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Annotations of the genesis Lease.
const (
	genesisClusterAnnotation   = "edgequorum.io/cluster-id"
	genesisFounderIDAnnotation = "edgequorum.io/founder-id"
)

// leaseGenesis implements raftzone.Genesis with a Lease whose Create the
// apiserver makes atomic: two Creates of one name cannot both succeed.
//
// Any agent token may create a Lease named edgequorum-genesis-<zone> under
// its own node (the lease policy cannot tell which zone a token speaks for),
// so a stolen box could claim the genesis of a zone it is not in and the zone
// would never form. A genesis Lease whose founder is no node of the zone
// (members says so) while no node of the zone holds the zone Lease (no cluster
// of this zone ever led) is therefore squatted: the first member that finds
// it takes it over, with an update that only succeeds on the version it read.
// A founder of the zone itself is never overruled: a stolen member of a zone
// can hold up its own zone's formation, as it can its quorum, never another's.
type leaseGenesis struct {
	client    kubeclient.Interface
	namespace string
	// members is the zone's member list; nil takes every founder as
	// genuine.
	members zoneport.MemberSource
}

func (g leaseGenesis) Claim(ctx context.Context, zoneName string, rec raftzone.GenesisRecord) (raftzone.GenesisRecord, bool, error) {
	leases := g.client.Leases(g.namespace)
	name := zone.GenesisLeaseName(zoneName)
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: g.namespace,
			Labels: map[string]string{zonek8s.ZoneLabel: zoneName},
			Annotations: map[string]string{
				genesisClusterAnnotation:   rec.ClusterID,
				genesisFounderIDAnnotation: rec.FounderID,
			},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(rec.Founder),
			AcquireTime:    ptr.To(metav1.NewMicroTime(rec.CreatedAt)),
		},
	}, metav1.CreateOptions{FieldManager: "edgequorum"})
	if err == nil {
		return fromLease(created), true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return raftzone.GenesisRecord{}, false, fmt.Errorf("%w: create %s/%s: %w", raftzone.ErrGenesisUnavailable, g.namespace, name, err)
	}
	got, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return raftzone.GenesisRecord{}, false, fmt.Errorf("%w: read %s/%s: %w", raftzone.ErrGenesisUnavailable, g.namespace, name, err)
	}
	if squatted, err := g.squatted(ctx, zoneName, got); err != nil || !squatted {
		return fromLease(got), false, err
	}
	// Take it over: the version read, our record.
	taken := got.DeepCopy()
	taken.Labels = map[string]string{zonek8s.ZoneLabel: zoneName}
	taken.Annotations = map[string]string{genesisClusterAnnotation: rec.ClusterID, genesisFounderIDAnnotation: rec.FounderID}
	taken.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(rec.Founder), AcquireTime: ptr.To(metav1.NewMicroTime(rec.CreatedAt))}
	updated, err := leases.Update(ctx, taken, metav1.UpdateOptions{FieldManager: "edgequorum"})
	if err != nil {
		// Another member took it first (a conflict), or the apiserver is
		// gone: whoever holds it now is read next time.
		return raftzone.GenesisRecord{}, false, fmt.Errorf("%w: take over the squatted %s/%s: %w", raftzone.ErrGenesisUnavailable, g.namespace, name, err)
	}
	return fromLease(updated), true, nil
}

// squatted reports whether genesis Lease l of zoneName names a founder that is
// no node of the zone while no node of the zone holds the zone Lease.
func (g leaseGenesis) squatted(ctx context.Context, zoneName string, l *coordinationv1.Lease) (bool, error) {
	if g.members == nil {
		return false, nil
	}
	cands, ok := g.members.Candidates()
	if !ok {
		return false, nil
	}
	inZone := func(node string) bool {
		for _, c := range cands {
			if c.Node == node {
				return true
			}
		}
		return false
	}
	if inZone(ptr.Deref(l.Spec.HolderIdentity, "")) {
		return false, nil
	}
	zl, err := g.client.Leases(g.namespace).Get(ctx, zone.LeaseName(zoneName), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("%w: read the zone Lease: %w", raftzone.ErrGenesisUnavailable, err)
	case inZone(ptr.Deref(zl.Spec.HolderIdentity, "")):
		return false, nil
	}
	return true, nil
}

func fromLease(l *coordinationv1.Lease) raftzone.GenesisRecord {
	rec := raftzone.GenesisRecord{
		ClusterID: l.Annotations[genesisClusterAnnotation],
		FounderID: l.Annotations[genesisFounderIDAnnotation],
		Founder:   ptr.Deref(l.Spec.HolderIdentity, ""),
	}
	if l.Spec.AcquireTime != nil {
		rec.CreatedAt = l.Spec.AcquireTime.Time
	} else {
		rec.CreatedAt = l.CreationTimestamp.Time
	}
	rec.CreatedAt = rec.CreatedAt.Truncate(time.Microsecond)
	return rec
}
