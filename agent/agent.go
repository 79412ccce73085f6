package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/store"
)

// Run runs the agent until ctx ends. Bad configuration fails before anything
// starts, with a message naming the flag; everything started is stopped and
// waited for before Run returns.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn(w)
	}
	applyMemoryLimit(cfg.MemoryLimit, "/sys/fs/cgroup", log)
	keys, err := raftzone.LoadKeyFile(cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("--key-file: %w", err)
	}
	cfg.Raft.Keys = keys
	restCfg, err := restConfig(cfg.Kubeconfig, cfg.APITimeout)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	log = log.With("node", cfg.Raft.Node)
	zoneName, err := discoverZone(ctx, client, cfg.Raft.Node, cfg.ZoneLabel, cfg.Raft.DataDir, log.Info)
	if err != nil {
		return err
	}
	cfg.Raft.Zone = zoneName
	log = log.With("zone", zoneName)
	cfg.Raft.Logger = log

	reg := buildinfo.NewRegistry()
	cfg.Raft.Registerer = reg

	members := newNodeMembers(client, cfg.ZoneLabel, zoneName, cfg.Raft.PeerPort)

	// The writer fences with the server and the server reports through the
	// writer; the closure breaks the cycle.
	var srv *raftzone.Server
	wcfg := apiwriter.DefaultConfig()
	wcfg.Zone, wcfg.Node, wcfg.LeaseNamespace = zoneName, cfg.Raft.Node, cfg.LeaseNamespace
	wcfg.LeaseRenew, wcfg.LeaseDuration = cfg.ZoneLeaseRenew, cfg.ZoneLeaseDuration()
	wcfg.HealthPeriod, wcfg.WriteTimeout = cfg.APICheckPeriod, cfg.APITimeout
	wcfg.Logger, wcfg.Registerer = log.With("component", "apiwriter"), reg
	writer, err := apiwriter.New(wcfg, client, fence{&srv}, memberCount(func() int {
		ms, err := srv.Store().Members()
		if err != nil {
			return 0
		}
		return len(ms)
	}))
	if err != nil {
		return err
	}

	specs := cfg.Probes
	if len(specs) == 0 {
		specs = DefaultProbes(cfg.Raft.PeerPort)
	}
	// Peer probes need the zone port's authenticated client, which exists
	// once the server is built; the prober is attached before anything runs.
	obs := &probeObservations{}
	srv, err = raftzone.New(cfg.Raft, raftzone.Deps{
		Members: members, Genesis: leaseGenesis{client: client, namespace: cfg.LeaseNamespace},
		APIHealth: writer, Observations: obs, Sink: writer, Writes: writer,
	})
	if err != nil {
		return err
	}
	if err := members.restoreVerdicts(srv, writer); err != nil {
		return err
	}
	// Probes leave from the advertise address, like all zone traffic.
	probeDialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(cfg.Raft.AdvertiseAddress)}}
	prober, err := probe.New(probe.Config{Specs: specs, ScoreLine: cfg.ScoreLine, AgentClient: srv.HTTPClient(),
		Dial: probeDialer.DialContext, Registerer: reg, Logger: log.With("component", "probe")})
	if err != nil {
		return fmt.Errorf("--probe: %w", err)
	}
	obs.m = prober

	statusLn, err := net.Listen("tcp", cfg.StatusAddress)
	if err != nil {
		return fmt.Errorf("--status-address %s: %w", cfg.StatusAddress, err)
	}
	statusSrv := &http.Server{Handler: newStatusRouter(srv, reg), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 15 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	fail := func(err error) {
		if err != nil {
			errOnce.Do(func() { firstErr = err })
		}
		cancel()
	}
	spawn := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	spawn("zone member", srv.Run)
	spawn("api writer", writer.Run)
	spawn("prober", prober.Run)
	spawn("member list", func(ctx context.Context) error { members.run(ctx); return nil })
	spawn("probe targets", func(ctx context.Context) error {
		<-srv.Started()
		syncTargets(ctx, cfg.Raft.Node, prober, members, func() *store.Store { return srv.Store() }, cfg.TargetSyncPeriod, log)
		return nil
	})
	spawn("status server", func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			sctx, done := context.WithTimeout(context.Background(), 3*time.Second)
			defer done()
			statusSrv.Shutdown(sctx)
		}()
		if err := statusSrv.Serve(statusLn); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	log.Info("agent started", "statusAddress", statusLn.Addr().String(), "peerPort", cfg.Raft.PeerPort)
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

// fence is apiwriter's view of the zone member, which is built after the
// writer.
type fence struct{ srv **raftzone.Server }

func (f fence) VerifyLeader(ctx context.Context) (uint64, error) { return (*f.srv).VerifyLeader(ctx) }
func (f fence) Term() uint64                                     { return (*f.srv).Term() }

type memberCount func() int

func (f memberCount) MemberCount() int { return f() }
