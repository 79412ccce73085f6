package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/memlimit"
	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// Agent is the edgequorum agent of one edge node. New builds it in one
// direction — every part from the parts made before it — and Run starts the
// parts and stops them all. Two edges point back, made once both ends exist:
// New lets the API writer read the zone member's verdicts and evidence
// (Writer.Follow, Writer.Gather), and the zone port learns the member it
// serves when the member's Run starts listening on it.
//
//	client, zone, metrics registry
//	member list (Node informer)          ← client
//	zone port (TLS identity, peer client)
//	prober                               ← zone port's client
//	leadership (the fence)
//	API writer                           ← client, leadership
//	zone member (raftzone.Member)        ← member list, zone port, prober,
//	                                       API writer, leadership
//	probe targets                        ← zone member's peers, prober
type Agent struct {
	cfg     Config
	log     *slog.Logger
	reg     *prometheus.Registry
	members *nodeMembers
	prober  *probe.Manager
	writer  *apiwriter.Writer
	zone    *raftzone.Member
	client  kubeclient.Interface
	nodeKey ed25519.PublicKey
	keys    *zonekeys.Watcher
	running atomic.Bool
}

// Run builds the agent and runs it until ctx ends (New, then Agent.Run).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	a, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// New checks cfg and builds every part of the agent without starting any.
// Bad configuration fails here with a message naming the flag. It reads this
// node's zone from the apiserver (or the data dir's cache during an outage),
// retrying until ctx ends.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	restCfg, err := restConfig(cfg.Kubeconfig, cfg.APITimeout)
	if err != nil {
		return nil, err
	}
	client, err := kubeclient.New(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return newAgent(ctx, cfg, client, log)
}

// newAgent is New after the flag check, on a given client.
func newAgent(ctx context.Context, cfg Config, client kubeclient.Interface, log *slog.Logger) (*Agent, error) {
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	keys, err := zonekeys.LoadFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("--key-file: %w", err)
	}
	cfg.Raft.Keys = keys
	// raftzone and apiwriter name the node and zone in their logs themselves.
	partLog := log
	log = log.With("node", cfg.Raft.Node)
	zoneName, err := discoverZone(ctx, client, cfg.Raft.Node, cfg.ZoneLabel, cfg.Raft.DataDir, log.Info)
	if err != nil {
		return nil, err
	}
	cfg.Raft.Zone = zoneName
	log = log.With("zone", zoneName)
	cfg.Raft.Logger = partLog
	reg := buildinfo.NewRegistry()
	cfg.Raft.Registerer = reg
	keyReload, err := newKeyReload(cfg, keys, partLog, reg)
	if err != nil {
		return nil, err
	}

	members := newNodeMembers(client, cfg.ZoneLabel, zoneName, cfg.Raft.PeerPort)
	port, err := raftzone.NewPort(cfg.Raft, members)
	if err != nil {
		return nil, err
	}
	specs := cfg.Probes
	if len(specs) == 0 {
		specs = DefaultProbes(cfg.Raft.PeerPort)
	}
	// Probes leave from the advertise address, like all zone traffic.
	probeDialer := probe.Dialer(&net.TCPAddr{IP: net.ParseIP(cfg.Raft.AdvertiseAddress)})
	prober, err := probe.New(probe.Config{Specs: specs, ScoreLine: cfg.ScoreLine, AgentClient: port.HTTPClient(),
		Dial: probeDialer.DialContext, Confirm: cfg.ProbeConfirm(), GridPhase: slots.ZoneGrid(zoneName).Phase,
		Registerer: reg, Logger: log.With("component", "probe")})
	if err != nil {
		return nil, fmt.Errorf("--probe: %w", err)
	}
	leadership := raftzone.NewLeadership()
	wcfg := apiwriter.DefaultConfig()
	wcfg.Zone, wcfg.Node, wcfg.LeaseNamespace = zoneName, cfg.Raft.Node, cfg.LeaseNamespace
	wcfg.WebhookNamespace = cfg.WebhookNamespace
	wcfg.NodeKey = port.NodeKey()
	wcfg.LeaseRenew, wcfg.LeaseDuration = cfg.ZoneLeaseRenew, cfg.ZoneLeaseDuration()
	wcfg.QuietRenew, wcfg.QuietDuration = cfg.ZoneLeaseQuietRenew, cfg.ZoneLeaseQuietDuration()
	wcfg.HealthPeriod, wcfg.WriteTimeout = cfg.APICheckPeriod, cfg.APITimeout
	wcfg.Logger, wcfg.Registerer = partLog.With("component", "apiwriter"), reg
	writer, err := apiwriter.New(wcfg, client, leadership, leadership)
	if err != nil {
		return nil, err
	}
	srv, err := raftzone.New(cfg.Raft, raftzone.Deps{
		Members: members, Genesis: leaseGenesis{client: client, namespace: cfg.LeaseNamespace, members: members},
		APIHealth: writer, Observations: probeObservations{prober}, Sink: writer, Writes: writer,
		Port: port, Leadership: leadership,
	})
	if err != nil {
		return nil, err
	}
	members.restoreVerdicts(srv, writer)
	return &Agent{cfg: cfg, log: log, reg: reg, members: members, prober: prober, writer: writer, zone: srv,
		client: client, nodeKey: port.PublicKey(), keys: keyReload}, nil
}

