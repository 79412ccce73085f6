package realnode

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/edgequorum/edgequorum/internal/proc"
	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// Defaults applied by Start.
const (
	// DefaultStartTimeout covers containerd, the pause image build and import,
	// the kubelet registering and turning Ready, kube-proxy's first sync and
	// the scheduler: about 20-40 s on 2 cores, more under a parallel build.
	DefaultStartTimeout = 4 * time.Minute
	DefaultStopTimeout  = 15 * time.Second
	DefaultCNIBinDir    = "/usr/lib/cni" // Debian's containernetworking-plugins
)

// Binaries are the programs Start runs from the bin directory (make
// noderuntime). runc and the CNI plugins come from Debian packages.
var Binaries = []string{"containerd", "containerd-shim-runc-v2", "ctr", "kubelet", "kube-proxy", "kube-scheduler"}

// cniPlugins are the CNI plugins the node's network config uses; containerd
// adds loopback itself.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// ErrBinariesMissing means a node binary, runc or a CNI plugin is missing;
// run `make noderuntime` (and install runc and containernetworking-plugins).
var ErrBinariesMissing = errors.New("real-node binaries missing (run `make noderuntime`; apt-get install runc containernetworking-plugins)")

// ErrNoNamespace means the process does not run in the node namespace; see
// RunInNamespace.
var ErrNoNamespace = errors.New("realnode: not in the node namespace")

// Options configures Start.
type Options struct {
	// Name is the Node's name (kubelet --hostname-override). Required.
	Name string
	// Labels are the kubelet's --node-labels (NodeRestriction allows any key
	// outside the kubernetes.io and k8s.io namespaces, and the topology ones).
	Labels map[string]string
	// Dir receives the node's data, configs, certificates and logs. Empty means
	// a new temporary directory that Stop removes.
	Dir string
	// BinDir holds Binaries; empty means testcluster.FindBinDir's search.
	BinDir string
	// CNIBinDir holds the CNI plugins; empty means DefaultCNIBinDir.
	CNIBinDir string
	// ModuleDir is where `go build` runs for the pause image; empty means the
	// parent of BinDir if that is the repository root, else the working
	// directory.
	ModuleDir string
	// PauseImageTar, when set, is a docker-archive of PauseImage to import
	// instead of building ./pause.
	PauseImageTar string
	// Snapshotter is containerd's snapshotter; empty means overlayfs if an
	// overlay mount works in Dir, else native.
	Snapshotter string
	// NoScheduler skips kube-scheduler, for a cluster that runs its own
	// (testcluster.Options.Scheduler). DaemonSet and Deployment pods need one.
	NoScheduler bool
	// StartTimeout bounds Start; StopTimeout is how long Stop waits for a
	// component after SIGTERM before SIGKILL.
	StartTimeout time.Duration
	StopTimeout  time.Duration
}

// Node is a real Kubernetes node: containerd with runc and CNI, a kubelet
// registered as a system:node, kube-proxy (nftables) and, unless
// Options.NoScheduler, kube-scheduler for the whole cluster. Only one Node may
// run at a time: it owns NodeAddress, PodCIDR and every shim in the namespace.
type Node struct {
	opts        Options
	cluster     *testcluster.Cluster
	binDir      string
	dir         string
	ownsDir     bool
	runc        string
	snapshotter string
	cgroupRoot  string

	containerd, kubelet, kubeProxy, scheduler *proc.Group

	stopOnce sync.Once
	stopErr  error
}

// running guards the one-node-per-namespace rule.
var (
	runningMu sync.Mutex
	running   bool
)

