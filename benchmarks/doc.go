// Package benchmarks is edgequorum's zone-size benchmark suite: the runner
// (cmd/bench, driving package suite) measures detection, failover, traffic,
// apiserver writes, CPU and memory at zone sizes 3 to 129 against a model of
// SuperEdge's edge-health (package baseline), on the real control plane. This
// package itself holds only micro-benchmarks of the per-round functions whose
// cost grows with the zone. See README.md.
//
// Nothing here is imported by the product; the suite may import anything.
package benchmarks
