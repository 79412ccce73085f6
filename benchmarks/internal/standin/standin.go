// Package standin runs many zone members in one process, each speaking the
// real protocol, so that a 129-member zone's leader can be measured in real
// time on a two-core machine.
//
// A zone of N agents costs O(N²) probes a second, which two cores cannot run
// at N = 129 without slowing every timer (the suite's time dilation). The
// leader's own cost, though, is what a spare sends it, not how spares probe
// each other. A stand-in is the member code itself (raftzone.Member, the
// agent's member list, genesis and node-key registration, the prober) with
// one thing left out: it does not probe other stand-ins, and reports them
// healthy instead. It probes the real agents, sends its signed reports at the
// real cadence, answers every probe and copies its view from a server, so
// the real agents — the Raft servers among them — see a full zone.
package standin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgequorum/edgequorum/agent"
	"github.com/edgequorum/edgequorum/internal/buildinfo"
	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/internal/slots"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
	"github.com/edgequorum/edgequorum/zoneport"
)

// Member is one node a stand-in speaks for: the node, its credentials and
// the address its agent would use.
type Member struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
	// DataDir is the member's own state, as an agent's --data-dir.
	DataDir string `json:"dataDir"`
	// Kubeconfig holds the node's own agent credentials: only they may
	// register its node key.
	Kubeconfig string `json:"kubeconfig"`
}

// Config is one stand-in process.
type Config struct {
	Zone    string `json:"zone"`
	KeyFile string `json:"keyFile"`
	// PeerPort is the zone port, the same on every member.
	PeerPort int      `json:"peerPort"`
	Members  []Member `json:"members"`
	// Probed are the real agents' nodes: the stand-ins probe them for real.
	// Every other member is a stand-in and is reported healthy unprobed.
	Probed []string `json:"probed"`
	// StartRate is how many members start per second: a real zone's
	// members do not all start in the same second.
	StartRate float64 `json:"startRate"`
}

// Validate names the field of every problem.
func (c *Config) Validate() error {
	var errs []error
	if c.Zone == "" {
		errs = append(errs, errors.New("standin: zone is required"))
	}
	if c.KeyFile == "" {
		errs = append(errs, errors.New("standin: keyFile is required"))
	}
	if c.PeerPort <= 0 || c.PeerPort > 65535 {
		errs = append(errs, fmt.Errorf("standin: peerPort %d is not a port", c.PeerPort))
	}
	if len(c.Members) == 0 {
		errs = append(errs, errors.New("standin: members is empty"))
	}
	for i, m := range c.Members {
		if m.Name == "" || net.ParseIP(m.IP) == nil || m.DataDir == "" || m.Kubeconfig == "" {
			errs = append(errs, fmt.Errorf("standin: members[%d] (%q) needs name, a valid ip, dataDir and kubeconfig", i, m.Name))
		}
	}
	if c.StartRate <= 0 {
		errs = append(errs, fmt.Errorf("standin: startRate must be above 0, got %g", c.StartRate))
	}
	return errors.Join(errs...)
}

