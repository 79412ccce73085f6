package testcluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/zone"
)

// KubeletPort is where every fake kubelet listens on its node IP, as a real
// kubelet does, so that probes of "the kubelet" have something to connect to.
const KubeletPort = 10250

// LabelControlPlane marks the cloud node the way kubeadm marks control-plane
// nodes, so zone logic that skips control-plane nodes skips it too.
const LabelControlPlane = "node-role.kubernetes.io/control-plane"

// ErrKilled is returned by Reconnect on a killed kubelet: only Restart brings it
// back.
var ErrKilled = errors.New("kubelet is killed")

// NodeOptions describes one fake kubelet and the Node it registers.
type NodeOptions struct {
	// Name is the Node name; the kubelet authenticates as system:node:<Name>.
	Name string
	// Zone is the node's zone: its topology.kubernetes.io/zone label (set by
	// the kubelet), the unit of KCM's disruption logic, and edgequorum's zone
	// label (set by the admin client after registration), the unit of quorum.
	Zone string
	// IP is the node's InternalIP and the address of its :10250 listener. The
	// zero value means the next free address of the cluster's loopback block.
	IP netip.Addr
	// Labels are added to the Node. NodeRestriction rejects labels in the
	// kubernetes.io and k8s.io namespaces that a kubelet may not set.
	Labels map[string]string
	// ControlPlane labels the Node node-role.kubernetes.io/control-plane. The
	// admin client applies it, as kubeadm does, since no kubelet may.
	ControlPlane bool
	// LeaseRenewInterval and NodeStatusInterval override the cluster's defaults.
	LeaseRenewInterval time.Duration
	NodeStatusInterval time.Duration
}

// KubeletState is what a fake kubelet currently does.
type KubeletState int

const (
	// StateConnected: renews its Lease, posts NodeStatus, runs and deletes pods.
	StateConnected KubeletState = iota
	// StateCut: the link to the cloud is down. The node still listens on :10250
	// and its pods keep "running", but it writes nothing to the apiserver.
	StateCut
	// StateKilled: the machine is off. Nothing listens, nothing is written.
	StateKilled
)

func (s KubeletState) String() string {
	switch s {
	case StateConnected:
		return "connected"
	case StateCut:
		return "cut"
	case StateKilled:
		return "killed"
	}
	return "KubeletState(" + strconv.Itoa(int(s)) + ")"
}

// Kubelet is a fake kubelet: enough of one for the real node lifecycle,
// taint-eviction and EndpointSlice controllers to treat its Node and pods as
// they would a real node's. Its methods are safe for concurrent use.
type Kubelet struct {
	opts    NodeOptions // defaults applied
	ip      netip.Addr
	podCIDR netip.Prefix
	client  kubernetes.Interface
	cert    tls.Certificate // serving certificate of the :10250 listener
	log     *slog.Logger

	// mu serialises the lifecycle methods. They wait for the session they stop,
	// so the session's goroutines must never take mu.
	mu         sync.Mutex
	state      KubeletState
	server     *kubeletServer // nil when killed
	session    *session       // nil unless connected
	readySince time.Time      // LastTransitionTime of the Ready condition we post

	// nodeUID and lease are used by the heartbeat code, which runs either inside
	// the session or, under mu, while no session runs.
	nodeUID types.UID
	lease   *coordinationv1.Lease

	podMu  sync.Mutex
	podIPs map[string]netip.Addr // by namespace/name
}

// AddNode registers a Node for a new fake kubelet, creates its Lease, binds
// <ip>:10250 and starts it connected. ctx bounds registration only; the kubelet
// runs until Kill or Cluster.Stop.
func (c *Cluster) AddNode(ctx context.Context, o NodeOptions) (*Kubelet, error) {
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return nil, fmt.Errorf("testcluster: NodeOptions.Name %q: %v", o.Name, errs)
	}
	if o.Zone == "" {
		return nil, fmt.Errorf("testcluster: NodeOptions.Zone of node %q is empty", o.Name)
	}
	if o.LeaseRenewInterval == 0 {
		o.LeaseRenewInterval = c.opts.LeaseRenewInterval
	}
	if o.NodeStatusInterval == 0 {
		o.NodeStatusInterval = c.opts.NodeStatusInterval
	}
	if o.LeaseRenewInterval < 0 || o.NodeStatusInterval < 0 {
		return nil, fmt.Errorf("testcluster: NodeOptions.LeaseRenewInterval and NodeStatusInterval of node %q must not be negative", o.Name)
	}

	// Off until initKubelet boots it, so a Stop racing with AddNode finds
	// nothing to kill and initKubelet sees the cluster stopped.
	k := &Kubelet{opts: o, state: StateKilled, podIPs: map[string]netip.Addr{}, log: c.log.With("node", o.Name, "zone", o.Zone)}
	c.mu.Lock()
	switch {
	case c.stopped:
		c.mu.Unlock()
		return nil, fmt.Errorf("testcluster: adding node %q: cluster is stopped", o.Name)
	case c.kubelets[o.Name] != nil:
		c.mu.Unlock()
		return nil, fmt.Errorf("testcluster: node %q already exists", o.Name)
	}
	// Reserve the name and a pod range before the slow part, so concurrent
	// AddNode calls neither collide nor serialise.
	c.kubelets[o.Name] = k
	c.order = append(c.order, k)
	index := c.nodeIndex
	c.nodeIndex++
	c.mu.Unlock()

	if err := c.initKubelet(ctx, k, index); err != nil {
		c.mu.Lock()
		delete(c.kubelets, o.Name)
		c.order = slices.DeleteFunc(c.order, func(x *Kubelet) bool { return x == k })
		c.mu.Unlock()
		return nil, err
	}
	return k, nil
}

