// Package agent assembles the edgequorum agent that runs on every edge node: it
// reads its zone and member list from the Kubernetes API, probes its peers
// (probe), replicates and judges through the zone's Raft group (raftzone), writes
// verdicts while it leads (apiwriter), and serves its status over HTTP.
//
// It owns how the agent meets the cluster: this node's zone (its Node's zone
// label, cached in the data dir for a start during a cloud outage); the
// client-go adapters raftzone sees only as interfaces (the member list from a
// Node informer, which leaves out control-plane nodes and takes each
// member's address and registered node key from its Node; the genesis Lease,
// including taking over one whose founder is no node of the zone while no
// node of the zone holds the zone Lease; the prober's results as
// observations); the registration of this node's key on its own
// Node; the reload of the zone key file; the Go runtime's settings (memory
// limit, collector growth, parallelism); and the status server. The parts
// that meet the cluster are exported (parts.go) so that the benchmark's
// stand-ins join and see the zone exactly as an agent does.
//
// New builds every part from the parts made before it, and Agent.Run starts
// them and stops them all. Two links are made after construction: New hands
// the API writer the zone member once both exist, before anything runs
// (apiwriter.Writer.Follow and Writer.Gather), and the zone port learns its
// member, and starts listening, only when raftzone.Member.Run starts.
//
// It holds no protocol logic of its own: verdicts, voting, membership and
// trust rules live in raftzone and store, probe semantics in probe, and what
// and how the leader writes to the API in apiwriter. Of the API it writes
// only its own Node's node key and the genesis Lease; everything else it
// reads.
package agent
