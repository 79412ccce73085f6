package realnode

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/edgequorum/edgequorum/internal/testcluster"
)

// The node network inside the namespace RunInNamespace creates. The addresses
// sit on a veth interface (the kernel here has no dummy driver) whose peer is
// also in the namespace, so nothing routes beyond it. The ranges stay clear of
// testcluster's service range (10.0.0.0/24) and fake pod ranges (10.64.0.0/10).
var (
	// APIServerAddress is where the apiserver serves and advertises in
	// node-network mode: pass it as testcluster.Options.AdvertiseAddress.
	APIServerAddress = netip.MustParseAddr("10.254.0.1")
	// NodeAddress is the real node's InternalIP (kubelet --node-ip).
	NodeAddress = netip.MustParseAddr("10.254.0.2")
	// NodeNetwork holds both addresses.
	NodeNetwork = netip.MustParsePrefix("10.254.0.0/24")
	// PodCIDR is the CNI bridge's range: pod IPs come from here and the
	// namespace (apiserver, test process) reaches them over the bridge.
	PodCIDR = netip.MustParsePrefix("10.253.0.0/16")
)

// FakeNodeAddresses are further addresses on NodeInterface for the fake
// kubelets and host-process agents that share a zone with the real node
// (zonerun.Options.IPs): agents bind their outgoing connections to their
// advertise address, and the kernel does not carry traffic between a
// 127.0.0.0/8 address and the node network.
var FakeNodeAddresses = func() []netip.Addr {
	var out []netip.Addr
	for i := byte(11); i <= 18; i++ {
		out = append(out, netip.AddrFrom4([4]byte{10, 254, 0, i}))
	}
	return out
}()

// KubeletPort is where the real kubelet serves, the port every kubelet uses
// and the one edgequorum's kubelet probe dials.
const KubeletPort = 10250

// NodeInterface is the interface that holds the node addresses.
const NodeInterface = "eqnode0"

// Environment markers of the two re-executed stages (see RunInNamespace).
const (
	stageEnv   = "EDGEQUORUM_REALNODE_STAGE"
	stageInit  = "init"
	stageTests = "tests"
)

// shadowedDirs are overlaid with a writable layer under the namespace's work
// directory, so whatever the kubelet, containerd, runc or the CNI plugins write
// to paths they hard-code (/var/log/pods, /var/lib/cni, /run/containerd,
// /etc/cni, a DaemonSet's hostPath under /var/lib, ...) lands there and the
// host keeps its files. Everything below stays readable as it is on the host.
var shadowedDirs = []string{"/etc", "/opt", "/run", "/var"}

// kernelTunables are the sysctls the kubelet sets at start-up (its
// protectKernelDefaults=false behaviour). They are global, not per network
// namespace, so each gets a private file bind-mounted over it: the kubelet
// reads and writes the file, the host keeps its values.
var kernelTunables = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// unavailable says why this process is not in a node namespace; empty in the
// tests stage.
var unavailable = "realnode.RunInNamespace was not called from TestMain"

// InNamespace reports whether the process runs in the namespace RunInNamespace
// set up, where Start may run a node.
func InNamespace() bool { return os.Getenv(stageEnv) == stageTests && unavailable == "" }