// Start runs a real node attached to cluster, which must run in node-network
// mode (testcluster.Options.AdvertiseAddress = APIServerAddress) in this
// namespace, and returns once the Node is Ready, kube-proxy has synced and the
// scheduler is healthy. ctx bounds start-up only. On error everything started
// is stopped again.
func Start(ctx context.Context, cluster *testcluster.Cluster, opts Options) (*Node, error) {
	if !InNamespace() {
		return nil, fmt.Errorf("%w: %s", ErrNoNamespace, unavailable)
	}
	if opts.Name == "" {
		return nil, errors.New("realnode: Options.Name is required")
	}
	if u, err := url.Parse(cluster.APIServerURL()); err != nil || u.Hostname() != APIServerAddress.String() {
		return nil, fmt.Errorf("realnode: the apiserver serves at %s; start the cluster with testcluster.Options.AdvertiseAddress = realnode.APIServerAddress", cluster.APIServerURL())
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = DefaultCNIBinDir
	}
	binDir, runc, err := findBinaries(opts)
	if err != nil {
		return nil, err
	}
	runningMu.Lock()
	if running {
		runningMu.Unlock()
		return nil, errors.New("realnode: a node is already running in this namespace")
	}
	running = true
	runningMu.Unlock()

	n := &Node{opts: opts, cluster: cluster, binDir: binDir, runc: runc}
	if opts.Dir == "" {
		if n.dir, err = os.MkdirTemp("", "edgequorum-realnode-"); err != nil {
			n.release()
			return nil, fmt.Errorf("realnode: creating node dir: %w", err)
		}
		n.ownsDir = true
	} else if n.dir, err = filepath.Abs(opts.Dir); err != nil {
		n.release()
		return nil, fmt.Errorf("realnode: node dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := n.start(ctx); err != nil {
		if stopErr := n.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping after the failed start: %w", stopErr))
		}
		return nil, err
	}
	return n, nil
}

func (n *Node) release() {
	runningMu.Lock()
	running = false
	runningMu.Unlock()
}

// findBinaries checks Binaries, runc and the CNI plugins.
func findBinaries(opts Options) (binDir, runc string, err error) {
	binDir = opts.BinDir
	if binDir == "" {
		if binDir, err = testcluster.FindBinDir(); err != nil {
			return "", "", err
		}
	}
	var missing []string
	for _, b := range Binaries {
		if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(binDir, b))
		}
	}
	for _, p := range cniPlugins {
		if fi, err := os.Stat(filepath.Join(opts.CNIBinDir, p)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, filepath.Join(opts.CNIBinDir, p))
		}
	}
	runc, lookErr := exec.LookPath("runc")
	if lookErr != nil {
		if _, err := os.Stat("/usr/sbin/runc"); err == nil {
			runc = "/usr/sbin/runc"
		} else {
			missing = append(missing, "runc")
		}
	}
	if len(missing) > 0 {
		return "", "", fmt.Errorf("realnode: %w: %s", ErrBinariesMissing, strings.Join(missing, ", "))
	}
	return binDir, runc, nil
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.dir}, elem...)...) }

// LogDir holds one log file per component.
func (n *Node) LogDir() string { return n.path("logs") }

// Dir is the node's directory.
func (n *Node) Dir() string { return n.dir }

// Name is the Node's name.
func (n *Node) Name() string { return n.opts.Name }

// IP is the node's InternalIP, NodeAddress.
func (n *Node) IP() netip.Addr { return NodeAddress }

// ContainerdSocket is containerd's gRPC socket (for ctr --address).
func (n *Node) ContainerdSocket() string { return n.containerdSocket() }

// KubeletKubeconfig is the kubelet's kubeconfig (user system:node:<Name>), for
// tests that act as the node.
func (n *Node) KubeletKubeconfig() string { return n.path("kubelet.kubeconfig") }

// CgroupRoot is the kubelet's --cgroup-root, the same path in every cgroup
// hierarchy; every pod's cgroups live below it.
func (n *Node) CgroupRoot() string { return n.cgroupRoot }

func (n *Node) start(ctx context.Context) error {
	for _, d := range []string{n.LogDir(), n.path("pki"), n.path("cni", "net.d"), n.path("cni", "ipam"), n.path("containerd"), n.path("kubelet"), n.path("images")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("realnode: %w", err)
		}
	}
	if err := n.writePKI(); err != nil {
		return err
	}
	n.snapshotter = n.opts.Snapshotter
	if n.snapshotter == "" {
		n.snapshotter = n.probeSnapshotter()
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	n.cgroupRoot = "/edgequorum-realnode-" + hex.EncodeToString(suffix)
	if err := createCgroupRoot(n.cgroupRoot); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}

	// The pause image builds while containerd starts.
	pauseTar := n.opts.PauseImageTar
	pauseErr := make(chan error, 1)
	if pauseTar == "" {
		pauseTar = n.path("images", "pause.tar")
		go func() { pauseErr <- BuildGoImage(ctx, n.moduleDir(), pausePackage, PauseImage, pauseTar) }()
	} else {
		pauseErr <- nil
	}
	if err := n.startContainerd(ctx); err != nil {
		<-pauseErr
		return err
	}
	if err := <-pauseErr; err != nil {
		return err
	}
	if err := n.ImportImage(ctx, pauseTar); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	if err := n.startKubeProxy(ctx); err != nil {
		return err
	}
	if !n.opts.NoScheduler {
		if err := n.startScheduler(ctx); err != nil {
			return err
		}
	}
	return nil
}

