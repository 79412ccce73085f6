package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/edgequorum/edgequorum/admission/webhookcerts"
)

// Webhook is the admission webhook process: informer caches, the HTTPS server
// and, when enabled, the repair loop.
type Webhook struct {
	cfg      Config
	client   kubernetes.Interface
	log      *slog.Logger
	metrics  *metrics
	decider  *Decider
	admitter *admitter
	certs    interface {
		GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	}
	handler http.Handler
	repair  *repairer
	memory  *memory
	events  *eventer
	// announcer tells zone leaders what this replica reads (announce.go).
	announcer *announcer

	factories []informers.SharedInformerFactory
	hasSynced []cache.InformerSynced
	synced    atomic.Bool
	draining  atomic.Bool
}

// New builds a Webhook from a valid cfg and a client. It reads the TLS pair once
// so a missing or broken pair fails here, before anything is served, but starts
// nothing: Run does.
func New(cfg Config, client kubernetes.Interface) (*Webhook, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	w := &Webhook{cfg: cfg, client: client, log: cfg.Logger, metrics: m}
	if cfg.TLSSecret == "" {
		if w.certs, err = webhookcerts.NewReloader(cfg.TLSCertFile, cfg.TLSKeyFile, cfg.Logger, m.tlsReloads, m.certExpiry); err != nil {
			return nil, err
		}
	}
	w.announcer = newAnnouncer(cfg, client.CoordinationV1().Leases(cfg.ElectionNamespace), m)

	all := informers.NewSharedInformerFactory(client, 0)
	nodeLeases := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(NodeLeaseNamespace))
	zoneLeases := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(cfg.LeaseNamespace))
	memories := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(cfg.ElectionNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = MemoryLabel + "=true" }))
	w.factories = []informers.SharedInformerFactory{all, nodeLeases, zoneLeases, memories}

	podInformer := all.Core().V1().Pods()
	// Every pod of the cluster is cached, but only to read its Ready
	// condition: keep just that.
	if err := podInformer.Informer().SetTransform(slimPods(cfg.ElectionNamespace)); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	// Every Node too, and a kubelet's Node is 10-20 KB, mostly its images
	// and resources, which the webhook never reads.
	if err := all.Core().V1().Nodes().Informer().SetTransform(slimNodes); err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	w.announcer.pods = podInformer.Lister().Pods(cfg.ElectionNamespace)
	caches := Caches{
		Nodes:      all.Core().V1().Nodes().Lister(),
		Pods:       podInformer.Lister(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Lister().Leases(NodeLeaseNamespace),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Lister().Leases(cfg.LeaseNamespace),
	}
	w.hasSynced = []cache.InformerSynced{
		all.Core().V1().Nodes().Informer().HasSynced,
		podInformer.Informer().HasSynced,
		nodeLeases.Coordination().V1().Leases().Informer().HasSynced,
		zoneLeases.Coordination().V1().Leases().Informer().HasSynced,
	}
	if w.decider, err = newDecider(cfg, caches, Informers{
		Nodes:      all.Core().V1().Nodes().Informer(),
		NodeLeases: nodeLeases.Coordination().V1().Leases().Informer(),
		ZoneLeases: zoneLeases.Coordination().V1().Leases().Informer(),
	}, m); err != nil {
		return nil, err
	}
	memInformer := memories.Core().V1().ConfigMaps()
	w.memory = &memory{client: client, namespace: cfg.ElectionNamespace, lister: memInformer.Lister().ConfigMaps(cfg.ElectionNamespace),
		evidence: w.decider.evidence, clock: cfg.Clock, log: cfg.Logger.With("component", "memory"), metrics: m,
		written: map[string]map[string]string{}}
	w.decider.remember(memInformer.Informer().HasSynced, w.memory.seed)
	w.hasSynced = append(w.hasSynced, w.decider.HasSynced)
	var certs *certKeeper
	if cfg.TLSSecret != "" {
		certs = w.serveFromSecret(cfg, m)
	}
	mut := &mutator{decider: w.decider, pods: caches.Pods, slack: cfg.PodReadySlack, agentUser: cfg.AgentUser}
	w.admitter = &admitter{
		mut: mut, metrics: m, log: cfg.Logger, clock: cfg.Clock,
		dryRun: cfg.DryRun, maxBytes: cfg.MaxRequestBytes, synced: w.synced.Load,
	}
	if !cfg.DryRun {
		w.events = newEventer(client, m)
		w.admitter.events = w.events
	}

	if cfg.Repair {
		// Only the repair loop needs these caches; the admission path gets
		// its EndpointSlices and Endpoints in the review.
		slices := all.Discovery().V1().EndpointSlices()
		eps := all.Core().V1().Endpoints()
		for _, inf := range []cache.SharedIndexInformer{slices.Informer(), eps.Informer()} {
			if err := inf.AddIndexers(cache.Indexers{notReadyNodeIndex: notReadyNodes}); err != nil {
				return nil, fmt.Errorf("index the repair caches by node: %w", err)
			}
		}
		if err := podInformer.Informer().AddIndexers(cache.Indexers{podNodeIndex: podNode}); err != nil {
			return nil, fmt.Errorf("index the pod cache by node: %w", err)
		}
		nodeInformer := all.Core().V1().Nodes().Informer()
		if err := nodeInformer.AddIndexers(cache.Indexers{zoneLeaseIndex: nodeZoneLease(cfg.ZoneLabel)}); err != nil {
			return nil, fmt.Errorf("index the node cache by zone Lease: %w", err)
		}
		log := cfg.Logger.With("component", "repair")
		podsByNode := podInformer.Informer().GetIndexer()
		w.repair = &repairer{
			resend: &resender{
				client: client, mut: mut,
				nodes: caches.Nodes, slices: slices.Lister(), endpoints: eps.Lister(),
				byNode: []cache.Indexer{slices.Informer().GetIndexer(), eps.Informer().GetIndexer()},
				dryRun: cfg.DryRun, log: log,
			},
			handback: &handback{
				client: client, decider: w.decider, pods: caches.Pods, podsByNode: podsByNode,
				clock: cfg.Clock, dryRun: cfg.DryRun, events: w.events, log: log,
			},
			failover: newFailover(cfg, client, w.decider, caches.Nodes, podsByNode, w.events, m),
			memory:   w.memory,

			informers:  []cache.SharedIndexInformer{nodeInformer, slices.Informer(), eps.Informer()},
			zoneLeases: zoneLeases.Coordination().V1().Leases().Informer(), byZoneLease: nodeInformer.GetIndexer(),
			podInformer: podInformer.Informer(),
			clock:       cfg.Clock, period: cfg.RepairPeriod, qps: cfg.RepairQPS, burst: cfg.RepairBurst,
			dryRun: cfg.DryRun, metrics: m, log: log,
		}
		view := &zoneViewer{
			decider: w.decider, nodes: caches.Nodes, events: w.events, clock: cfg.Clock,
			period: cfg.ZoneStatusPeriod, spread: cfg.ZoneStatusPeriod / 2, limiter: rate.NewLimiter(rate.Limit(cfg.ZoneStatusQPS), cfg.ZoneStatusBurst),
			dryRun: cfg.DryRun, metrics: m, log: cfg.Logger.With("component", "zones"),
		}
		if cfg.ZoneClient != nil {
			view.client = cfg.ZoneClient.Resource(EdgeZoneResource)
		}
		m.zones.add(view)
		w.repair.zones = view
		if cfg.ManageCerts {
			w.repair.certs = certs
		}
		w.hasSynced = append(w.hasSynced, slices.Informer().HasSynced, eps.Informer().HasSynced)
	}
	w.handler = w.routes()
	return w, nil
}

