// Package kubeclient is the edge agent's narrow Kubernetes client: typed
// access to the four resources an agent reads and writes — Nodes, Leases,
// Events and SelfSubjectReviews — and a Node informer, on client-go's rest
// and cache machinery with a scheme that holds only those types.
// Nodes and Events are types of its own (Node, Event), the fields the agent
// reads or writes with core/v1's JSON, spoken in JSON: importing
// k8s.io/api/core/v1 at all links every core type's codecs.
//
// Why it exists: k8s.io/client-go/kubernetes links a typed client for every
// API group, and its scheme registers every group's types, for an agent that
// touches four resources. On a 1–2 GiB edge box that runs the real workload,
// those mapped pages are the largest part of the agent's resident memory.
//
// It owns:
//   - Interface, the part of the API an agent may call, and its per-resource
//     interfaces, whose methods have the signatures of client-go's typed
//     clients (on the package's own Node and Event types);
//   - New, the real client from a rest.Config, sharing one HTTP client and
//     one client-side rate limiter across the four API groups, as a
//     clientset does;
//   - Node, NodeList and Event, and NewNodeInformer, a Node informer on
//     that client with its NodeLister;
//   - the scheme (Scheme) those four groups are decoded with.
//
// It must not import k8s.io/client-go/kubernetes, k8s.io/client-go/informers,
// k8s.io/api/core/v1, k8s.io/api/events/v1 or any package that registers
// every API group or every core type (internal/layering checks it): that is
// the point of it. Its types hold only what the agent reads, so the agent
// must change Nodes by patch, never by writing back a Node it read. Package
// wrap adapts a full clientset (the fake one in unit tests, the benchmarks'
// stand-ins) to Interface, converting through JSON; binaries that want to
// stay narrow must not import wrap.
package kubeclient