// RunInNamespace runs the package's tests inside fresh network, mount and PID
// namespaces so that a real node can run without touching the host; call it
// from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(realnode.RunInNamespace(m)) }
//
// Why: the kubelet refuses a loopback node IP, the "kubernetes" Service cannot
// have loopback endpoints, and the tests may use no address outside loopback
// but those of a namespace they created. So the test binary re-executes itself
// twice. The first child is PID 1 of the new namespaces ("init"): it brings up
// lo and NodeInterface with APIServerAddress and NodeAddress, overlays
// shadowedDirs and the kubelet's kernel tunables, remounts /proc and /sys for
// the new namespaces, and runs the second child, which runs the tests. Init
// reaps the orphans a container runtime leaves (shims outlive containerd) and,
// when the tests end, kills whatever is left: the kernel tears down a PID
// namespace with its init, so not even a crashed test binary leaks a
// container. The outer process gets SIGKILL-on-parent-death on init, forwards
// SIGINT, SIGTERM and SIGQUIT (go test's timeout) and returns the tests' exit
// code; stdout and stderr are the tests' own.
//
// Without root the tests run in place, and Require skips them (or fails them
// when testcluster.RequireEnv is set).
func RunInNamespace(m *testing.M) int {
	switch os.Getenv(stageEnv) {
	case stageTests:
		unavailable = ""
		return m.Run()
	case stageInit:
		return runInit()
	}
	if os.Geteuid() != 0 {
		unavailable = "the real node needs root to create its network, mount and PID namespaces"
		return m.Run()
	}
	code, err := reexec(stageInit, syscall.CLONE_NEWNET|syscall.CLONE_NEWNS|syscall.CLONE_NEWPID)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
		return 1
	}
	return code
}

// reexec runs this test binary again with the same arguments and stdio, the
// stage marker set and the given clone flags, forwarding the signals go test
// and a user send; it returns the child's exit code.
func reexec(stage string, cloneflags uintptr) (int, error) {
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = withStage(stage)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags, Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("re-executing the tests in new namespaces: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	default:
		return 0, fmt.Errorf("waiting for the tests: %w", err)
	}
}

// withStage is the environment with the stage marker replaced: a duplicate
// would leave the child reading the first, stale one.
func withStage(stage string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, stageEnv+"=") {
			env = append(env, kv)
		}
	}
	return append(env, stageEnv+"="+stage)
}

// runInit is PID 1 of the node namespaces: set them up, run the tests as its
// child, reap every orphan meanwhile, then kill and reap whatever is left and
// undo its mounts.
func runInit() int {
	work, err := os.MkdirTemp("", "edgequorum-realnode-ns-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: namespace work dir: %v\n", err)
		return 1
	}
	mounts, err := setupNamespace(work)
	defer removeUnmounted(work)
	defer unmountAll(mounts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: setting up the node namespace: %v\n", err)
		return 1
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	// Not exec.Cmd: its Wait would race with the reaping loop below for the
	// child's exit status.
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: %v\n", err)
		return 1
	}
	proc, err := os.StartProcess(exe, os.Args, &os.ProcAttr{
		Env:   withStage(stageTests),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "realnode: starting the tests: %v\n", err)
		return 1
	}
	go func() {
		for s := range sigs {
			_ = proc.Signal(s)
		}
	}()
	code := 1
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "realnode: waiting for the tests: %v\n", err)
			break
		}
		if pid == proc.Pid {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
			break
		}
	}
	// Kill everything else in the PID namespace (signal -1 from its init
	// spares init itself) and reap it, so the mounts below are not busy.
	_ = syscall.Kill(-1, syscall.SIGKILL)
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); errors.Is(err, syscall.ECHILD) {
			break
		}
	}
	return code
}

