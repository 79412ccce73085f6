package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// nodeLeaseDurationSeconds is the kubelet's default; KCM judges freshness by its
// own grace period, not by this field.
const nodeLeaseDurationSeconds = 40

// register creates the Node with a Ready status (or, when it survives from an
// earlier life, posts Ready to it) and renews the Lease, like a booting kubelet.
func (k *Kubelet) register(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, k.nodeObject(), metav1.CreateOptions{})
	switch {
	case err == nil:
		k.nodeUID = created.UID
	case apierrors.IsAlreadyExists(err):
		existing, err := nodes.Get(ctx, k.opts.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("getting existing node: %w", err)
		}
		k.nodeUID = existing.UID
		if err := k.postStatus(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("creating node: %w", err)
	}
	k.lease = nil // a previous life's Lease may belong to a deleted Node
	return k.renewLease(ctx)
}

// heartbeat is what a reconnecting kubelet sends first: its status and its Lease.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	if err := k.postStatus(ctx); err != nil {
		return err
	}
	return k.renewLease(ctx)
}

func (k *Kubelet) nodeObject() *corev1.Node {
	labels := map[string]string{
		corev1.LabelHostname:     k.opts.Name,
		corev1.LabelOSStable:     "linux",
		corev1.LabelArchStable:   runtime.GOARCH,
		corev1.LabelTopologyZone: k.opts.Zone,
	}
	for key, v := range k.opts.Labels {
		labels[key] = v
	}
	resources := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.opts.Name, Labels: labels},
		Spec: corev1.NodeSpec{
			PodCIDR:  k.podCIDR.String(),
			PodCIDRs: []string{k.podCIDR.String()},
		},
		Status: corev1.NodeStatus{
			Capacity:    resources,
			Allocatable: resources,
			Conditions:  k.conditions(time.Now()),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: k.ip.String()},
				{Type: corev1.NodeHostName, Address: k.opts.Name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: KubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               k.opts.Name,
				KernelVersion:           "fake",
				OSImage:                 "edgequorum fake kubelet",
				ContainerRuntimeVersion: "fake://1.0.0",
				KubeletVersion:          "v1.36.0",
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
			},
		},
	}
}

// conditions is the healthy node's condition set with a fresh heartbeat.
func (k *Kubelet) conditions(now time.Time) []corev1.NodeCondition {
	return HealthyConditions(now, k.readySince)
}

// HealthyConditions is the condition set a healthy kubelet reports, with its
// heartbeat at hb and every condition holding since since: what a fake or
// simulated kubelet posts.
func HealthyConditions(hb, since time.Time) []corev1.NodeCondition {
	beat, from := metav1.NewTime(hb), metav1.NewTime(since)
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: beat, LastTransitionTime: from}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
	}
}

// postStatus patches the conditions with a fresh heartbeat. Conditions merge by
// type, so the patch neither races with KCM's writes of other fields nor needs a
// resourceVersion.
func (k *Kubelet) postStatus(ctx context.Context) error {
	patch, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": k.conditions(time.Now())},
	})
	if err != nil {
		return fmt.Errorf("encoding node status: %w", err)
	}
	if _, err := k.client.CoreV1().Nodes().Patch(ctx, k.opts.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patching node status: %w", err)
	}
	return nil
}

// renewLease moves the node Lease's renewTime to now, creating the Lease (owned
// by the Node, so it goes with it) when it is missing. It updates its last copy
// and refetches only after a conflict, as the kubelet's lease controller does.
func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	if k.lease != nil {
		l := k.lease.DeepCopy()
		l.Spec.RenewTime = &now
		updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			k.lease = updated
			return nil
		}
		k.lease = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("renewing lease: %w", err)
		}
	}
	l, err := leases.Get(ctx, k.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		created, err := leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:      k.opts.Name,
				Namespace: corev1.NamespaceNodeLease,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: k.opts.Name, UID: k.nodeUID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(k.opts.Name),
				LeaseDurationSeconds: ptr.To[int32](nodeLeaseDurationSeconds),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating lease: %w", err)
		}
		k.lease = created
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting lease: %w", err)
	}
	l.Spec.RenewTime = &now
	l.Spec.HolderIdentity = ptr.To(k.opts.Name)
	updated, err := leases.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("renewing lease: %w", err)
	}
	k.lease = updated
	return nil
}
