package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// containerdConfig is containerd 2.x's config (format version 3): everything
// under the node directory, its own socket, the CRI plugin with runc (cgroupfs,
// as the kubelet's cgroupDriver), our CNI config and our pause image. The
// registry hosts stay untouched: the sandbox image is imported before the
// kubelet starts and pods use imported images IfNotPresent.
func (n *Node) containerdConfig() string {
	q := strconv.Quote
	return fmt.Sprintf(`version = 3
root = %s
state = %s
# Snapshotters that need cgo or special file systems, and NRI, which would
# listen on /var/run/nri: none has a use here, and each logs start-up errors.
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.nri.v1.nri",
]

[grpc]
  address = %s

[ttrpc]
  address = %s

[debug]
  level = "info"

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = %s
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %s

  [plugins.'io.containerd.cri.v1.runtime']
    # Pod network namespaces under the state dir, not /run/netns.
    netns_mounts_under_state_dir = true
    # The kubelet asks for oom_score_adj -998 for sandboxes and -997 for
    # Guaranteed pods; lowering it needs CAP_SYS_RESOURCE, which a test
    # sandbox may lack (runc then fails with "failed to update
    # /proc/self/oom_score_adj: Permission denied"). Clamp to containerd's own.
    restrict_oom_score_adj = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %s
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%s]
      conf_dir = %s
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    # The kubelet proxies exec, attach and port-forward streams here.
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`,
		q(n.path("containerd", "root")), q(n.path("containerd", "state")),
		q(n.containerdSocket()), q(n.containerdSocket()+".ttrpc"),
		q(n.snapshotter), q(PauseImage),
		q(n.runc), q(n.opts.CNIBinDir), q(n.path("cni", "net.d")))
}

func (n *Node) containerdSocket() string { return n.path("containerd", "containerd.sock") }

// cniConfig is a bridge with host-local IPAM over PodCIDR: the bridge is the
// pods' gateway in the node namespace, where the apiserver and the test
// process reach pod IPs directly. No masquerading: nothing leaves.
func (n *Node) cniConfig() ([]byte, error) {
	gw := PodCIDR.Addr().Next()
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "edgequorum-realnode",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      "eqcni0",
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR.String(), "gateway": gw.String()}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": n.path("cni", "ipam"),
				},
			},
		},
	}, "", "  ")
}

// kubeletConfig is the KubeletConfiguration. Notable choices:
//   - failCgroupV1=false: CI hosts still run cgroup v1, which 1.36 refuses by
//     default; cgroupfs driver under a cgroupRoot of the node's own.
//   - x509 client CA + webhook authn/authz: the apiserver's kubelet client
//     certificate (exec, logs) and delegated checks, as in production.
//   - eviction thresholds and image GC that never fire on a shared test host:
//     an evicted agent or a collected imported image would fail the test for
//     reasons of the host, not of the code.
//   - resolvConf "": pods get no host DNS servers, which they could not reach.
func (n *Node) kubeletConfig(port, healthzPort int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"kind":               "KubeletConfiguration",
		"apiVersion":         "kubelet.config.k8s.io/v1beta1",
		"address":            NodeAddress.String(),
		"port":               port,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        healthzPort,
		"tlsCertFile":        n.path("pki", "kubelet.crt"),
		"tlsPrivateKeyFile":  n.path("pki", "kubelet.key"),
		"rotateCertificates": false,
		"serverTLSBootstrap": false,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": n.path("pki", "ca.crt")},
		},
		"authorization":               map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint":    "unix://" + n.containerdSocket(),
		"cgroupDriver":                "cgroupfs",
		"cgroupRoot":                  n.cgroupRoot,
		"cgroupsPerQOS":               true,
		"enforceNodeAllocatable":      []string{"pods"},
		"failCgroupV1":                false,
		"failSwapOn":                  false,
		"staticPodPath":               "",
		"resolvConf":                  "",
		"protectKernelDefaults":       false,
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available":   "100Mi",
			"nodefs.available":   "1%",
			"nodefs.inodesFree":  "1%",
			"imagefs.available":  "1%",
			"imagefs.inodesFree": "1%",
		},
		"shutdownGracePeriod":             "0s",
		"shutdownGracePeriodCriticalPods": "0s",
	}, "", "  ")
}

// kubeProxyConfig runs kube-proxy in nftables mode. Its conntrack settings are
// zero so that it leaves the global nf_conntrack_max and the timeouts alone.
func (n *Node) kubeProxyConfig(healthzPort, metricsPort int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"kind":               "KubeProxyConfiguration",
		"apiVersion":         "kubeproxy.config.k8s.io/v1alpha1",
		"mode":               "nftables",
		"clientConnection":   map[string]any{"kubeconfig": n.path("kube-proxy.kubeconfig")},
		"hostnameOverride":   n.opts.Name,
		"healthzBindAddress": "127.0.0.1:" + strconv.Itoa(healthzPort),
		"metricsBindAddress": "127.0.0.1:" + strconv.Itoa(metricsPort),
		"clusterCIDR":        PodCIDR.String(),
		"conntrack": map[string]any{
			"maxPerCore":            0,
			"min":                   0,
			"tcpEstablishedTimeout": "0s",
			"tcpCloseWaitTimeout":   "0s",
		},
	}, "", "  ")
}

// nodeLabels renders labels for --node-labels in a stable order.
func nodeLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("realnode: writing %s: %w", path, err)
	}
	return nil
}
