package main

//lint:file-ignore SA1019 core/v1 Endpoints is deprecated, but the endpoints controller still writes it and the repair loop caches it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/edgequorum/edgequorum/admission"
	"github.com/edgequorum/edgequorum/admission/webhookcerts"
)

// settleTimeout bounds the wait for the repair loop to lead and write the
// webhook's memory before the webhook is reported ready.
const settleTimeout = 2 * time.Minute

// runServer is the child: it builds the cluster, hands it to a fake API,
// starts the webhook over it with the repair loop on, waits for the caches
// to sync and the repair loop to settle, reports ready on stdout, and serves
// until its stdin closes; then it reports what the repair loop and the logs
// said.
func runServer(o options) error {
	if o.dir == "" {
		return errors.New("-serve needs -dir")
	}
	t := time.Now()
	c, err := buildCluster(o.nodes, o.pods, o.zoneSize)
	if err != nil {
		return fmt.Errorf("build the cluster: %w", err)
	}
	progress("built %d nodes, %d pods, %d EndpointSlices and as many Endpoints (%d objects) in %.1f s",
		len(c.nodes), len(c.pods), len(c.slices), c.objects(), time.Since(t).Seconds())
	t = time.Now()
	reviews, err := writeReviews(o.dir, c)
	if err != nil {
		return err
	}
	progress("wrote %d reviews (%.0f MiB, mean Node %.1f KB as JSON) in %.1f s",
		reviews.Distinct["node"]+reviews.Distinct["podstatus"]+reviews.Distinct["endpointslice"], mib(int64(reviews.Bytes)),
		float64(reviews.NodeBytes)/1000, time.Since(t).Seconds())
	t = time.Now()
	api, err := newFakeAPI(c)
	if err != nil {
		return err
	}
	progress("encoded them for the fake API in %.1f s: %.0f MiB, outside the Go heap", time.Since(t).Seconds(), mib(int64(len(api.mem))))
	c = nil

	// What the process holds now is the fake API's: its encoded objects,
	// the binary, the runtime. Return the building's garbage first, so
	// that it is not counted as the fake's, and measure the webhook's peak
	// from here on.
	debug.FreeOSMemory()
	heapBefore := liveHeap()
	fakeRSS, err := rssMiB(os.Getpid())
	if err != nil {
		return err
	}
	if err := resetPeakRSS(); err != nil {
		return err
	}
	// The Go heap holds little of the fake's (it lives in api.mem), so
	// the limit is the webhook's as deployed, not the fake's too.
	var goLimit int64
	if o.memLimit > 0 {
		goLimit = o.memLimit * memLimitPercent / 100
		debug.SetMemoryLimit(goLimit)
	}

	certs, err := webhookcerts.Generate(webhookcerts.Options{Service: "edgequorum-webhook", Namespace: "edgequorum-webhook",
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: time.Hour})
	if err != nil {
		return fmt.Errorf("generate the serving certificate: %w", err)
	}
	if err := certs.WriteFiles(o.dir, true); err != nil {
		return err
	}
	caFile := filepath.Join(o.dir, "ca.crt")
	if err := os.WriteFile(caFile, certs.CACert, 0o600); err != nil {
		return err
	}
	cfg := admission.DefaultConfig()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(o.dir, webhookcerts.CertFile), filepath.Join(o.dir, webhookcerts.KeyFile)
	// The repair loop is on, as deployed: its EndpointSlice and Endpoints
	// caches, its rescans, the zone view and the memory it writes are
	// part of what the webhook costs. This replica is the only one, so it
	// leads.
	cfg.Repair = true
	cfg.Identity = "webhookload"
	cfg.ShutdownDelay = 0 // nothing routes reviews here after the run
	cfg.MaxZoneLeaseDuration = time.Hour
	// The webhook logs every change it makes at Info, in JSON as deployed
	// (--log-format=json); the encoding is part of its cost, the disk is
	// not. Warnings and errors are counted: the cluster is quiet, and the
	// repair loop should have nothing to say.
	logs := &problemLog{Handler: slog.NewJSONHandler(io.Discard, nil), problems: &problems{}}
	cfg.Logger = slog.New(logs)
	// client-go's own logs (leader election, informers, Events) go the
	// same way, as in `edgequorum webhook`.
	klog.SetSlogLogger(cfg.Logger.With("component", "client-go"))
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	if cfg.Listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	w, err := admission.New(cfg, api.Clientset)
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	for !w.Ready() {
		select {
		case err := <-errc:
			return fmt.Errorf("webhook stopped before its caches synced: %w", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	synced := time.Since(start)
	progress("caches synced in %.1f s", synced.Seconds())
	zones := o.nodes / o.zoneSize
	settled, err := settle(reg, zones, errc)
	if err != nil {
		return err
	}
	cacheHeap := liveHeap() - heapBefore
	if profile := o.profile; profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpus, err := allowedCPUs()
	if err != nil {
		return err
	}
	if err := printLine(ready{Addr: cfg.Listener.Addr().String(), CAFile: caFile, SyncSeconds: synced.Seconds(), SettleSeconds: settled.Seconds(),
		FakeAPIRSSMiB: fakeRSS, FakeStoreMiB: mib(int64(len(api.mem))), CacheHeapMiB: mib(cacheHeap), GoMemLimitMiB: mib(goLimit),
		NodeBytes: reviews.NodeBytes, Distinct: reviews.Distinct, EndpointSlices: len(api.lists[listKey{"endpointslices", "default"}]),
		CPUs: cpus, GOMAXPROCS: goruntime.GOMAXPROCS(0)}); err != nil {
		return err
	}
	// Serve until the driver, our parent, closes our stdin or exits.
	_, _ = io.Copy(io.Discard, os.Stdin)
	d := done{LiveHeapMiB: mib(liveHeap() - heapBefore), RepairLeader: metricSum(reg, "edgequorum_admission_repair_leader") == 1}
	cancel()
	err = <-errc
	d.Writes = writesOf(api.Actions())
	d.Counters = counters(reg)
	d.Warnings, d.Errors, d.Problems = logs.problems.summary()
	if perr := printLine(d); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

// memLimitPercent is the share of the container's memory limit given to the
// Go runtime as its soft limit: the agent's --memory-limit=auto rule (the
// rest is for the binary's mapped text, stacks and the runtime's own).
const memLimitPercent = 90

// settle waits until the repair loop leads and has written the webhook's
// memory of every zone's verdicts, the burst of writes that follows the
// first sync, so that it does not land in the first kind's measurement.
func settle(g prometheus.Gatherer, zones int, errc <-chan error) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < settleTimeout {
		if metricSum(g, "edgequorum_admission_repair_leader") == 1 &&
			metricSum(g, "edgequorum_admission_memory_writes_total") >= float64(zones) {
			progress("repair loop leading, memory of %d zones written, in %.1f s", zones, time.Since(start).Seconds())
			return time.Since(start), nil
		}
		select {
		case err := <-errc:
			return 0, fmt.Errorf("webhook stopped before the repair loop settled: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	progress("the repair loop did not lead and write its memory within %s; measuring anyway", settleTimeout)
	return time.Since(start), nil
}

// ready is the child's first line on stdout.
type ready struct {
	Addr          string  `json:"addr"`
	CAFile        string  `json:"caFile"`
	SyncSeconds   float64 `json:"syncSeconds"`
	SettleSeconds float64 `json:"settleSeconds"`
	FakeAPIRSSMiB float64 `json:"fakeAPIRSSMiB"`
	// FakeStoreMiB is the fake API's encoded objects, outside the Go heap.
	FakeStoreMiB float64 `json:"fakeStoreMiB"`
	// CacheHeapMiB is the live heap the webhook added, after a GC: its
	// informer caches and what it keeps about them.
	CacheHeapMiB   float64        `json:"cacheHeapMiB"`
	GoMemLimitMiB  float64        `json:"goMemLimitMiB"`
	NodeBytes      int            `json:"nodeBytes"`
	Distinct       map[string]int `json:"distinct"`
	EndpointSlices int            `json:"endpointSlices"`
	CPUs           []int          `json:"cpus"`
	GOMAXPROCS     int            `json:"gomaxprocs"`
}

// done is the child's last line on stdout, once its stdin closed.
type done struct {
	// LiveHeapMiB is the webhook's live heap after the load, after a GC.
	LiveHeapMiB  float64 `json:"liveHeapMiB"`
	RepairLeader bool    `json:"repairLeader"`
	// Writes counts the writes the webhook made to the fake API, by verb
	// and resource.
	Writes map[string]int `json:"writes"`
	// Counters are the webhook's counters other than the reviews' own.
	Counters map[string]float64 `json:"counters"`
	Warnings int                `json:"warnings"`
	Errors   int                `json:"errors"`
	// Problems are the first warnings and errors logged.
	Problems []string `json:"problems,omitempty"`
}

func printLine(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Println(string(line))
	return err
}

// progress tells the operator how a long step went; stdout is the driver's.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "webhookload: "+format+"\n", a...)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// liveHeap is the heap in use by live objects after a full collection.
func liveHeap() int64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// resetPeakRSS sets this process's VmHWM back to its current RSS (Linux
// 4.0 and later), so that the peak read later is the webhook's, not that of
// building the objects.
func resetPeakRSS() error {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak RSS: %w", err)
	}
	return nil
}

// listKey names one list the fake API serves from its store.
type listKey struct{ resource, namespace string }

// fakeAPI is the apiserver the webhook talks to: a client-go fake clientset
// that keeps what the webhook writes (its election Lease, its memory
// ConfigMaps, Events: see event) and serves the cluster's large lists, which the
// webhook only reads, from a store of protobuf-encoded objects outside the
// Go heap. Each list decodes them anew, as the webhook's client decodes what
// a real apiserver sends: the webhook's caches then share no string with the
// fake's copy, so its heap is its own, and the fake's copy neither counts in
// the Go heap, which paces the collector and meets the memory limit, nor
// adds to every collection's marking.
type fakeAPI struct {
	*fake.Clientset
	// mem is the store, mapped anonymous memory; lists slice it.
	mem   []byte
	lists map[listKey][][]byte

	mu sync.Mutex
	// events are the Events written, by namespace/name.
	events map[string]runtime.Object
}

// marshaler is an object with a generated protobuf encoding.
type marshaler interface{ Marshal() ([]byte, error) }

func newFakeAPI(c *cluster) (*fakeAPI, error) {
	lists := map[listKey][][]byte{}
	size := 0
	add := func(resource, namespace string, obj marshaler) error {
		b, err := obj.Marshal()
		if err != nil {
			return fmt.Errorf("encode %s: %w", resource, err)
		}
		k := listKey{resource, namespace}
		lists[k] = append(lists[k], b)
		size += len(b)
		return nil
	}
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, add("nodes", "", n))
	}
	for _, p := range c.pods {
		errs = append(errs, add("pods", p.Namespace, p))
	}
	for _, l := range slices.Concat(c.nodeLeases, c.zoneLeases) {
		errs = append(errs, add("leases", l.Namespace, l))
	}
	for _, s := range c.slices {
		errs = append(errs, add("endpointslices", s.Namespace, s))
	}
	for _, e := range c.endpoints {
		errs = append(errs, add("endpoints", e.Namespace, e))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes for the fake API's objects: %w", size, err)
	}
	off := 0
	for _, items := range lists {
		for i, b := range items {
			items[i] = mem[off : off+len(b) : off+len(b)]
			off += copy(items[i], b)
		}
	}
	api := &fakeAPI{Clientset: fake.NewClientset(), mem: mem, lists: lists, events: map[string]runtime.Object{}}
	api.PrependReactor("list", "*", api.list)
	api.PrependReactor("*", "events", api.event)
	return api, nil
}

// event answers the creation of an Event, and a patch of one (its series
// growing), as an apiserver would, keeping the Event as created. The fake's
// tracker would manage its fields, building a REST mapper for every write:
// milliseconds of CPU per Event, which would be charged to the webhook.
func (a *fakeAPI) event(action k8stesting.Action) (bool, runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch act := action.(type) {
	case k8stesting.CreateAction:
		obj := act.GetObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return true, nil, err
		}
		a.events[m.GetNamespace()+"/"+m.GetName()] = obj
		return true, obj, nil
	case k8stesting.PatchAction:
		if obj, ok := a.events[act.GetNamespace()+"/"+act.GetName()]; ok {
			return true, obj, nil
		}
		return true, nil, apierrors.NewNotFound(act.GetResource().GroupResource(), act.GetName())
	}
	return false, nil, nil
}

// list answers a list of a stored resource: of one namespace, or of all the
// stored ones. Lists of anything else fall through to the fake's tracker.
// Nothing changes the stored objects, so their watches, the tracker's,
// stay silent.
func (a *fakeAPI) list(action k8stesting.Action) (bool, runtime.Object, error) {
	resource, ns := action.GetResource().Resource, action.GetNamespace()
	var keys []listKey
	for k := range a.lists {
		if k.resource == resource && (ns == "" || k.namespace == ns) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return false, nil, nil
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].namespace < keys[j].namespace })
	var enc [][]byte
	for _, k := range keys {
		enc = append(enc, a.lists[k]...)
	}
	obj, err := decodeList(resource, enc)
	if err != nil {
		return true, nil, fmt.Errorf("decode the stored %s: %w", resource, err)
	}
	return true, obj, nil
}

