package suite

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/edgequorum/edgequorum/benchmarks/baseline"
	"github.com/edgequorum/edgequorum/zone"
)

// transition is an annotation state change as the suite saw it arrive. The
// watch is open before anything is killed, so At is when the write reached the
// apiserver plus a loopback watch delivery — milliseconds.
type transition struct {
	Node     string
	From, To zone.State
	At       time.Time
}

// stateOf reads one system's verdict from a Node; "" when there is none.
type stateOf func(*corev1.Node) zone.State

// oursState reads edgequorum's annotation.
func oursState(n *corev1.Node) zone.State {
	raw, ok := n.Annotations[zone.AnnotationKey]
	if !ok {
		return ""
	}
	a, err := zone.ParseAnnotation(raw)
	if err != nil {
		return ""
	}
	return a.State
}

// baselineState maps SuperEdge's "true"/"false" onto the same states.
func baselineState(n *corev1.Node) zone.State {
	switch n.Annotations[baseline.AnnotationKey] {
	case baseline.Healthy:
		return zone.Healthy
	case baseline.Unhealthy:
		return zone.Unhealthy
	}
	return ""
}

// watcher keeps every zone node's current state and the log of changes.
type watcher struct {
	read stateOf

	mu      sync.Mutex
	current map[string]zone.State
	log     []transition
	changed chan struct{} // closed and replaced on every change
	cancel  context.CancelFunc
	done    chan struct{}
}

// watchZone starts an informer on the zone's Nodes and returns once it has
// synced.
func watchZone(ctx context.Context, client kubernetes.Interface, zoneName string, read stateOf) (*watcher, error) {
	w := &watcher{read: read, current: map[string]zone.State{}, changed: make(chan struct{}), done: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labels.Set{zone.DefaultZoneLabel: zoneName}.String()
	}))
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(obj, false) },
		UpdateFunc: func(_, obj any) { w.observe(obj, true) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				w.mu.Lock()
				delete(w.current, n.Name)
				w.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watch zone %s: %w", zoneName, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { defer close(w.done); inf.Run(wctx.Done()) }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.stop()
		return nil, fmt.Errorf("watch zone %s: cache did not sync: %w", zoneName, ctx.Err())
	}
	return w, nil
}

func (w *watcher) observe(obj any, logged bool) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	st := w.read(n)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, known := w.current[n.Name]
	w.current[n.Name] = st
	if known && prev == st {
		return
	}
	if logged && known {
		w.log = append(w.log, transition{Node: n.Name, From: prev, To: st, At: now})
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// waitFor blocks until cond (called under the lock) holds or timeout passes.
func (w *watcher) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, ch := cond(), w.changed
		w.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitAll waits until every named node shows state.
func (w *watcher) waitAll(ctx context.Context, timeout time.Duration, nodes []string, state zone.State) error {
	return w.waitFor(ctx, timeout, fmt.Sprintf("%d nodes %s", len(nodes), state), func() bool {
		for _, n := range nodes {
			if w.current[n] != state {
				return false
			}
		}
		return true
	})
}

// waitTransition returns when node first entered state at or after since.
func (w *watcher) waitTransition(ctx context.Context, timeout time.Duration, node string, state zone.State, since time.Time) (time.Time, error) {
	var at time.Time
	err := w.waitFor(ctx, timeout, fmt.Sprintf("%s %s", node, state), func() bool {
		for _, t := range w.log {
			if t.Node == node && t.To == state && !t.At.Before(since) {
				at = t.At
				return true
			}
		}
		return false
	})
	return at, err
}

// transitions returns the changes seen in [from, to].
func (w *watcher) transitions(from, to time.Time) []transition {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []transition
	for _, t := range w.log {
		if !t.At.Before(from) && !t.At.After(to) {
			out = append(out, t)
		}
	}
	return out
}

// notHealthy lists the nodes that do not currently show healthy.
func (w *watcher) notHealthy(nodes []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range nodes {
		if w.current[n] != zone.Healthy {
			out = append(out, n)
		}
	}
	return out
}
