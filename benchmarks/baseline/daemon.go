package baseline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// Run runs one edge-health daemon until ctx ends: node list and checks every
// check period, the exchange every communication period, the vote every vote
// period — each a sliding loop like wait.Until, as in SuperEdge. Everything it
// starts is stopped before it returns.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	restCfg, err := restConfig(cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	log = log.With("node", cfg.NodeName)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)

	// SuperEdge watches every node and the kube-system ConfigMaps.
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	nodeInf := factory.Core().V1().Nodes()
	cmFactory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute, informers.WithNamespace(ConfigNamespace))
	cmInf := cmFactory.Core().V1().ConfigMaps()
	nodeInf.Informer()
	cmInf.Informer()

	st := newState()
	list := &nodeList{cfg: cfg, state: st, nodes: nodeInf.Lister(), configMaps: cmInf.Lister(), log: log}
	chk := &checker{cfg: cfg, state: st, ping: pingPlugin{cfg: cfg.Ping, local: net.ParseIP(cfg.LocalIP)}}
	com := newCommun(cfg, st, keySource{lister: cmInf.Lister()}, m, log)
	vot := &voter{cfg: cfg, state: st, client: client, metrics: m, log: log}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.LocalIP, strconv.Itoa(cfg.CommunPort)))
	if err != nil {
		return fmt.Errorf("--commun-port: %w", err)
	}
	exchange := &http.Server{Handler: com.handler(), ReadHeaderTimeout: cfg.CommunTimeout,
		ReadTimeout: cfg.CommunTimeout, WriteTimeout: cfg.CommunTimeout}
	servers := []*http.Server{exchange}
	listeners := []net.Listener{promutil.CountListener(ln, m.bytes)}
	if cfg.MetricsAddress != "" {
		mln, err := net.Listen("tcp", cfg.MetricsAddress)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-address: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second})
		listeners = append(listeners, mln)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() {
			if err := srv.Serve(listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("server stopped", "address", listeners[i].Addr().String(), "err", err)
				cancel()
			}
		})
	}
	factory.Start(ctx.Done())
	cmFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodeInf.Informer().HasSynced, cmInf.Informer().HasSynced) {
		cancel()
	} else {
		log.Info("edge-health started", "localIP", cfg.LocalIP, "checkPeriod", cfg.CheckPeriod,
			"communPeriod", cfg.CommunPeriod, "votePeriod", cfg.VotePeriod, "voteTimeout", cfg.VoteTimeout)
		list.sync()
		wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { list.sync() }, cfg.CheckPeriod) })
		wg.Go(func() { wait.UntilWithContext(ctx, chk.run, cfg.CheckPeriod) })
		wg.Go(func() { wait.UntilWithContext(ctx, com.send, cfg.CommunPeriod) })
		wg.Go(func() { wait.UntilWithContext(ctx, vot.vote, cfg.VotePeriod) })
	}
	<-ctx.Done()
	shutdown, done := context.WithTimeout(context.Background(), 2*time.Second)
	defer done()
	for _, srv := range servers {
		srv.Shutdown(shutdown)
	}
	factory.Shutdown()
	cmFactory.Shutdown()
	wg.Wait()
	return nil
}

func restConfig(cfg Config) (*rest.Config, error) {
	var (
		c   *rest.Config
		err error
	)
	if cfg.Kubeconfig == "" {
		c, err = rest.InClusterConfig()
	} else {
		c, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %q: %w", cfg.Kubeconfig, err)
	}
	c.QPS, c.Burst = cfg.QPS, cfg.Burst
	c.UserAgent = "edge-health-baseline"
	return c, nil
}
