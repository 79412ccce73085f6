package kubeclient

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
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
	return inf, NodeLister{inf.GetIndexer()}
}

// NodeLister reads Nodes from an informer's cache, as client-go's listers
// do (whose core/v1 package links every core type).
type NodeLister struct{ indexer cache.Indexer }

// List returns the cached Nodes that selector selects. They are the cache's
// own: callers must not change them.
func (l NodeLister) List(selector labels.Selector) ([]*Node, error) {
	var out []*Node
	err := cache.ListAll(l.indexer, selector, func(obj any) {
		if n, ok := obj.(*Node); ok {
			out = append(out, n)
		}
	})
	return out, err
}

// Get returns the cached Node name, or a NotFound error.
func (l NodeLister) Get(name string) (*Node, error) {
	obj, ok, err := l.indexer.GetByKey(name)
	if err != nil {
		return nil, err
	}
	n, isNode := obj.(*Node)
	if !ok || !isNode {
		return nil, errors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
	}
	return n, nil
}
