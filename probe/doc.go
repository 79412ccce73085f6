// Package probe is how an edge node agent judges its zone peers: kubelet-style
// probes (TCP connect, HTTP/HTTPS GET, gRPC health, the peer's kubelet port and the
// peer agent's own /healthz), run periodically with kubelet's worker semantics, and
// combined per peer into a weighted score that is compared with a score line.
//
// It owns:
//   - the probe spec format operators write on the command line (ParseSpec,
//     SpecList) and its defaults;
//   - the probers, one per kind, and the Prober interface a caller can implement,
//     and the dialer their connections use (Dialer: each lives for one probe,
//     so it sets no TCP keep-alive);
//   - the worker rule that a probe's state flips only after SuccessThreshold or
//     FailureThreshold consecutive identical results, and stays Unknown until one
//     of them is first met, and that an agent probe which misses its timeout
//     fails at once but is not given up until the next one is due, so a slow
//     peer does not also cost a new authenticated connection each period;
//   - the Checker that turns per-probe states into a score and an OK/not-OK
//     judgement, and refuses weights that do not add up;
//   - the confirmation beside the thresholds (Confirm): a failed probe, or one
//     with no answer at half its timeout, opens a few fresh connections to a
//     port that has answered on that peer, and a peer none of them reaches is
//     judged failed at once; and the second SYN at half its timeout that
//     every TCP connection of a probe or a confirmation sends when the first
//     has no answer (hedgedDial);
//   - the Manager that runs one worker per (peer, probe) — a timer between
//     probes, and a goroutine only while one runs; its first probe in a
//     random slot of the zone's grid (internal/slots), so that the probes of
//     one slot start together — lets peers come and go,
//     names in each probe's context the peer it is for (internal/peerctx, so
//     that the agent probe's client can check who answered) and the kubelet
//     port that peer's Node publishes, and signals the agent when a peer's
//     judgement changes;
//   - the probes' metrics, and Clock, the small clock interface it schedules
//     with (k8s.io/utils/clock's clocks fit it through ClockOf).
//
// It must not import Kubernetes, raftzone or the zone's keys
// (internal/layering checks it), nor decide anything about the zone: it says
// what this node sees, and raftzone decides what the zone believes. The agent
// probe's authenticated client is handed in (Config.AgentClient, or a whole
// Config.AgentProber); probe never makes one, and never confirms through the
// zone port. Probe timeouts, and the suspicion at half of one, are real time
// because the kernel enforces them;
// everything else that depends on time (scheduling, latency) reads the
// injected Clock so tests can drive it.
package probe
