// Package kubeclient is the edge agent's narrow Kubernetes client: typed
// access to the four resources an agent reads and writes — Nodes, Leases,
// Events and SelfSubjectReviews — and a Node informer, on client-go's rest,
// gentype and cache machinery with a scheme that holds only those types.
//
// Why it exists: k8s.io/client-go/kubernetes links a typed client for every
// API group, and its scheme registers every group's types, for an agent that
// touches four resources. On a 1–2 GiB edge box that runs the real workload,
// those mapped pages are the largest part of the agent's resident memory.
//
// It owns:
//   - Interface, the part of the API an agent may call, and its per-resource
//     interfaces, whose methods have the signatures of client-go's typed
//     clients so that either fits;
//   - New, the real client from a rest.Config, sharing one HTTP client and
//     one client-side rate limiter across the four API groups, as a
//     clientset does;
//   - NewNodeInformer, a Node informer on that client;
//   - the scheme (Scheme) those four groups are decoded with.
//
// It must not import k8s.io/client-go/kubernetes, k8s.io/client-go/informers
// or any package that registers every API group (internal/layering checks
// it): that is the point of it. Package wrap adapts a full clientset (the
// fake one in unit tests, the benchmarks' stand-ins) to Interface; binaries
// that want to stay narrow must not import wrap.
package kubeclient
