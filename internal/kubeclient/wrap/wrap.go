// Package wrap adapts a full client-go clientset to kubeclient.Interface, for
// code that already holds one: unit tests on the fake clientset and the
// benchmarks' stand-in agents. It converts between client-go's core/v1 and
// events/v1 types and the agent's own, which have the same JSON.
// It links k8s.io/client-go/kubernetes, so the agent's binary must not
// import it.
package wrap

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zone/zonek8s/corecond"
)

// Clientset returns cs seen through the agent's narrow interface.
func Clientset(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) Nodes() kubeclient.NodeInterface { return nodes(c) }

func (c clientset) Leases(ns string) kubeclient.LeaseInterface {
	return c.cs.CoordinationV1().Leases(ns)
}

func (c clientset) Events(ns string) kubeclient.EventInterface { return events{c.cs, ns} }

func (c clientset) SelfSubjectReviews() kubeclient.SelfSubjectReviewInterface {
	return c.cs.AuthenticationV1().SelfSubjectReviews()
}

// IsWatchListSemanticsUnSupported passes on what the clientset says, so that
// an informer on a fake clientset lists instead of streaming (see
// k8s.io/client-go/util/watchlist).
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}

// Node is n in the agent's type, sharing nothing with it; nil for nil.
// Field by field, not through JSON: the benchmarks' stand-ins convert every
// Node event of a large zone for each of a hundred agents in one process.
func Node(n *corev1.Node) *kubeclient.Node {
	if n == nil {
		return nil
	}
	out := &kubeclient.Node{TypeMeta: n.TypeMeta}
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if n.Status.Conditions != nil {
		out.Status.Conditions = make([]zonek8s.NodeCondition, len(n.Status.Conditions))
		for i, c := range n.Status.Conditions {
			out.Status.Conditions[i] = corecond.FromCore(c)
		}
	}
	if n.Status.Addresses != nil {
		out.Status.Addresses = make([]kubeclient.NodeAddress, len(n.Status.Addresses))
		for i, a := range n.Status.Addresses {
			out.Status.Addresses[i] = kubeclient.NodeAddress{Type: string(a.Type), Address: a.Address}
		}
	}
	out.Status.DaemonEndpoints.KubeletEndpoint.Port = n.Status.DaemonEndpoints.KubeletEndpoint.Port
	return out
}

// convert copies in into out through their JSON, which is the same.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

type nodes struct{ cs kubernetes.Interface }

func (n nodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*kubeclient.Node, error) {
	got, err := n.cs.CoreV1().Nodes().Get(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	return Node(got), nil
}

func (n nodes) List(ctx context.Context, opts metav1.ListOptions) (*kubeclient.NodeList, error) {
	got, err := n.cs.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := &kubeclient.NodeList{TypeMeta: got.TypeMeta}
	got.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]kubeclient.Node, len(got.Items))
	for i := range got.Items {
		out.Items[i] = *Node(&got.Items[i])
	}
	return out, nil
}

func (n nodes) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := n.cs.CoreV1().Nodes().Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if node, ok := e.Object.(*corev1.Node); ok {
			e.Object = Node(node)
		}
		return e, true
	}), nil
}

func (n nodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*kubeclient.Node, error) {
	got, err := n.cs.CoreV1().Nodes().Patch(ctx, name, pt, data, opts, subresources...)
	if err != nil {
		return nil, err
	}
	return Node(got), nil
}

type events struct {
	cs kubernetes.Interface
	ns string
}

func (e events) Create(ctx context.Context, ev *kubeclient.Event, opts metav1.CreateOptions) (*kubeclient.Event, error) {
	in := &eventsv1.Event{}
	if err := convert(ev, in); err != nil {
		return nil, fmt.Errorf("wrap: convert event %s: %w", ev.Name, err)
	}
	got, err := e.cs.EventsV1().Events(e.ns).Create(ctx, in, opts)
	if err != nil {
		return nil, err
	}
	out := &kubeclient.Event{}
	if err := convert(got, out); err != nil {
		return nil, fmt.Errorf("wrap: convert event %s: %w", got.Name, err)
	}
	return out, nil
}
