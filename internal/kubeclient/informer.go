package kubeclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/listers"
	"k8s.io/client-go/tools/cache"
)

// NewNodeInformer returns an informer over the Nodes that labelSelector
// selects, resynced every resync, and a lister over its cache: what
// client-go's informer factory builds for one resource, without linking the
// factory (which reaches every API group).
func NewNodeInformer(c Interface, labelSelector string, resync time.Duration) (cache.SharedIndexInformer, NodeLister) {
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = labelSelector }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return c.Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return c.Nodes().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(
		// c says whether it can stream the initial list (a fake cannot).
		cache.ToListWatcherWithWatchListSemantics(lw, c),
		&Node{},
		cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		},
	)
	return inf, listers.New[*Node](inf.GetIndexer(), schema.GroupResource{Resource: "nodes"})
}

// NodeLister reads Nodes from an informer's cache: client-go's generic
// lister (its core/v1 listers link every core type). The Nodes it returns
// are the cache's own: callers must not change them.
type NodeLister = listers.ResourceIndexer[*Node]
