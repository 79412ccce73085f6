package admission

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/zone"
)

// MemoryLabel marks the ConfigMaps that keep, per zone, the last verdict the
// webhook honoured for each node (see memory).
const MemoryLabel = "edgequorum.io/webhook-memory"

// memoryFlushPeriod is how often the repair loop's leader writes the verdicts
// it honoured since its last write: a zone's verdict changes cost at most one
// write per zone and period.
const memoryFlushPeriod = time.Second

// maxMemoryBytes bounds one zone's ConfigMap below the apiserver's 1 MiB.
const maxMemoryBytes = 900 << 10

// memoryName is the ConfigMap that keeps zoneName's verdicts.
func memoryName(zoneName string) string { return "verdicts-" + zone.LeaseName(zoneName) }

// memory keeps the webhook's memory of honoured verdicts in the cloud, where
// only the webhook writes: one ConfigMap per zone in the webhook's own
// namespace (agent tokens have no rights there), node → the verdict
// annotation last honoured. Any agent token may write a Node's verdict
// annotation, so a replica that starts while a verdict is forged, and keeps
// nothing of its own, would otherwise judge the node by the forgery's
// refusal alone. A replica reads the memory before it judges any Node; the
// repair loop's leader writes it. What it reads is judged again like any kept
// verdict: it counts only while it still stands under the zone's Lease.
type memory struct {
	client    kubernetes.Interface
	namespace string
	lister    corelisters.ConfigMapNamespaceLister
	evidence  *evidence
	clock     clock.WithTicker
	log       *slog.Logger
	metrics   *metrics
	// written is, by zone, what this process last wrote or read there.
	written map[string]map[string]string
}

// seed hands every remembered verdict to the evidence as kept, unless it
// already keeps a newer one for that node. Called once the ConfigMap cache has
// synced, before the Decider judges every Node.
func (m *memory) seed() {
	cms, err := m.lister.List(labels.SelectorFromSet(labels.Set{MemoryLabel: "true"}))
	if err != nil {
		m.log.Warn("webhook memory not read", "err", err)
		return
	}
	n := 0
	for _, cm := range cms {
		z := cm.Labels[MemoryLabel+"-zone"]
		if z == "" || cm.Name != memoryName(z) {
			continue
		}
		m.written[z] = maps.Clone(cm.Data)
		for node, raw := range cm.Data {
			a, err := zone.ParseAnnotation(raw)
			if err != nil || a.Zone != z {
				continue
			}
			v := &keptVerdict{raw: raw, verdict: a}
			m.evidence.keep(node, v, m.evidence.keptVerdict(node))
			n++
		}
	}
	m.log.Info("webhook memory read", "zones", len(cms), "verdicts", n)
}

// run writes the memory every memoryFlushPeriod until ctx is done, and once
// more then. Only the repair loop's leader runs it.
func (m *memory) run(ctx context.Context) {
	t := m.clock.NewTicker(memoryFlushPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		m.flush(ctx)
	}
}

// flush writes every zone whose kept verdicts differ from what it last wrote.
func (m *memory) flush(ctx context.Context) {
	for z, data := range m.evidence.keptByZone() {
		if maps.Equal(data, m.written[z]) {
			continue
		}
		if err := m.write(ctx, z, data); err != nil {
			m.metrics.memoryWrites.WithLabelValues(repairError).Inc()
			m.log.Info("webhook memory not written; retried next period", "zone", z, "err", err)
			continue
		}
		m.metrics.memoryWrites.WithLabelValues(memoryWritten).Inc()
		m.written[z] = data
	}
}

// write stores data as zone z's memory.
func (m *memory) write(ctx context.Context, z string, data map[string]string) error {
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxMemoryBytes {
		// Keep what fits, by name: a node left out is judged from its
		// annotation alone after a restart, as before there was memory.
		names := make([]string, 0, len(data))
		for k := range data {
			names = append(names, k)
		}
		sort.Strings(names)
		fit, size := map[string]string{}, 0
		for _, k := range names {
			if size += len(k) + len(data[k]); size > maxMemoryBytes {
				break
			}
			fit[k] = data[k]
		}
		data = fit
	}
	cms := m.client.CoreV1().ConfigMaps(m.namespace)
	name := memoryName(z)
	cur, err := m.lister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: m.namespace,
				Labels: map[string]string{MemoryLabel: "true", MemoryLabel + "-zone": z}},
			Data: data,
		}, metav1.CreateOptions{FieldManager: "edgequorum-webhook"})
	case err != nil:
		return fmt.Errorf("read memory configmap %s/%s from cache: %w", m.namespace, name, err)
	default:
		next := cur.DeepCopy()
		next.Data = data
		_, err = cms.Update(ctx, next, metav1.UpdateOptions{FieldManager: "edgequorum-webhook"})
	}
	if err != nil {
		return fmt.Errorf("write memory configmap %s/%s: %w", m.namespace, name, err)
	}
	return nil
}

// memoryWritten is the result label of a memory write that succeeded.
const memoryWritten = "ok"