// moduleDir is where `go build` runs for the node's images.
func (n *Node) moduleDir() string {
	if n.opts.ModuleDir != "" {
		return n.opts.ModuleDir
	}
	if root := filepath.Dir(n.binDir); fileExists(filepath.Join(root, "go.mod")) {
		return root
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// probeSnapshotter tries an overlay mount in the node dir: overlayfs needs the
// directory's file system to support it as an upper layer.
func (n *Node) probeSnapshotter() string {
	base := n.path("overlay-probe")
	defer os.RemoveAll(base)
	dirs := []string{filepath.Join(base, "lower"), filepath.Join(base, "upper"), filepath.Join(base, "work"), filepath.Join(base, "merged")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "native"
		}
	}
	if err := syscall.Mount("overlay", dirs[3], "overlay", 0, "lowerdir="+dirs[0]+",upperdir="+dirs[1]+",workdir="+dirs[2]); err != nil {
		return "native"
	}
	_ = syscall.Unmount(dirs[3], 0)
	return "overlayfs"
}

// env is the components' environment: the shim must be on PATH for
// containerd, and the kubelet and kube-proxy run mount, nft and iptables.
func (n *Node) env() []string {
	return []string{
		"PATH=" + n.binDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + n.dir,
		"TMPDIR=" + os.TempDir(),
	}
}

func (n *Node) startProcess(name string, args []string) (*proc.Group, error) {
	p, err := proc.StartGroup(name, filepath.Join(n.binDir, name), args, n.env(), filepath.Join(n.LogDir(), name+".log"))
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	return p, nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	cfg := n.path("containerd", "config.toml")
	if err := writeFile(cfg, []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	cni, err := n.cniConfig()
	if err != nil {
		return fmt.Errorf("realnode: CNI config: %w", err)
	}
	if err := writeFile(n.path("cni", "net.d", "10-edgequorum.conflist"), cni, 0o644); err != nil {
		return err
	}
	p, err := n.startProcess("containerd", []string{"--config", cfg})
	if err != nil {
		return err
	}
	n.containerd = p
	if err := p.WaitReady(ctx, n.opts.StartTimeout, func(ctx context.Context) error {
		out, err := n.ctr(ctx, "plugins", "ls")
		if err != nil {
			return err
		}
		// The CRI plugin is what the kubelet talks to; it loads last.
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "io.containerd.grpc.v1" && f[1] == "cri" {
				if f[len(f)-1] != "ok" {
					return fmt.Errorf("CRI plugin: %s", line)
				}
				return nil
			}
		}
		return errors.New("no CRI plugin listed yet")
	}); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

// ctr runs bin/ctr against the node's containerd in the CRI namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.binDir, "ctr"), append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	cmd.Env = n.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// ImportImage loads an image archive (docker save format, or an OCI image
// layout in a tar whose index.json names the image with a full reference in
// org.opencontainers.image.ref.name) into containerd's CRI namespace and
// unpacks it for the node's snapshotter, so pods can run it with
// imagePullPolicy IfNotPresent and no registry is ever asked.
func (n *Node) ImportImage(ctx context.Context, tarPath string) error {
	if _, err := n.ctr(ctx, "images", "import", "--snapshotter", n.snapshotter, tarPath); err != nil {
		return fmt.Errorf("realnode: importing %s: %w", tarPath, err)
	}
	return nil
}

// Ctr runs ctr with the given arguments against the node's containerd in the
// CRI namespace ("k8s.io") and returns its combined output.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	out, err := n.ctr(ctx, args...)
	if err != nil {
		return out, fmt.Errorf("realnode: %w", err)
	}
	return out, nil
}

func (n *Node) startKubelet(ctx context.Context) error {
	healthz, err := freePorts("127.0.0.1", 1)
	if err != nil {
		return err
	}
	// The kubelet's own port, as on every real node: the zone's peers probe
	// it there. The address is the node's alone inside the namespace.
	cfg, err := n.kubeletConfig(KubeletPort, healthz[0])
	if err != nil {
		return fmt.Errorf("realnode: kubelet config: %w", err)
	}
	cfgPath := n.path("kubelet-config.json")
	if err := writeFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	args := []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + n.KubeletKubeconfig(),
		"--hostname-override=" + n.opts.Name,
		"--node-ip=" + NodeAddress.String(),
		"--root-dir=" + n.path("kubelet"),
		"--v=2",
	}
	if len(n.opts.Labels) > 0 {
		args = append(args, "--node-labels="+nodeLabels(n.opts.Labels))
	}
	p, err := n.startProcess("kubelet", args)
	if err != nil {
		return err
	}
	n.kubelet = p
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	healthURL := fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz[0])
	client := n.cluster.Client()
	if err := p.WaitReady(ctx, n.opts.StartTimeout, func(ctx context.Context) error {
		if err := httpGet(ctx, hc, healthURL); err != nil {
			return err
		}
		node, err := client.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					return fmt.Errorf("node %s not ready: %s: %s", n.opts.Name, c.Reason, c.Message)
				}
				return nil
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", n.opts.Name)
	}); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	ports, err := freePorts("127.0.0.1", 2)
	if err != nil {
		return err
	}
	cfg, err := n.kubeProxyConfig(ports[0], ports[1])
	if err != nil {
		return fmt.Errorf("realnode: kube-proxy config: %w", err)
	}
	cfgPath := n.path("kube-proxy-config.json")
	if err := writeFile(cfgPath, cfg, 0o644); err != nil {
		return err
	}
	p, err := n.startProcess("kube-proxy", []string{"--config=" + cfgPath, "--v=2"})
	if err != nil {
		return err
	}
	n.kubeProxy = p
	hc := &http.Client{}
	defer hc.CloseIdleConnections()
	healthURL := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[0])
	if err := p.WaitReady(ctx, n.opts.StartTimeout, func(ctx context.Context) error { return httpGet(ctx, hc, healthURL) }); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

