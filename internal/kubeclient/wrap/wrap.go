// Package wrap adapts a full client-go clientset to kubeclient.Interface, for
// code that already holds one: unit tests on the fake clientset and the
// benchmarks' stand-in agents. It links k8s.io/client-go/kubernetes, so the
// agent's binary must not import it.
package wrap

import (
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/watchlist"

	"github.com/edgequorum/edgequorum/internal/kubeclient"
)

// Clientset returns cs seen through the agent's narrow interface.
func Clientset(cs kubernetes.Interface) kubeclient.Interface { return clientset{cs} }

type clientset struct{ cs kubernetes.Interface }

func (c clientset) Nodes() kubeclient.NodeInterface { return c.cs.CoreV1().Nodes() }

func (c clientset) Leases(ns string) kubeclient.LeaseInterface {
	return c.cs.CoordinationV1().Leases(ns)
}

func (c clientset) Events(ns string) kubeclient.EventInterface { return c.cs.EventsV1().Events(ns) }

func (c clientset) SelfSubjectReviews() kubeclient.SelfSubjectReviewInterface {
	return c.cs.AuthenticationV1().SelfSubjectReviews()
}

// IsWatchListSemanticsUnSupported passes on what the clientset says, so that
// an informer on a fake clientset lists instead of streaming (see
// k8s.io/client-go/util/watchlist).
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.cs)
}
