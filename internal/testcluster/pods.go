package testcluster

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
)

// runPods is the kubelet's pod worker for one session: it watches the pods bound
// to this node and converges each to "running and ready", or finishes its
// deletion once it is marked for deletion. Like sample-controller it acts on
// keys, never on event payloads, and retries through the rate-limited queue.
func (k *Kubelet) runPods(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			// The Node authorizer only lets a kubelet list its own pods.
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.opts.Name).String()
		}))
	podInformer := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err == nil {
			queue.Add(key)
		}
	}
	if _, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		k.log.Error("watching pods", "err", err)
		return
	}
	lister := podInformer.Lister()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	stop := context.AfterFunc(ctx, queue.ShutDown)
	defer stop()
	defer queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return
	}
	for k.processNextPod(ctx, queue, lister) {
	}
}

func (k *Kubelet) processNextPod(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], lister corelisters.PodLister) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	err := k.syncPod(ctx, lister, key)
	switch {
	case err == nil:
		queue.Forget(key)
	case ctx.Err() != nil:
		// The session ended; the next one relists every pod anyway.
	default:
		k.log.Warn("syncing pod", "pod", key, "err", err)
		queue.AddRateLimited(key)
	}
	return true
}

// syncPod is level-triggered: it reads the pod from the cache and does whatever
// brings the API in line with a kubelet that runs it.
func (k *Kubelet) syncPod(ctx context.Context, lister corelisters.PodLister, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made; retrying cannot help
	}
	pod, err := lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.releasePodIP(key)
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		// The containers are imaginary and stop at once, so the kubelet's last
		// step follows immediately: the final delete with grace 0. The UID
		// precondition keeps it off a new pod that reused the name.
		err := k.client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("finishing deletion: %w", err)
		}
		return nil
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	ip, err := k.podIP(key, pod)
	if err != nil {
		return err
	}
	status := k.runningStatus(pod, ip)
	if equality.Semantic.DeepEqual(pod.Status, *status) {
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = *status
	if _, err := k.client.CoreV1().Pods(ns).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}

// runningStatus is pod's status as a kubelet reports a pod whose containers all
// started and passed their readiness probes. Fields that already say so keep
// their timestamps, so a second sync computes an identical status and writes
// nothing.
func (k *Kubelet) runningStatus(pod *corev1.Pod, ip netip.Addr) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	now := metav1.Now()
	st.Phase = corev1.PodRunning
	st.HostIP = k.ip.String()
	st.HostIPs = []corev1.HostIP{{IP: k.ip.String()}}
	st.PodIP = ip.String()
	st.PodIPs = []corev1.PodIP{{IP: ip.String()}}
	if st.StartTime == nil {
		st.StartTime = &now
	}

	st.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, st.InitContainerStatuses, pod.UID, now, true)
	st.ContainerStatuses = containerStatuses(pod.Spec.Containers, st.ContainerStatuses, pod.UID, now, false)

	ready := corev1.ConditionTrue
	for _, gate := range pod.Spec.ReadinessGates {
		if !conditionTrue(st.Conditions, gate.ConditionType) {
			ready = corev1.ConditionFalse
		}
	}
	for _, c := range []struct {
		t corev1.PodConditionType
		s corev1.ConditionStatus
	}{
		{corev1.PodReadyToStartContainers, corev1.ConditionTrue},
		{corev1.PodInitialized, corev1.ConditionTrue},
		{corev1.ContainersReady, corev1.ConditionTrue},
		{corev1.PodReady, ready},
		{corev1.PodScheduled, corev1.ConditionTrue},
	} {
		st.Conditions = setPodCondition(st.Conditions, c.t, c.s, now)
	}
	return st
}

// containerStatuses reports every container of specs as running and ready (or,
// for init containers, completed), keeping an existing status that already says
// so.
func containerStatuses(specs []corev1.Container, old []corev1.ContainerStatus, uid any, now metav1.Time, init bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return old
	}
	byName := map[string]corev1.ContainerStatus{}
	for _, cs := range old {
		byName[cs.Name] = cs
	}
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for _, c := range specs {
		if cs, ok := byName[c.Name]; ok && healthyContainer(cs, init) {
			out = append(out, cs)
			continue
		}
		cs := corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     "fake://" + c.Image,
			ContainerID: fmt.Sprintf("fake://%v/%s", uid, c.Name),
			Started:     ptr.To(!init),
			Ready:       !init,
		}
		if init {
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
		} else {
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		}
		out = append(out, cs)
	}
	return out
}

func healthyContainer(cs corev1.ContainerStatus, init bool) bool {
	if init {
		return cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
	}
	return cs.Ready && cs.State.Running != nil
}

func conditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setPodCondition sets condition t to s, moving LastTransitionTime only when the
// status changes.
func setPodCondition(conds []corev1.PodCondition, t corev1.PodConditionType, s corev1.ConditionStatus, now metav1.Time) []corev1.PodCondition {
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != s {
			conds[i] = corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
		}
		return conds
	}
	return append(conds, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now})
}

// podIP returns the address of the pod with key, handing out the lowest free
// host of the node's pod range on first sight. A pod whose status already shows
// an address from this range keeps it, as after a kubelet restart.
func (k *Kubelet) podIP(key string, pod *corev1.Pod) (netip.Addr, error) {
	k.podMu.Lock()
	defer k.podMu.Unlock()
	if ip, ok := k.podIPs[key]; ok {
		return ip, nil
	}
	used := map[netip.Addr]bool{}
	for _, ip := range k.podIPs {
		used[ip] = true
	}
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err == nil && k.podCIDR.Contains(ip) && !used[ip] {
		k.podIPs[key] = ip
		return ip, nil
	}
	// .1 is left for the imaginary bridge, like a CNI's gateway.
	for ip := k.podCIDR.Addr().Next().Next(); k.podCIDR.Contains(ip); ip = ip.Next() {
		if !used[ip] && ip != lastAddr(k.podCIDR) {
			k.podIPs[key] = ip
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod range %v of node %q is full", k.podCIDR, k.opts.Name)
}

func (k *Kubelet) releasePodIP(key string) {
	k.podMu.Lock()
	defer k.podMu.Unlock()
	delete(k.podIPs, key)
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	return u32Addr(v)
}