// setupNamespace prepares the fresh namespaces; it returns the mount points it
// mounted, in mount order, even on error.
func setupNamespace(work string) (mounts []string, err error) {
	// Nothing mounted here may propagate to the host's mount namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making / private: %w", err)
	}
	for _, d := range []string{work} {
		for _, s := range shadowedDirs {
			if d == s || strings.HasPrefix(d, s+"/") {
				return nil, fmt.Errorf("work dir %s lies under %s, which the namespace overlays; set TMPDIR elsewhere", d, s)
			}
		}
	}
	// /proc for the new PID namespace: the kubelet and cAdvisor look up
	// processes by the PIDs they see.
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		return mounts, fmt.Errorf("mounting /proc: %w", err)
	}
	// Not in mounts: it goes with the namespace, and removeUnmounted reads
	// /proc/self/mountinfo after unmountAll.
	if err := remountSys(work); err != nil {
		return mounts, err
	}
	for _, dir := range shadowedDirs {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		name := strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_")
		upper, wd := filepath.Join(work, "shadow", name, "upper"), filepath.Join(work, "shadow", name, "work")
		for _, d := range []string{upper, wd} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return mounts, fmt.Errorf("shadowing %s: %w", dir, err)
			}
		}
		if err := syscall.Mount("overlay", dir, "overlay", 0, "lowerdir="+dir+",upperdir="+upper+",workdir="+wd); err != nil {
			return mounts, fmt.Errorf("overlaying %s: %w", dir, err)
		}
		mounts = append(mounts, dir)
	}
	for _, t := range kernelTunables {
		target := "/proc/sys/" + t
		v, err := os.ReadFile(target)
		if err != nil {
			continue // not on this kernel
		}
		f := filepath.Join(work, "sysctl", strings.ReplaceAll(t, "/", "."))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return mounts, fmt.Errorf("sysctl shadow: %w", err)
		}
		if err := os.WriteFile(f, v, 0o644); err != nil {
			return mounts, fmt.Errorf("sysctl shadow: %w", err)
		}
		if err := syscall.Mount(f, target, "", syscall.MS_BIND, ""); err != nil {
			return mounts, fmt.Errorf("shadowing %s: %w", target, err)
		}
		mounts = append(mounts, target)
	}
	return mounts, setupNetwork()
}

// remountSys mounts a sysfs of the new network namespace on /sys, so that
// /sys/class/net lists its interfaces rather than the host's, and moves the
// cgroup mounts back on top of it.
func remountSys(work string) error {
	const cg = "/sys/fs/cgroup"
	aside := filepath.Join(work, "cgroup")
	if err := os.MkdirAll(aside, 0o755); err != nil {
		return fmt.Errorf("remounting /sys: %w", err)
	}
	if err := syscall.Mount(cg, aside, "", syscall.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving %s aside: %w", cg, err)
	}
	if err := syscall.Mount("sysfs", "/sys", "sysfs", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		// Put the cgroup hierarchies back: left in the work dir, its
		// removal would rmdir every empty cgroup on the host.
		if mvErr := syscall.Mount(aside, cg, "", syscall.MS_MOVE, ""); mvErr != nil {
			return fmt.Errorf("mounting /sys: %w (and moving %s back: %v)", err, cg, mvErr)
		}
		return fmt.Errorf("mounting /sys: %w", err)
	}
	if err := syscall.Mount(aside, cg, "", syscall.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving %s back: %w", cg, err)
	}
	return nil
}

// setupNetwork brings up lo and NodeInterface, and routes the Service range
// onto NodeInterface: a hostNetwork pod (the agent) dials the kubernetes
// Service's ClusterIP, which kube-proxy rewrites only once the kernel found a
// route for it. No default route exists: a packet for anything but loopback,
// the node network, the Service range or the pod bridge finds no way out.
func setupNetwork() error {
	peer := NodeInterface + "-peer"
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", NodeInterface, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "up"},
		{"link", "set", NodeInterface, "up"},
		{"addr", "add", netip.PrefixFrom(APIServerAddress, NodeNetwork.Bits()).String(), "dev", NodeInterface},
		{"addr", "add", netip.PrefixFrom(NodeAddress, NodeNetwork.Bits()).String(), "dev", NodeInterface},
		{"route", "add", testcluster.ServiceClusterIPRange, "dev", NodeInterface, "src", NodeAddress.String()},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	for _, a := range FakeNodeAddresses {
		args := []string{"addr", "add", netip.PrefixFrom(a, NodeNetwork.Bits()).String(), "dev", NodeInterface}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// removeUnmounted removes dir unless something is still mounted below it:
// os.RemoveAll crosses mount points, and below a bind mount or a cgroup
// hierarchy it would delete the host's files or cgroups.
func removeUnmounted(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("not removing %s: %w", dir, err)
	}
	if len(mps) > 0 {
		return fmt.Errorf("not removing %s: still mounted below it: %v", dir, mps)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// unmountAll lazily unmounts mounts in reverse order.
func unmountAll(mounts []string) {
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}