// serveFromSecret serves the pair of cfg.TLSSecret, read through a cache of
// that one Secret, and returns the keeper of the webhook's own certificates
// over the same cache (which only the repair loop's leader runs, and only with
// cfg.ManageCerts).
func (w *Webhook) serveFromSecret(cfg Config, m *metrics) *certKeeper {
	byName := func(name string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
	}
	secrets := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithNamespace(cfg.ElectionNamespace), byName(cfg.TLSSecret))
	lister := secrets.Core().V1().Secrets().Lister().Secrets(cfg.ElectionNamespace)
	w.factories = append(w.factories, secrets)
	w.hasSynced = append(w.hasSynced, secrets.Core().V1().Secrets().Informer().HasSynced)
	w.certs = webhookcerts.NewSecretPair(func() (map[string][]byte, bool) {
		s, err := lister.Get(cfg.TLSSecret)
		if err != nil {
			return nil, false
		}
		return s.Data, true
	}, cfg.Logger, m.tlsReloads, m.certExpiry)
	if !cfg.ManageCerts {
		return nil
	}
	configs := informers.NewSharedInformerFactoryWithOptions(w.client, 0, byName(cfg.WebhookConfiguration))
	w.factories = append(w.factories, configs)
	w.hasSynced = append(w.hasSynced, configs.Admissionregistration().V1().MutatingWebhookConfigurations().Informer().HasSynced)
	names := webhookcerts.Names{DNS: append(webhookcerts.ServiceNames(cfg.ServiceName, cfg.ElectionNamespace), cfg.TLSDNSNames...), IPs: cfg.TLSIPs}
	return &certKeeper{
		client: w.client, namespace: cfg.ElectionNamespace, secret: cfg.TLSSecret, config: cfg.WebhookConfiguration,
		secrets: lister, configs: configs.Admissionregistration().V1().MutatingWebhookConfigurations().Lister(),
		policy: webhookcerts.Policy{CAValidity: cfg.CAValidity, CertValidity: cfg.CertValidity, Names: names,
			Settle: min(certSettle, cfg.CertValidity/10)},
		clock: cfg.Clock, period: min(certCheckPeriod, cfg.CertValidity/20), metrics: m,
		log: cfg.Logger.With("component", "certs"),
	}
}