func (n *Node) startScheduler(ctx context.Context) error {
	ports, err := freePorts("127.0.0.1", 1)
	if err != nil {
		return err
	}
	kc := n.path("kube-scheduler.kubeconfig")
	p, err := n.startProcess("kube-scheduler", []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[0]),
		"--cert-dir=" + n.path("kube-scheduler-certs"),
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	n.scheduler = p
	// It serves a self-signed certificate; only liveness is asked of it.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	healthURL := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
	if err := p.WaitReady(ctx, n.opts.StartTimeout, func(ctx context.Context) error { return httpGet(ctx, hc, healthURL) }); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return nil
}

// writePKI writes the cluster CA and the node's certificates and kubeconfigs:
// the kubelet as system:node:<name> (so the Node authorizer and
// NodeRestriction apply), its serving certificate for NodeAddress (which the
// apiserver verifies), kube-proxy as system:kube-proxy and the scheduler as
// system:kube-scheduler, both bound by the bootstrap RBAC policy.
func (n *Node) writePKI() error {
	ca := n.cluster.CACertPEM()
	if err := writeFile(n.path("pki", "ca.crt"), ca, 0o644); err != nil {
		return err
	}
	crt, key, err := n.cluster.IssueServingCert("system:node:"+n.opts.Name, []net.IP{net.IP(NodeAddress.AsSlice())}, []string{n.opts.Name})
	if err != nil {
		return fmt.Errorf("realnode: kubelet serving certificate: %w", err)
	}
	if err := writeFile(n.path("pki", "kubelet.crt"), crt, 0o644); err != nil {
		return err
	}
	if err := writeFile(n.path("pki", "kubelet.key"), key, 0o600); err != nil {
		return err
	}
	for _, u := range []struct {
		file, user string
		groups     []string
	}{
		{"kubelet.kubeconfig", "system:node:" + n.opts.Name, []string{"system:nodes"}},
		{"kube-proxy.kubeconfig", "system:kube-proxy", nil},
		{"kube-scheduler.kubeconfig", "system:kube-scheduler", nil},
	} {
		crt, key, err := n.cluster.IssueClientCert(u.user, u.groups)
		if err != nil {
			return fmt.Errorf("realnode: client certificate for %s: %w", u.user, err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: n.cluster.APIServerURL(), CertificateAuthorityData: ca}
		cfg.AuthInfos[u.user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
		cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: u.user}
		cfg.CurrentContext = "testcluster"
		if err := clientcmd.WriteToFile(*cfg, n.path(u.file)); err != nil {
			return fmt.Errorf("realnode: writing %s: %w", u.file, err)
		}
	}
	return nil
}

// Stop stops the scheduler, kube-proxy and the kubelet, kills every process in
// the node's cgroups (the containers), stops containerd, kills the shims it
// left, removes the node's cgroups, unmounts whatever is still mounted under
// the node dir (pod volumes, rootfs, network namespaces) and removes the dir if
// Start created it. It is idempotent and returns the same error every time; a
// component that had crashed is reported.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() {
		defer n.release()
		var errs []error
		for _, p := range []*proc.Group{n.scheduler, n.kubeProxy, n.kubelet} {
			if p != nil {
				if err := p.Stop(n.opts.StopTimeout); err != nil {
					errs = append(errs, fmt.Errorf("realnode: %w", err))
				}
			}
		}
		if n.cgroupRoot != "" {
			if err := waitGone(n.opts.StopTimeout, func() []int {
				pids := cgroupProcs(n.cgroupRoot)
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				return livePIDs(pids)
			}); err != nil {
				errs = append(errs, fmt.Errorf("realnode: containers: %w", err))
			}
		}
		if n.containerd != nil {
			if err := n.containerd.Stop(n.opts.StopTimeout); err != nil {
				errs = append(errs, fmt.Errorf("realnode: %w", err))
			}
		}
		if err := waitGone(n.opts.StopTimeout, func() []int {
			pids := n.runtimeProcesses()
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return pids
		}); err != nil {
			errs = append(errs, fmt.Errorf("realnode: shims: %w", err))
		}
		if n.cgroupRoot != "" {
			// The last task of a cgroup may still be exiting: rmdir says EBUSY.
			deadline := time.Now().Add(n.opts.StopTimeout)
			for {
				err := removeCgroupRoot(n.cgroupRoot)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					errs = append(errs, fmt.Errorf("realnode: %w", err))
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		if n.dir != "" {
			mps, err := mountsUnder(n.dir)
			if err != nil {
				errs = append(errs, fmt.Errorf("realnode: %w", err))
			}
			for _, mp := range mps {
				if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
					errs = append(errs, fmt.Errorf("realnode: unmounting %s: %w", mp, err))
				}
			}
			if mps, err := mountsUnder(n.dir); err != nil || len(mps) > 0 {
				errs = append(errs, fmt.Errorf("realnode: still mounted under the node dir after unmounting: %v %v", mps, err))
			} else if n.ownsDir {
				if err := removeUnmounted(n.dir); err != nil {
					errs = append(errs, fmt.Errorf("realnode: %w", err))
				}
			}
		}
		n.stopErr = errors.Join(errs...)
	})
	return n.stopErr
}

