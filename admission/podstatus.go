package admission

import (
	"fmt"
	"slices"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// NodeLifecycleUsers are the identities the node lifecycle controller writes
// pod status under: its own ServiceAccount when the controller manager runs
// with --use-service-account-credentials (kubeadm and most distributions),
// else the controller manager's. Only their writes may be changed on the
// pods/status route: a pod a kubelet reports not ready is not ready.
var NodeLifecycleUsers = []string{
	"system:serviceaccount:kube-system:node-controller",
	"system:kube-controller-manager",
}

// podStatus keeps pod Ready when the node lifecycle controller marks it not
// ready (old is the pod as stored) because it lost sight of the node, and the
// node's zone vouches for the node: the pod runs, only the cloud cannot see
// it. It restores the Ready condition old had and returns 1 with the node (for
// the Event), or returns 0 and leaves pod alone. Nothing but the Ready condition is touched, and only a
// change of that condition from True to False: that is all the controller's
// MarkPodsNotReady writes.
//
// "Lost sight" is read from the kubelet's Lease, not from the node's Ready
// condition: the controller marks the pods right after it writes the node
// Unknown, and the webhook's node cache may not hold that write yet. A kubelet
// that missed a renewal by the webhook's clock is silent; one that renews and
// reports its node NotReady (Ready False) is heard, and its pods are not kept.
func (m *mutator) podStatus(pod, old *corev1.Pod) (int, Decision, *corev1.Node, error) {
	was, now := podReadyCondition(old.Status.Conditions), podReadyCondition(pod.Status.Conditions)
	if was == nil || now == nil || was.Status != corev1.ConditionTrue || now.Status != corev1.ConditionFalse {
		return 0, Decision{}, nil, nil
	}
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName == "" || pod.Spec.NodeName != old.Spec.NodeName {
		return 0, Decision{}, nil, nil
	}
	dec, node, err := m.decider.DecideNode(pod.Spec.NodeName)
	if err != nil || !dec.Vouched {
		return 0, dec, nil, err
	}
	if c := readyCondition(node.Status.Conditions); c == nil || c.Status == corev1.ConditionFalse {
		return 0, dec, nil, nil
	}
	if silent, err := m.decider.kubeletSilent(node.Name); err != nil || !silent {
		return 0, dec, nil, err
	}
	*now = *was
	return 1, dec, node, nil
}

func mutatePodStatus(m *mutator, req *admissionv1.AdmissionRequest) (mutation, error) {
	var pod, old corev1.Pod
	if err := decodeObject(req.Object.Raw, &pod); err != nil {
		return mutation{}, err
	}
	if !slices.Contains(NodeLifecycleUsers, req.UserInfo.Username) {
		return mutation{attrs: []any{"user", req.UserInfo.Username}}, nil
	}
	if err := decodeObject(req.OldObject.Raw, &old); err != nil {
		return mutation{}, fmt.Errorf("old object: %w", err)
	}
	kept, dec, node, err := m.podStatus(&pod, &old)
	if err != nil {
		return mutation{}, fmt.Errorf("%w: %w", errCache, err)
	}
	mut := mutation{changed: kept, attrs: []any{"namespace", pod.Namespace, "pod", pod.Name, "node", pod.Spec.NodeName, "zone", dec.Zone, "because", dec.because()}}
	if kept == 0 {
		return mut, nil
	}
	mut.events = []nodeEvent{{node: node.Name, uid: node.UID, reason: EventPodsKeptReady,
		note: fmt.Sprintf("kept the pods on this node Ready: zone %s vouches for it (%s)", dec.Zone, dec.because())}}
	// The Ready condition, replaced where the request has it.
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	mut.ops = []jsonpatch.Operation{jsonpatch.NewOperation("replace", fmt.Sprintf("/status/conditions/%d", i), pod.Status.Conditions[i])}
	return mut, nil
}
