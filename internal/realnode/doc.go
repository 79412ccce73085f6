// Package realnode runs one real Kubernetes node for tests: kubelet v1.36 with
// containerd 2.x, runc and the CNI bridge plugin, kube-proxy in nftables mode
// and kube-scheduler, attached to an internal/testcluster control plane in
// node-network mode. Tests that must run the shipped manifests unchanged (the
// hostNetwork agent DaemonSet, the webhook Deployment behind a Service,
// `kubectl exec`) use it where fake kubelets cannot do.
//
// A real node needs a non-loopback node IP, the "kubernetes" Service needs a
// non-loopback endpoint, and tests may use no address but loopback and those
// of namespaces they created. So a package that uses this one runs all its
// tests inside fresh network, mount and PID namespaces (RunInNamespace in
// TestMain): the apiserver advertises APIServerAddress and the node is
// NodeAddress, both on a veth of that namespace with no route out; pods get
// addresses from PodCIDR on a bridge in it. /etc, /opt, /run and /var are
// overlaid there, so paths the kubelet, containerd and CNI hard-code and a
// DaemonSet's hostPath write into the test's directory and never into the
// host's; the kubelet's global sysctls are shadowed the same way.
//
// Images come from tarballs (Node.ImportImage, ctr import); containerd's
// sandbox image is PauseImage, built from ./pause at Start. No registry is ever
// contacted: nothing resolves or routes out of the namespace.
//
// The node owns what it starts: Stop kills the components by process group,
// the containers through the kubelet's cgroup root, and the shims containerd
// leaves behind, removes its cgroups and unmounts everything under its
// directory; if the test binary dies instead, the kernel kills the whole PID
// namespace with its init.
//
// Binaries come from `make noderuntime` (containerd, its shim and ctr from
// hack/noderuntime; kubelet, kube-proxy, kubectl and kube-scheduler from
// hack/controlplane) plus Debian's runc and containernetworking-plugins.
//
// Usage:
//
//	func TestMain(m *testing.M) { os.Exit(realnode.RunInNamespace(m)) }
//
//	func TestX(t *testing.T) {
//		realnode.Require(t)
//		cluster := testcluster.StartT(t, testcluster.Options{AdvertiseAddress: realnode.APIServerAddress})
//		node := realnode.StartT(t, cluster, realnode.Options{Name: "edge-1", Labels: map[string]string{"topology.kubernetes.io/zone": "a"}})
//		if err := node.ImportImage(ctx, "bin/image/edgequorum.tar"); err != nil { ... }
//		// apply manifests with bin/kubectl --kubeconfig cluster.KubeconfigPath() ...
//	}
package realnode