// runtimeProcesses lists live shims and runc processes. The PID namespace holds
// only this test binary's processes, and only one Node runs in it.
func (n *Node) runtimeProcesses() []int {
	targets := map[string]bool{}
	for _, p := range []string{filepath.Join(n.binDir, "containerd-shim-runc-v2"), n.runc} {
		targets[p] = true
		if r, err := filepath.EvalSymlinks(p); err == nil {
			targets[r] = true
		}
	}
	var pids []int
	for _, p := range liveProcesses() {
		exe, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/exe")
		if err != nil {
			continue
		}
		if targets[strings.TrimSuffix(exe, " (deleted)")] {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

// livePIDs filters pids down to those still running (not zombies).
func livePIDs(pids []int) []int {
	live := map[int]bool{}
	for _, p := range liveProcesses() {
		live[p.PID] = true
	}
	var out []int
	for _, pid := range pids {
		if live[pid] {
			out = append(out, pid)
		}
	}
	return out
}

// LogTails returns the last lines of every log in LogDir, keyed by file name.
func (n *Node) LogTails(lines int) map[string]string {
	entries, err := os.ReadDir(n.LogDir())
	if err != nil {
		return map[string]string{"(log dir)": err.Error()}
	}
	tails := map[string]string{}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			tails[e.Name()] = proc.TailFile(filepath.Join(n.LogDir(), e.Name()), lines)
		}
	}
	return tails
}

// freePorts asks the kernel for n free TCP ports on host. Inside the node
// namespace nothing else binds, so the usual race is academic.
func freePorts(host string, n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("realnode: finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func httpGet(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