// Run starts every part and serves until ctx ends or a part fails; then it
// stops them all and waits for them before it returns. An Agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	memlimit.Apply(a.cfg.MemoryLimit, "/sys/fs/cgroup", a.log)
	memlimit.ApplyGCPercent(a.cfg.GCPercent, a.log)
	applyMaxProcs(a.cfg.MaxProcs, a.log)
	applyMemProfiling(a.cfg.Profiling)
	var pages *startupPages
	if a.cfg.ReleaseStartupPages {
		pages = newStartupPages(a.log, a.reg)
		pages.release("start")
	}
	statusLn, err := net.Listen("tcp", a.cfg.StatusAddress)
	if err != nil {
		return fmt.Errorf("--status-address %s: %w", a.cfg.StatusAddress, err)
	}
	statusSrv := &http.Server{Handler: newStatusRouter(a.zone, a.reg, a.cfg.StatusAllowCIDRs, a.cfg.Profiling), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	spawn := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				errOnce.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
				cancel()
			}
		}()
	}
	// Peers admit this member only with the node key its own Node
	// registers; registration retries while the apiserver is away and never
	// stops the agent (a member already pinned does not need it).
	spawn("node key", func(ctx context.Context) error {
		if err := registerNodeKey(ctx, a.client, a.cfg.Raft.Node, a.nodeKey, a.log.Info); err != nil && ctx.Err() == nil {
			a.log.Error("node key not registered; peers will not admit this node until it is", "err", err)
		}
		return nil
	})
	if pages != nil {
		spawn("start-up pages", func(ctx context.Context) error {
			releaseWhenReady(ctx, func() bool { return a.zone.Status().Ready }, time.Second,
				func() { pages.release("ready") })
			return nil
		})
	}
	spawn("key reload", a.keys.Run)
	spawn("zone member", a.zone.Run)
	spawn("api writer", a.writer.Run)
	spawn("prober", a.prober.Run)
	spawn("member list", func(ctx context.Context) error { a.members.run(ctx); return nil })
	spawn("probe targets", func(ctx context.Context) error {
		syncTargets(ctx, a.prober, a.zone, a.cfg.Raft.Zone, a.cfg.TargetSyncPeriod, nil, a.log)
		return nil
	})
	spawn("status server", func(ctx context.Context) error {
		served := make(chan error, 1)
		go func() { served <- statusSrv.Serve(statusLn) }()
		select {
		case err := <-served:
			return err // Serve returns only on failure until Shutdown
		case <-ctx.Done():
		}
		sctx, done := context.WithTimeout(context.Background(), 3*time.Second)
		defer done()
		statusSrv.Shutdown(sctx)
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	a.log.Info("agent started", "statusAddress", statusLn.Addr().String(), "peerPort", a.cfg.Raft.PeerPort)
	<-ctx.Done()
	wg.Wait()
	return firstErr
}

func restConfig(kubeconfig string, timeout time.Duration) (*rest.Config, error) {
	var (
		c   *rest.Config
		err error
	)
	if kubeconfig == "" {
		c, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %w", err)
		}
	} else {
		c, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
	}
	c.Timeout = timeout
	// Client-side rate limit: an agent writes a handful of objects a minute;
	// a burst after an outage must not hammer the apiserver.
	c.QPS, c.Burst = 5, 10
	c.UserAgent = "edgequorum-agent/" + buildinfo.Version()
	return c, nil
}
