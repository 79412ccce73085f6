package agent

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

// Annotations of the genesis Lease.
const (
	genesisClusterAnnotation   = "edgequorum.io/cluster-id"
	genesisFounderIDAnnotation = "edgequorum.io/founder-id"
)

// leaseGenesis implements raftzone.Genesis with a Lease whose Create the
// apiserver makes atomic: two Creates of one name cannot both succeed.
type leaseGenesis struct {
	client    kubernetes.Interface
	namespace string
}

func (g leaseGenesis) Claim(ctx context.Context, zoneName string, rec raftzone.GenesisRecord) (raftzone.GenesisRecord, bool, error) {
	leases := g.client.CoordinationV1().Leases(g.namespace)
	name := zone.GenesisLeaseName(zoneName)
	created, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: g.namespace,
			Labels: map[string]string{apiwriter.ZoneLabel: zoneName},
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
	return fromLease(got), false, nil
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