// Run starts every member at StartRate, serves the members' metrics on
// statusAddr (each series labelled standin=<node>) and runs until ctx ends;
// then it stops them all. progress gets one line per batch started.
func Run(ctx context.Context, cfg Config, statusAddr string, log *slog.Logger, progress func(format string, args ...any)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	reg := buildinfo.NewRegistry()
	ln, err := net.Listen("tcp", statusAddr)
	if err != nil {
		return fmt.Errorf("--status-address %s: %w", statusAddr, err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// One member list for all: the stand-ins see the zone as an agent does,
	// without a hundred informers on the apiserver.
	first, err := clientFor(cfg.Members[0])
	if err != nil {
		return err
	}
	list := agent.NewMemberList(first, zone.DefaultZoneLabel, cfg.Zone, cfg.PeerPort)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { list.Run(ctx) })
	probed := map[string]bool{}
	for _, n := range cfg.Probed {
		probed[n] = true
	}

	every := time.Duration(float64(time.Second) / cfg.StartRate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	var errs []error
	var errMu sync.Mutex
	var batch []*standIn
	for i, m := range cfg.Members {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
		if ctx.Err() != nil {
			break
		}
		s, err := newStandIn(cfg, m, list, probed, reg, log)
		if err != nil {
			cancel()
			errMu.Lock()
			errs = append(errs, err)
			errMu.Unlock()
			break
		}
		batch = append(batch, s)
		wg.Go(func() {
			if err := s.run(ctx); err != nil && ctx.Err() == nil {
				errMu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
				errMu.Unlock()
				log.Error("stand-in stopped", "node", m.Name, "err", err)
			}
		})
		if n := i + 1; len(batch) == startBatch || n == len(cfg.Members) {
			joined := waitJoined(ctx, batch, batchJoinTimeout)
			progress("%d/%d stand-ins started, %d of the last %d admitted", n, len(cfg.Members), joined, len(batch))
			batch = nil
		}
	}
	<-ctx.Done()
	wg.Wait()
	errMu.Lock()
	defer errMu.Unlock()
	return errors.Join(errs...)
}

// Stand-ins start in batches, each once the zone has admitted the one
// before (or batchJoinTimeout passed): a hundred members handshaking and
// joining in the same seconds on two cores starve each other's handshakes,
// where a real zone has a machine per member. The suite's dilated runs
// stagger agents the same way.
const (
	startBatch       = 16
	batchJoinTimeout = 2 * time.Minute
)

// waitJoined waits until every stand-in of batch holds a role in the zone,
// or timeout passes, and returns how many do.
func waitJoined(ctx context.Context, batch []*standIn, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		joined := 0
		for _, s := range batch {
			if s.srv.Status().Role != "" {
				joined++
			}
		}
		if joined == len(batch) || time.Now().After(deadline) || ctx.Err() != nil {
			return joined
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// clientFor is the member's client, the narrow one the agent uses.
func clientFor(m Member) (kubeclient.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("member %s: kubeconfig %s: %w", m.Name, m.Kubeconfig, err)
	}
	c, err := kubeclient.New(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Name, err)
	}
	return c, nil
}

// standIn is one member.
type standIn struct {
	m      Member
	zone   string
	client kubeclient.Interface
	port   *zoneport.Port
	prober *probe.Manager
	srv    *raftzone.Member
	obs    *observations
	log    *slog.Logger
}

func newStandIn(cfg Config, m Member, list *agent.MemberList, probed map[string]bool,
	reg prometheus.Registerer, log *slog.Logger) (*standIn, error) {
	client, err := clientFor(m)
	if err != nil {
		return nil, err
	}
	keys, err := zonekeys.LoadFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("member %s: keyFile: %w", m.Name, err)
	}
	own := prometheus.WrapRegistererWith(prometheus.Labels{"standin": m.Name}, reg)
	rc := raftzone.DefaultConfig()
	rc.Node, rc.Zone, rc.AdvertiseAddress, rc.PeerPort, rc.DataDir, rc.Keys = m.Name, cfg.Zone, m.IP, cfg.PeerPort, m.DataDir, keys
	rc.Logger = log
	rc.Registerer = own
	port, err := raftzone.NewPort(rc, list)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Name, err)
	}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(m.IP)}}
	// The agent probe alone: the kubelet probe reaches the node's kubelet,
	// not the agent, so it costs the measured agents nothing, and a hundred
	// stand-ins' connects would only load the suite's fake kubelets.
	specs, err := probe.ParseSpecs(fmt.Sprintf("agent:port=%d,weight=1", cfg.PeerPort))
	if err != nil {
		return nil, err
	}
	prober, err := probe.New(probe.Config{Specs: specs, AgentClient: port.HTTPClient(),
		Dial: dialer.DialContext, GridPhase: slots.ZoneGrid(cfg.Zone).Phase, Registerer: own,
		Logger: log.With("node", m.Name, "component", "probe")})
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Name, err)
	}
	obs := &observations{probed: agent.ProbeObservations(prober), keep: probed}
	srv, err := raftzone.New(rc, raftzone.Deps{Members: list, Genesis: agent.NewGenesis(client, zone.DefaultLeaseNamespace, list),
		Observations: obs, Port: port})
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.Name, err)
	}
	obs.srv = srv
	return &standIn{m: m, zone: cfg.Zone, client: client, port: port, prober: prober, srv: srv, obs: obs, log: log.With("node", m.Name)}, nil
}

// run registers the node key, then runs the member and its prober until ctx
// ends, as an agent's Run does.
func (s *standIn) run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		if err := agent.RegisterNodeKey(ctx, s.client, s.m.Name, s.port.PublicKey(), s.log.Debug); err != nil && ctx.Err() == nil {
			s.log.Error("node key not registered", "err", err)
		}
	})
	wg.Go(func() { s.prober.Run(ctx) })
	wg.Go(func() {
		agent.SyncProbeTargets(ctx, s.prober, s.srv, s.zone, 2*time.Second, func(n string) bool { return s.obs.keep[n] }, s.log)
	})
	return s.srv.Run(ctx)
}

// observations are a stand-in's opinions: the prober's for the real agents,
// healthy for every other stand-in (which nobody in this process probes).
type observations struct {
	probed raftzone.Observations
	keep   map[string]bool
	srv    *raftzone.Member
}

func (o *observations) Results() []zone.Result {
	out := o.probed.Results()
	for _, p := range o.srv.Peers() {
		if !o.keep[p.Node] {
			out = append(out, zone.Result{Peer: p.Node, OK: true, Score: 100, Latency: time.Millisecond})
		}
	}
	zone.SortResults(out)
	return out
}

func (o *observations) Changes() <-chan struct{} { return o.probed.Changes() }