func decodeList(resource string, enc [][]byte) (runtime.Object, error) {
	meta := metav1.ListMeta{ResourceVersion: "1"}
	switch resource {
	case "nodes":
		items, err := decodeItems[corev1.Node](enc)
		return &corev1.NodeList{ListMeta: meta, Items: items}, err
	case "pods":
		items, err := decodeItems[corev1.Pod](enc)
		return &corev1.PodList{ListMeta: meta, Items: items}, err
	case "leases":
		items, err := decodeItems[coordinationv1.Lease](enc)
		return &coordinationv1.LeaseList{ListMeta: meta, Items: items}, err
	case "endpointslices":
		items, err := decodeItems[discoveryv1.EndpointSlice](enc)
		return &discoveryv1.EndpointSliceList{ListMeta: meta, Items: items}, err
	case "endpoints":
		items, err := decodeItems[corev1.Endpoints](enc)
		return &corev1.EndpointsList{ListMeta: meta, Items: items}, err
	}
	return nil, fmt.Errorf("no decoder for %s", resource)
}

// decodeItems decodes each of enc into a fresh object: generated protobuf
// decoding copies every string out of its input.
func decodeItems[T any, P interface {
	*T
	Unmarshal([]byte) error
}](enc [][]byte) ([]T, error) {
	items := make([]T, len(enc))
	for i, b := range enc {
		if err := P(&items[i]).Unmarshal(b); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// writesOf counts the writes among actions by verb and resource.
func writesOf(actions []k8stesting.Action) map[string]int {
	out := map[string]int{}
	for _, a := range actions {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete", "delete-collection":
			k := a.GetVerb() + " " + a.GetResource().Resource
			if sub := a.GetSubresource(); sub != "" {
				k += "/" + sub
			}
			out[k]++
		}
	}
	return out
}

// metricSum is the sum of every series of the metric name, 0 if none.
func metricSum(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// reviewCounters are the webhook's counters of the reviews themselves, which
// counters leaves out.
var reviewCounters = []string{"requests_total", "taints_stripped_total", "pods_kept_ready_total", "endpoints_rewritten_total"}

// counters are the webhook's non-zero counters, by series, but those of the
// reviews themselves: what the repair loop, the Decider's refusals and the
// Events did.
func counters(g prometheus.Gatherer) map[string]float64 {
	out := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "edgequorum_admission_")
		if !ok || slices.Contains(reviewCounters, name) {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil || m.GetCounter().GetValue() == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out[name+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue()
		}
	}
	return out
}

// problems counts the warnings and errors logged and keeps the first few.
type problems struct {
	mu       sync.Mutex
	warnings int
	errors   int
	first    []string
}

func (p *problems) summary() (int, int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.warnings, p.errors, slices.Clone(p.first)
}

// problemLog is a slog handler that counts the warnings and errors passing
// through it to the next one.
type problemLog struct {
	slog.Handler
	problems *problems
	// attrs are those the logger was given With, for the message kept.
	attrs string
}

func (h *problemLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		msg := r.Level.String() + " " + r.Message + h.attrs
		r.Attrs(func(a slog.Attr) bool {
			msg += " " + a.String()
			return true
		})
		p := h.problems
		p.mu.Lock()
		if r.Level >= slog.LevelError {
			p.errors++
		} else {
			p.warnings++
		}
		if len(p.first) < 5 {
			p.first = append(p.first, msg)
		}
		p.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h *problemLog) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := h.attrs
	for _, a := range as {
		attrs += " " + a.String()
	}
	return &problemLog{Handler: h.Handler.WithAttrs(as), problems: h.problems, attrs: attrs}
}

func (h *problemLog) WithGroup(name string) slog.Handler {
	return &problemLog{Handler: h.Handler.WithGroup(name), problems: h.problems, attrs: h.attrs}
}