func (c *Cluster) initKubelet(ctx context.Context, k *Kubelet, index int) error {
	var err error
	if k.podCIDR, err = podCIDR(index); err != nil {
		return err
	}
	cfg, err := c.UserConfig("system:node:"+k.opts.Name, "system:nodes")
	if err != nil {
		return err
	}
	// A real kubelet's client allows 50 QPS; client-go's default of 5 would
	// throttle a node with many pods.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "edgequorum-fake-kubelet/" + k.opts.Name
	if k.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("testcluster: kubelet client for %q: %w", k.opts.Name, err)
	}

	ln, err := c.bindKubeletAddr(k.opts.IP)
	if err != nil {
		return fmt.Errorf("testcluster: node %q: %w", k.opts.Name, err)
	}
	k.ip = netip.MustParseAddr(ln.Addr().(*net.TCPAddr).IP.String())
	serving, err := c.pki.servingCert("system:node:"+k.opts.Name, []net.IP{net.IP(k.ip.AsSlice())}, []string{k.opts.Name})
	if err == nil {
		k.cert, err = serving.tlsCertificate()
	}
	if err != nil {
		ln.Close()
		return fmt.Errorf("testcluster: node %q: %w", k.opts.Name, err)
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	// Stop kills every kubelet after setting stopped; holding k.mu, this
	// either sees stopped or is killed by Stop once it returns.
	c.mu.Lock()
	stopped := c.stopped
	c.mu.Unlock()
	if stopped {
		ln.Close()
		return fmt.Errorf("testcluster: adding node %q: cluster is stopped", k.opts.Name)
	}
	k.server = serveKubelet(ln, k.cert, k.log)
	k.readySince = time.Now()
	if err := k.register(ctx); err != nil {
		k.server.close()
		k.server = nil
		return fmt.Errorf("testcluster: registering node %q: %w", k.opts.Name, err)
	}
	if admin := k.adminLabels(); len(admin) > 0 {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": admin}})
		if err != nil {
			return err
		}
		if _, err := c.client.CoreV1().Nodes().Patch(ctx, k.opts.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			k.server.close()
			k.server = nil
			return fmt.Errorf("testcluster: labelling node %q: %w", k.opts.Name, err)
		}
	}
	k.state = StateConnected
	k.startSession()
	k.log.Info("node added", "ip", k.ip, "podCIDR", k.podCIDR)
	return nil
}

// adminLabels are the labels an administrator puts on the Node after it
// registers, because NodeRestriction forbids its kubelet to: the control-plane
// role and edgequorum's zone label, which lives under
// node-restriction.kubernetes.io/ precisely so that no kubelet can move its node
// into another zone.
func (k *Kubelet) adminLabels() map[string]string {
	labels := map[string]string{}
	if k.opts.ControlPlane {
		labels[LabelControlPlane] = ""
	}
	if k.opts.Zone != "" {
		labels[zone.DefaultZoneLabel] = k.opts.Zone
	}
	return labels
}

// bindKubeletAddr listens on ip:10250, or on the first free address of the
// cluster's block when ip is zero. Another cluster in another test process may
// have drawn an overlapping block, so a taken address is skipped, not fatal.
func (c *Cluster) bindKubeletAddr(ip netip.Addr) (net.Listener, error) {
	if ip.IsValid() {
		return net.Listen("tcp", netip.AddrPortFrom(ip, KubeletPort).String())
	}
	const tries = 64
	for range tries {
		ip, err := c.ips.allocate()
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, KubeletPort).String())
		if err == nil {
			return ln, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, err
		}
		c.log.Debug("kubelet address taken, trying the next", "ip", ip)
	}
	return nil, fmt.Errorf("no free loopback address for a kubelet after %d tries in %v", tries, c.ips.prefix())
}

// UserConfig returns a client configuration that authenticates as user in
// groups with a certificate from the cluster CA, so tests can check what RBAC
// lets an identity do.
func (c *Cluster) UserConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := c.pki.clientCert(user, groups)
	if err != nil {
		return nil, fmt.Errorf("testcluster: client certificate for %q: %w", user, err)
	}
	return &rest.Config{
		Host: c.apiURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   c.pki.certPEM,
			CertData: kp.certPEM,
			KeyData:  kp.keyPEM,
		},
	}, nil
}

// Name is the Node name.
func (k *Kubelet) Name() string { return k.opts.Name }