// certSettle is how long a new CA is trusted by the webhook configuration
// before it signs what the replicas serve: an apiserver picks up a
// configuration change from its watch within a second or two; every
// apiserver of an HA control plane has to.
const certSettle = 30 * time.Second

// certCheckPeriod is how often the keeper checks the certificates and the
// configuration's caBundle (a caBundle reset by `kubectl apply` is restored
// within it).
const certCheckPeriod = 10 * time.Second

// Decider is the webhook's vouching rule over its own caches.
func (w *Webhook) Decider() *Decider { return w.decider }

// Handler serves every route without TLS, for tests that wrap it in httptest.
// Answers are only meaningful once Run has synced the caches (see Ready).
func (w *Webhook) Handler() http.Handler { return w.handler }

// Ready reports whether the informer caches have synced and Run is not
// shutting down, as /readyz does.
func (w *Webhook) Ready() bool { return w.synced.Load() && !w.draining.Load() }

// routes are the server's endpoints. Review routes check the method themselves
// so a wrong one is counted, not just refused by the router.
func (w *Webhook) routes() http.Handler {
	r := mux.NewRouter()
	r.Handle("/mutate/node", w.admitter.serve(nodeReview))
	r.Handle("/mutate/endpointslice", w.admitter.serve(endpointSliceReview))
	r.Handle("/mutate/endpoints", w.admitter.serve(endpointsReview))
	r.Handle("/mutate/podstatus", w.admitter.serve(podStatusReview))
	r.Handle("/mutate/nodestatus", w.admitter.serve(nodeStatusReview))
	r.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = rw.Write([]byte("ok\n"))
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		switch {
		case w.draining.Load():
			http.Error(rw, "shutting down", http.StatusServiceUnavailable)
			return
		case !w.synced.Load():
			http.Error(rw, "informer caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	}).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/metrics", promhttp.HandlerFor(w.cfg.Gatherer, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	return r
}

// Run serves until ctx is done, then stops the server (letting in-flight
// reviews finish within ShutdownTimeout), the repair loop and the informers,
// and returns once all of them have. It returns early with an error if the
// server cannot listen or fails. A Webhook runs once.
func (w *Webhook) Run(ctx context.Context) error {
	ln := w.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", w.cfg.ListenAddress); err != nil {
			return fmt.Errorf("listen on --listen-address %s: %w", w.cfg.ListenAddress, err)
		}
	}
	srv := &http.Server{
		Handler: w.closingWhileDraining(w.handler),
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: w.certs.GetCertificate,
		},
		ReadHeaderTimeout: w.cfg.ReadTimeout,
		ReadTimeout:       w.cfg.ReadTimeout,
		WriteTimeout:      w.cfg.WriteTimeout,
		IdleTimeout:       w.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(w.log.Handler(), slog.LevelWarn),
	}

	// The caches and the server outlive stop by ShutdownDelay; the repair
	// loop does not, so that its leadership passes on at once.
	stop := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(stop))
	defer cancel()
	for _, f := range w.factories {
		f.Start(ctx.Done())
	}
	if w.events != nil {
		w.events.start(ctx.Done())
	}

	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Go(func() {
		err := srv.ServeTLS(ln, "", "")
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr <- fmt.Errorf("serve on %s: %w", ln.Addr(), err)
		}
	})
	w.log.Info("serving admission reviews", "address", ln.Addr().String(), "dryRun", w.cfg.DryRun, "repair", w.cfg.Repair)
	announceCtx, stopAnnouncing := context.WithCancel(ctx)
	defer stopAnnouncing()
	announced := make(chan struct{})
	go func() { defer close(announced); w.announcer.run(announceCtx) }()
	wg.Go(func() {
		if !cache.WaitForCacheSync(ctx.Done(), w.hasSynced...) {
			return
		}
		w.synced.Store(true)
		w.log.Info("informer caches synced; ready")
		if w.repair == nil {
			return
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: w.cfg.ElectionNamespace, Name: w.cfg.LeaderElectionID},
			Client:     w.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: w.cfg.Identity},
		}
		if err := w.repair.runElected(stop, lock, w.cfg); err != nil {
			w.log.Error("repair loop stopped", "err", err)
		}
	})

	var err error
	select {
	case <-stop.Done():
		err = w.drain(serveErr)
	case err = <-serveErr:
	}
	w.synced.Store(false)
	shutdownCtx, cancelShutdown := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.ShutdownTimeout)
	defer cancelShutdown()
	if serr := srv.Shutdown(shutdownCtx); serr != nil {
		w.log.Warn("server shutdown", "err", serr)
		_ = srv.Close()
	}
	// Answering no more reviews, this replica no longer holds the
	// formats zone leaders write down to what it reads.
	stopAnnouncing()
	<-announced
	withdrawCtx, cancelWithdraw := context.WithTimeout(context.WithoutCancel(stop), 5*time.Second)
	w.announcer.withdraw(withdrawCtx)
	cancelWithdraw()
	cancel()
	wg.Wait()
	if w.events != nil {
		w.events.shutdown()
	}
	for _, f := range w.factories {
		f.Shutdown()
	}
	w.log.Info("stopped")
	return err
}

