// Package testcluster runs a real Kubernetes control plane for tests, benchmarks and
// `edgequorum demo`: etcd, kube-apiserver and kube-controller-manager as child
// processes on loopback ports (and kube-scheduler with Options.Scheduler), plus
// fake kubelets that register Nodes, renew their Leases and "run" the pods bound
// to them.
//
// It exists so that integration tests see the decisions of the real node lifecycle,
// taint-eviction and EndpointSlice controllers instead of a fake's guess at them:
// when a fake kubelet is cut from the cloud, the real KCM marks its Node
// Ready=Unknown, taints it and flips its endpoints, exactly as in production.
//
// The binaries come from `make controlplane` (see hack/controlplane); the package
// never builds or downloads anything. Its core API takes no *testing.T so that
// benchmarks and the demo command can use it; StartT and RequireBinaries are the
// thin test wrappers.
//
// The package owns every process it starts: Stop kills them by process group, and
// the kernel kills them (Pdeathsig) if the owning process dies first. It must not
// touch anything outside its directory and the loopback addresses it picked.
package testcluster
