package testcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/internal/proc"
)

// Cluster is a running control plane and its fake kubelets. Its methods are safe
// for concurrent use.
type Cluster struct {
	opts    Options
	binDir  string
	dir     string
	ownsDir bool // Stop removes dir only if Start created it
	log     *slog.Logger
	logFile *os.File // the default Logger's file, closed by Stop

	pki        *pki
	apiURL     string
	adminToken string
	restConfig *rest.Config
	client     kubernetes.Interface
	kubeconfig string
	auditLog   string

	etcd, apiserver, kcm, scheduler *proc.Group

	ips *ipAllocator

	mu        sync.Mutex
	kubelets  map[string]*Kubelet
	order     []*Kubelet // AddNode order
	nodeIndex int        // AddNode calls so far; picks each node's pod range
	stopped   bool

	stopOnce sync.Once
	stopErr  error
}

// Start runs etcd, kube-apiserver and kube-controller-manager, waits until each is
// ready, and adds the cloud node unless opts.NoCloudNode. ctx bounds start-up
// only: the cluster runs until Stop. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	binDir, err := resolveBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, binDir: binDir, ips: newIPAllocator(), kubelets: map[string]*Kubelet{}}
	if opts.Dir == "" {
		if c.dir, err = os.MkdirTemp("", "edgequorum-testcluster-"); err != nil {
			return nil, fmt.Errorf("testcluster: creating cluster dir: %w", err)
		}
		c.ownsDir = true
	} else {
		if c.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("testcluster: cluster dir: %w", err)
		}
	}
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		c.cleanupDir()
		return nil, fmt.Errorf("testcluster: creating log dir: %w", err)
	}
	c.log = opts.Logger
	if c.log == nil {
		f, err := os.OpenFile(filepath.Join(c.LogDir(), "harness.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			c.cleanupDir()
			return nil, fmt.Errorf("testcluster: opening harness log: %w", err)
		}
		c.logFile = f
		c.log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if err := c.start(ctx); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			c.log.Warn("stopping after failed start", "err", stopErr)
		}
		return nil, err
	}
	return c, nil
}

// startAttempts bounds the retries after a component lost a port race (see
// freePorts).
const startAttempts = 3

func (c *Cluster) start(ctx context.Context) error {
	started := time.Now()
	if err := c.writePKI(); err != nil {
		return err
	}
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		err = c.startComponents(ctx)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == startAttempts {
			break
		}
		c.log.Warn("port taken while starting, retrying with new ports", "attempt", attempt, "err", err)
		c.stopComponents()
	}
	if err != nil {
		return err
	}
	c.log.Info("control plane ready", "apiserver", c.apiURL, "took", time.Since(started).Round(time.Millisecond))
	if !c.opts.NoCloudNode {
		if _, err := c.AddNode(ctx, NodeOptions{Name: DefaultCloudNodeName, Zone: c.opts.CloudZone, ControlPlane: true}); err != nil {
			return fmt.Errorf("testcluster: adding the cloud node: %w", err)
		}
	}
	return nil
}

// Stop kills the fake kubelets, then KCM, the apiserver and etcd, each by process
// group, and removes the cluster directory if Start created it. It is idempotent
// and returns the same error every time: a component that had crashed before Stop
// is reported here.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.stopped = true
		kubelets := append([]*Kubelet(nil), c.order...)
		c.mu.Unlock()
		for _, k := range kubelets {
			k.Kill()
		}
		c.stopErr = errors.Join(c.stopComponents()...)
		if c.logFile != nil {
			c.logFile.Close()
		}
		c.cleanupDir()
	})
	return c.stopErr
}

func (c *Cluster) stopComponents() []error {
	var errs []error
	for _, p := range []**proc.Group{&c.scheduler, &c.kcm, &c.apiserver, &c.etcd} {
		if *p == nil {
			continue
		}
		if err := (*p).Stop(c.opts.StopTimeout); err != nil {
			errs = append(errs, fmt.Errorf("testcluster: %w", err))
		}
		c.log.Info("stopped", "component", (*p).Name(), "pid", (*p).Pid())
		*p = nil
	}
	return errs
}

func (c *Cluster) cleanupDir() {
	if c.ownsDir {
		os.RemoveAll(c.dir)
	}
}

// RESTConfig returns a copy of the cluster-admin client configuration (group
// system:masters, bearer token), safe for the caller to modify.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Client returns a cluster-admin clientset.
func (c *Cluster) Client() kubernetes.Interface { return c.client }

// KubeconfigPath is a kubeconfig file for cluster-admin, for kubectl and for
// processes such as the agents and the webhook.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfig }

// APIServerURL is the apiserver's https://127.0.0.1:<port> address, or
// https://<Options.AdvertiseAddress>:<port> in node-network mode.
func (c *Cluster) APIServerURL() string { return c.apiURL }

// CACertPEM is the cluster CA: it signed the apiserver's serving certificate and
// every client certificate the harness issues.
func (c *Cluster) CACertPEM() []byte { return append([]byte(nil), c.pki.certPEM...) }

// Dir is the cluster's directory (data, certificates, kubeconfigs, logs).
func (c *Cluster) Dir() string { return c.dir }

// LogDir holds one log file per component plus harness.log.
func (c *Cluster) LogDir() string { return filepath.Join(c.dir, "logs") }

// AuditLogPath is where the apiserver writes audit events when
// Options.AuditPolicy is set; empty otherwise.
func (c *Cluster) AuditLogPath() string { return c.auditLog }

// PIDs maps each running component (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) to its process ID, which is also its
// process-group ID.
func (c *Cluster) PIDs() map[string]int {
	m := map[string]int{}
	for _, p := range []*proc.Group{c.etcd, c.apiserver, c.kcm, c.scheduler} {
		if p != nil {
			m[p.Name()] = p.Pid()
		}
	}
	return m
}

// Node returns the fake kubelet named name, or nil.
func (c *Cluster) Node(name string) *Kubelet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kubelets[name]
}

// Nodes returns every fake kubelet in the order they were added.
func (c *Cluster) Nodes() []*Kubelet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Kubelet(nil), c.order...)
}

// CloudNode returns the always-healthy node of the cloud zone, or nil if
// Options.NoCloudNode.
func (c *Cluster) CloudNode() *Kubelet { return c.Node(DefaultCloudNodeName) }

// LogTails returns the last n lines of every log in LogDir, keyed by file name,
// for dumping into test output when something went wrong.
func (c *Cluster) LogTails(n int) map[string]string {
	entries, err := os.ReadDir(c.LogDir())
	if err != nil {
		return map[string]string{"(log dir)": err.Error()}
	}
	tails := map[string]string{}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			tails[e.Name()] = proc.TailFile(filepath.Join(c.LogDir(), e.Name()), n)
		}
	}
	return tails
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