// drain keeps answering reviews for ShutdownDelay after a stop, while the
// apiserver may still send reviews here, with /readyz failing. A connection
// is closed only right after a response that says so (closingWhileDraining),
// never while idle: the apiserver may pick an idle keep-alive connection at
// any moment until its endpoints drop this replica, and a review written to
// a connection the server just closed fails (a broken pipe), which is what
// closing idle connections at the stop did. It returns early if the server
// fails meanwhile.
func (w *Webhook) drain(serveErr <-chan error) error {
	if w.cfg.ShutdownDelay <= 0 {
		return nil
	}
	w.draining.Store(true)
	w.log.Info("shutting down: answering reviews while endpoints drop this replica", "for", w.cfg.ShutdownDelay)
	select {
	case <-w.cfg.Clock.After(w.cfg.ShutdownDelay):
		return nil
	case err := <-serveErr:
		return err
	}
}

// closingWhileDraining asks the client to close each connection after the
// response it carries while Run drains ("Connection: close"; over HTTP/2 the
// server sends GOAWAY): a client that routes through a ClusterIP, whose
// connections stay pinned to this replica, then reconnects to a replica that
// stays, and only connections nobody uses are left for the final close.
func (w *Webhook) closingWhileDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.draining.Load() {
			rw.Header().Set("Connection", "close")
		}
		next.ServeHTTP(rw, r)
	})
}

// slimNodes keeps of a Node what the webhook reads or writes back: its
// metadata (labels, annotations: zone, verdict, key), its whole spec (taints;
// failover and the repair loop write a cached Node back with Update, which
// takes the spec from the request and the status from the stored Node), and
// its conditions. Images, resources, addresses, node info and volumes go;
// so do the managed fields, which an Update that omits them leaves as they
// are.
func slimNodes(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{ObjectMeta: n.ObjectMeta, Spec: n.Spec,
		Status: corev1.NodeStatus{Conditions: n.Status.Conditions}}
	slim.ManagedFields = nil
	return slim, nil
}

// slimPods keeps what qualifies reads of a pod: identity, node, deletion, and
// the Ready condition, and for the pods of own (the webhook's namespace)
// their labels too, which tell the webhook's own replicas (announcer).
// Everything else would only cost memory.
func slimPods(own string) func(any) (any, error) {
	return func(obj any) (any, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return obj, nil
		}
		slim := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: p.Name, Namespace: p.Namespace, UID: p.UID,
				ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp,
			},
			Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		}
		if p.Namespace == own {
			slim.Labels = p.Labels
		}
		if c := podReadyCondition(p.Status.Conditions); c != nil {
			slim.Status.Conditions = []corev1.PodCondition{*c}
		}
		return slim, nil
	}
}