// Zone is the node's zone label.
func (k *Kubelet) Zone() string { return k.opts.Zone }

// IP is the node's InternalIP, a loopback address.
func (k *Kubelet) IP() netip.Addr { return k.ip }

// KubeletAddr is ip:10250.
func (k *Kubelet) KubeletAddr() netip.AddrPort { return netip.AddrPortFrom(k.ip, KubeletPort) }

// PodCIDR is the range the node's pod IPs come from.
func (k *Kubelet) PodCIDR() netip.Prefix { return k.podCIDR }

// State reports what the kubelet currently does.
func (k *Kubelet) State() KubeletState {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.state
}

// Cut takes the node off the cloud: it stops renewing its Lease, posting its
// status and syncing pods, but keeps listening on :10250 with its pods running,
// as an edge node whose WAN link broke would. Cutting a cut or killed node does
// nothing.
func (k *Kubelet) Cut() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state != StateConnected {
		return
	}
	k.stopSession()
	k.state = StateCut
	k.log.Info("node cut from the cloud")
}

// Reconnect ends a Cut: the kubelet posts Ready and renews its Lease before
// Reconnect returns, then resumes its loops and brings its pods' status back
// (KCM will have marked them not ready). It returns ErrKilled for a killed node.
func (k *Kubelet) Reconnect(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch k.state {
	case StateConnected:
		return nil
	case StateKilled:
		return fmt.Errorf("testcluster: reconnecting node %q: %w", k.opts.Name, ErrKilled)
	}
	k.readySince = time.Now()
	if err := k.heartbeat(ctx); err != nil {
		return fmt.Errorf("testcluster: reconnecting node %q: %w", k.opts.Name, err)
	}
	k.state = StateConnected
	k.startSession()
	k.log.Info("node reconnected")
	return nil
}

// Kill turns the node off: no Lease, no status, no pod sync, no :10250
// listener. The Node and its pods stay in the API for KCM to deal with. Killing
// a killed node does nothing.
func (k *Kubelet) Kill() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state == StateKilled {
		return
	}
	k.stopSession()
	if k.server != nil {
		k.server.close()
		k.server = nil
	}
	k.state = StateKilled
	k.log.Info("node killed")
}

// Restart boots the node again with the same name and IP, as a rebooted
// machine would: it listens on :10250, re-registers (the Node usually still
// exists), renews its Lease and resyncs its pods. A running node is killed
// first.
func (k *Kubelet) Restart(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopSession()
	if k.server != nil {
		k.server.close()
		k.server = nil
	}
	k.state = StateKilled
	ln, err := net.Listen("tcp", k.KubeletAddr().String())
	if err != nil {
		return fmt.Errorf("testcluster: restarting node %q: %w", k.opts.Name, err)
	}
	k.server = serveKubelet(ln, k.cert, k.log)
	k.readySince = time.Now()
	if err := k.register(ctx); err != nil {
		k.server.close()
		k.server = nil
		return fmt.Errorf("testcluster: restarting node %q: %w", k.opts.Name, err)
	}
	k.state = StateConnected
	k.startSession()
	k.log.Info("node restarted")
	return nil
}

// session is one connected period of a kubelet: its Lease loop, status loop and
// pod worker share a context and all end before stop returns.
type session struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startSession must be called with k.mu held and no session running.
func (k *Kubelet) startSession() {
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{cancel: cancel, done: make(chan struct{})}
	k.session = s
	go func() {
		defer close(s.done)
		var wg sync.WaitGroup
		wg.Go(func() { k.every(ctx, k.opts.LeaseRenewInterval, "renewing lease", k.renewLease) })
		wg.Go(func() { k.every(ctx, k.opts.NodeStatusInterval, "posting node status", k.postStatus) })
		wg.Go(func() { k.runPods(ctx) })
		wg.Wait()
	}()
}

// stopSession must be called with k.mu held.
func (k *Kubelet) stopSession() {
	if k.session == nil {
		return
	}
	k.session.cancel()
	<-k.session.done
	k.session = nil
}

// every runs fn each interval until ctx ends. Failures are logged and retried
// at the next tick, as the kubelet does: one lost heartbeat is not an outage.
func (k *Kubelet) every(ctx context.Context, interval time.Duration, what string, fn func(context.Context) error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		callCtx, cancel := context.WithTimeout(ctx, interval)
		err := fn(callCtx)
		cancel()
		if err != nil && ctx.Err() == nil {
			k.log.Warn(what, "err", err)
		}
	}
}

// kubeletServer answers on <ip>:10250 over TLS. /healthz says ok; the rest of the
// kubelet API is not faked.
type kubeletServer struct {
	srv  *http.Server
	done chan struct{}
}

func serveKubelet(ln net.Listener, cert tls.Certificate, log *slog.Logger) *kubeletServer {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	s := &kubeletServer{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
			// Plain TCP probes hang up mid-handshake; that is their job, not
			// an error worth stderr.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "")
	}()
	return s
}

func (s *kubeletServer) close() {
	_ = s.srv.Close()
	<-s.done
}
