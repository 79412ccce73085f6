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
// selects, resynced every resync, with h told of every Node it delivers (on
// the informer's own goroutine) after transform, and a lister over its cache:
// what client-go's informer factory builds for one resource, without linking
// the factory (which reaches every API group). It is client-go's plain
// informer, not a shared one: a process with one handler has no use for the
// shared informer's fan-out, which parks three more goroutines (its processor
// and a listener's two) whose stacks every garbage collection scans.
func NewNodeInformer(c Interface, labelSelector string, resync time.Duration, h cache.ResourceEventHandler, transform cache.TransformFunc) (cache.Controller, NodeLister) {
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
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		// c says whether it can stream the initial list (a fake cannot).
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, c),
		ObjectType:    &Node{},
		Handler:       h,
		ResyncPeriod:  resync,
		Indexers:      cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		Transform:     transform,
	})
	return ctrl, listers.New[*Node](store.(cache.Indexer), schema.GroupResource{Resource: "nodes"})
}

// NodeLister reads Nodes from an informer's cache: client-go's generic
// lister (its core/v1 listers link every core type). The Nodes it returns
// are the cache's own: callers must not change them.
type NodeLister = listers.ResourceIndexer[*Node]
