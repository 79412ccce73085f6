package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/agent"
	"github.com/edgequorum/edgequorum/internal/kubeclient/wrap"
	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zonekeys"
	"github.com/edgequorum/edgequorum/zoneport"
)

// TestStolenTokenCannotStallAnotherZoneOrBloatANode: with the agent token root
// on a node of zone edge-b holds, a thief claims the genesis Lease and the zone
// Lease of zone edge-a before any of its nodes has an agent, and tries to store
// 200 KB on a cloud Node. Zone edge-a still forms (its first member takes the
// squatted genesis over) and writes its verdicts; the annotation is refused by
// the apiserver.
func TestStolenTokenCannotStallAnotherZoneOrBloatANode(t *testing.T) {
	testcluster.RequireBinaries(t)
	c := testcluster.StartT(t, testcluster.Options{})
	ctx := context.Background()
	if err := zonerun.InstallAgentRBAC(ctx, c); err != nil {
		t.Fatal(err)
	}
	const thiefNode = "edge-b-1"
	if _, err := c.AddNode(ctx, testcluster.NodeOptions{Name: thiefNode, Zone: "edge-b"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := zonerun.AgentConfig(ctx, c, thiefNode)
	if err != nil {
		t.Fatal(err)
	}
	thief, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leases := thief.CoordinationV1().Leases(zone.DefaultLeaseNamespace)
	for _, name := range []string{zone.GenesisLeaseName("edge-a"), zone.LeaseName("edge-a")} {
		poll.Until(t, time.Minute, "the thief creates "+name, func() (bool, string) {
			_, err := leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"edgequorum.io/cluster-id": uuid.NewString()}},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(thiefNode), AcquireTime: ptr.To(metav1.NowMicro())},
			}, metav1.CreateOptions{})
			return err == nil, fmt.Sprint(err) // the policies may still be loading
		})
	}
	// The node policy is in force once it refuses the thief a label (a new
	// value each try: an unchanged one is no change to refuse).
	try := 0
	poll.Until(t, time.Minute, "the agent's node policy in force", func() (bool, string) {
		try++
		_, err := thief.CoreV1().Nodes().Patch(ctx, thiefNode, types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{"example.com/probe":"x%d"}}}`, try)), metav1.PatchOptions{})
		return err != nil && strings.Contains(err.Error(), "edgequorum-agent-node-writes"), fmt.Sprint(err)
	})
	cloud := testcluster.DefaultCloudNodeName
	bulk := fmt.Sprintf(`{"metadata":{"annotations":{"edgequorum.io/bulk":%q}}}`, strings.Repeat("x", 200_000))
	_, err = thief.CoreV1().Nodes().Patch(ctx, cloud, types.MergePatchType, []byte(bulk), metav1.PatchOptions{})
	if err == nil || !strings.Contains(err.Error(), "edgequorum-agent-node-writes") {
		t.Errorf("the thief storing 200 KB on the cloud node %s: %v, want refused by the agent's node policy", cloud, err)
	}
	if n, err := c.Client().CoreV1().Nodes().Get(ctx, cloud, metav1.GetOptions{}); err != nil || n.Annotations["edgequorum.io/bulk"] != "" {
		t.Errorf("cloud node %s carries the thief's annotation (%v)", cloud, err)
	}

	z := startZoneOn(t, c, zonerun.Options{Zone: "edge-a", Nodes: 3})
	took := waitHealthy(t, c.Client(), 2*time.Minute, names(z))
	t.Logf("zone edge-a formed despite the squatted genesis and wrote its verdicts in %s", took.Round(100*time.Millisecond))
	g, err := c.Client().CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(ctx, zone.GenesisLeaseName("edge-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(g.Spec.HolderIdentity, ""); !strings.HasPrefix(holder, "edge-a-") {
		t.Errorf("the genesis Lease of edge-a is held by %q, want a node of edge-a", holder)
	}
}

// raftThief speaks Raft to a zone as a stolen member: its node key, data dir,
// zone key and address, through the zone port (zoneport.Port.DialRaft).
type raftThief struct {
	t        *testing.T
	port     *zoneport.Port
	serverID string
	addr     string
}

// stealMember copies a's data dir (serverID, when set, replaces its server ID)
// and builds the zone port a thief on a's box would have. a must be stopped.
func stealMember(t *testing.T, z *zonerun.Zone, a *zonerun.Agent, members zoneport.MemberSource, serverID string) *raftThief {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"node.key", "server-id"} {
		b, err := os.ReadFile(filepath.Join(a.DataDir, f))
		if err != nil {
			t.Fatalf("the stolen data dir: %v", err)
		}
		if f == "server-id" && serverID != "" {
			b = []byte(serverID + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := os.Open(z.KeyFile())
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	ring, err := zonekeys.Parse(keys)
	if err != nil {
		t.Fatal(err)
	}
	cfg := raftzone.DefaultConfig()
	cfg.Node, cfg.Zone, cfg.DataDir, cfg.Keys = a.Name, "edge-a", dir, ring
	cfg.AdvertiseAddress, cfg.PeerPort = a.IP, zonerun.PeerPort
	port, err := raftzone.NewPort(cfg, members)
	if err != nil {
		t.Fatal(err)
	}
	id, err := os.ReadFile(filepath.Join(dir, "server-id"))
	if err != nil {
		t.Fatal(err)
	}
	return &raftThief{t: t, port: port, serverID: strings.TrimSpace(string(id)), addr: net.JoinHostPort(a.IP, strconv.Itoa(zonerun.PeerPort))}
}

func (th *raftThief) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(th.serverID), Addr: []byte(th.addr)}
}

// raftHandle encodes as raft's NetworkTransport does.
var raftHandle = func() *codec.MsgpackHandle { h := &codec.MsgpackHandle{}; h.TimeNotBuiltin = true; return h }()

// rpc sends one RPC of type typ (raft's rpcAppendEntries = 0, rpcRequestVote
// = 1, rpcInstallSnapshot = 2) to a and decodes its answer; an error means the
// member closed the connection instead of answering.
func (th *raftThief) rpc(a *zonerun.Agent, typ byte, req, resp any, trailer []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := th.port.DialRaft(ctx, net.JoinHostPort(a.IP, strconv.Itoa(zonerun.PeerPort)))
	if err != nil {
		return err
	}
	defer c.Close()
	var buf bytes.Buffer
	buf.WriteByte(typ)
	if err := codec.NewEncoder(&buf, raftHandle).Encode(req); err != nil {
		th.t.Fatal(err)
	}
	buf.Write(trailer)
	if _, err := c.Write(buf.Bytes()); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	dec := codec.NewDecoder(bufio.NewReader(c), raftHandle)
	var rpcErr string
	if err := dec.Decode(&rpcErr); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	if rpcErr != "" {
		return fmt.Errorf("raft: %s", rpcErr)
	}
	return dec.Decode(resp)
}

// TestStolenFollowerCannotTakeTheZone replays, against agents on the real
// control plane, what a client holding one follower's node key, data dir, zone
// key and address did to a live zone: AppendEntries and InstallSnapshot at
// term+1 under a fresh server ID and under its own. No member follows it and no
// replica's state is replaced. It then forces an election with the transfer
// flag — the one path left to it, counted by every member — and as leader
// commits its own key pinned for every other member and "healthy" for a node
// the zone judged dead: no replica applies either, the dead node stays
// unhealthy on the API, and the zone carries on once the thief goes quiet.
func TestStolenFollowerCannotTakeTheZone(t *testing.T) {
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-a", Nodes: 5})
	ctx := context.Background()
	client := c.Client()
	waitHealthy(t, client, 2*time.Minute, names(z))
	members := agent.NewMemberList(wrap.Clientset(client), zone.DefaultZoneLabel, "edge-a", zonerun.PeerPort)
	mctx, stopMembers := context.WithCancel(ctx)
	defer stopMembers()
	go members.Run(mctx)
	poll.UntilTrue(t, 30*time.Second, "the thief's member list", func() bool { _, ok := members.Candidates(); return ok })

	leader, err := z.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stolen, dead *zonerun.Agent
	for _, a := range z.Agents() {
		switch {
		case a == leader:
		case stolen == nil:
			stolen = a
		case dead == nil:
			dead = a
		}
	}
	dead.Kill()
	dead.Kubelet.Kill()
	waitStates(t, client, 2*time.Minute, map[string]zone.State{dead.Name: zone.Unhealthy})
	stolen.Kill() // the thief speaks from the box now
	var honest []*zonerun.Agent
	for _, a := range z.Agents() {
		if a != stolen && a != dead {
			honest = append(honest, a)
		}
	}
	status := func(a *zonerun.Agent) raftzone.Status {
		t.Helper()
		var st raftzone.Status
		poll.Until(t, 30*time.Second, a.Name+"'s status", func() (bool, string) {
			var err error
			st, err = a.Status(ctx)
			return err == nil, fmt.Sprint(err)
		})
		return st
	}
	var leaderNode string
	var term uint64
	poll.Until(t, time.Minute, "the honest members agree on a leader", func() (bool, string) {
		leaderNode, term = "", 0
		for _, a := range honest {
			st := status(a)
			if leaderNode != "" && st.Leader != leaderNode || st.Leader == "" || st.Leader == stolen.Name {
				return false, fmt.Sprintf("%s follows %q", a.Name, st.Leader)
			}
			leaderNode, term = st.Leader, max(term, st.Term)
		}
		return true, ""
	})

	for _, tc := range []struct{ name, serverID string }{{"under a fresh server ID", uuid.NewString()}, {"under its own server ID", ""}} {
		th := stealMember(t, z, stolen, members, tc.serverID)
		for round := range 5 {
			for _, a := range honest {
				st := status(a)
				ae := &raft.AppendEntriesRequest{RPCHeader: th.header(), Term: term + 1,
					PrevLogEntry: st.LastIndex, PrevLogTerm: term, LeaderCommitIndex: st.CommitIndex}
				var resp raft.AppendEntriesResponse
				if err := th.rpc(a, 0, ae, &resp, nil); err == nil {
					t.Fatalf("%s, round %d: %s answered the thief's AppendEntries: %+v", tc.name, round, a.Name, resp)
				}
				snap := &raft.InstallSnapshotRequest{RPCHeader: th.header(), SnapshotVersion: raft.SnapshotVersionMax, Term: term + 1,
					LastLogIndex: st.LastIndex + 100, LastLogTerm: term,
					Configuration:      raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(th.serverID), Address: raft.ServerAddress(th.addr)}}}),
					ConfigurationIndex: st.LastIndex + 100, Size: 4}
				var sresp raft.InstallSnapshotResponse
				if err := th.rpc(a, 2, snap, &sresp, []byte("junk")); err == nil {
					t.Fatalf("%s, round %d: %s answered the thief's InstallSnapshot: %+v", tc.name, round, a.Name, sresp)
				}
			}
			for _, a := range honest {
				if st := status(a); st.Leader != leaderNode || st.Term != term {
					t.Fatalf("%s, round %d: %s follows %q in term %d, want %s in %d", tc.name, round, a.Name, st.Leader, st.Term, leaderNode, term)
				}
			}
		}
	}

	// The one path left: force an election, lying about the log, and win.
	th := stealMember(t, z, stolen, members, "")
	replica, err := store.Open(filepath.Join(stolen.DataDir, "state.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := replica.Members()
	replica.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, forged, _ := ed25519.GenerateKey(nil)
	for i := range ms {
		if ms[i].Node != stolen.Name {
			ms[i].PublicKey = zone.EncodeNodeKey(forged.Public().(ed25519.PublicKey))
		}
	}
	memberSet, err := store.EncodeMemberSet(store.MemberSet{Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	elected := term + 1
	granted := 0
	for _, a := range honest {
		st := status(a)
		var resp raft.RequestVoteResponse
		if err := th.rpc(a, 1, &raft.RequestVoteRequest{RPCHeader: th.header(), Term: elected, LastLogIndex: st.LastIndex + 1000,
			LastLogTerm: term, LeadershipTransfer: true}, &resp, nil); err == nil && resp.Granted {
			granted++
		}
	}
	if granted < 2 {
		t.Fatalf("the thief won %d votes; the test needs it elected", granted)
	}
	verdicts, err := store.EncodeVerdictBatch(store.VerdictBatch{Basis: 1 << 40, VoteTimeout: 10 * time.Second,
		Verdicts: []zone.Verdict{{Node: dead.Name, State: zone.Healthy, Pros: 3, Members: len(ms), Term: elected, Leader: stolen.Name, DecidedAt: time.Now().UTC()}}})
	if err != nil {
		t.Fatal(err)
	}
	took := 0
	for _, a := range honest {
		st := status(a)
		ae := &raft.AppendEntriesRequest{RPCHeader: th.header(), Term: elected,
			PrevLogEntry: st.LastIndex, PrevLogTerm: term, LeaderCommitIndex: st.LastIndex + 2,
			Entries: []*raft.Log{
				{Index: st.LastIndex + 1, Term: elected, Type: raft.LogCommand, Data: memberSet},
				{Index: st.LastIndex + 2, Term: elected, Type: raft.LogCommand, Data: verdicts},
			}}
		var resp raft.AppendEntriesResponse
		if err := th.rpc(a, 0, ae, &resp, nil); err == nil && resp.Success {
			took++
		}
	}
	if took < 2 {
		t.Fatalf("%d members took the elected thief's entries; the test needs some", took)
	}
	poll.Until(t, 30*time.Second, "the members that took them refuse both", func() (bool, string) {
		refused := 0
		for _, a := range honest {
			st := status(a)
			if st.Held[store.HoldUnregistered] > 0 && st.Held[store.RefuseVerdictStale]+st.Held[store.RefuseVerdictUnsupported] > 0 {
				refused++
			}
		}
		return refused >= took, fmt.Sprintf("%d of %d", refused, took)
	})
	for _, a := range honest {
		st := status(a)
		forced := false
		for _, f := range st.ForcedElections {
			forced = forced || f.Node == stolen.Name
		}
		if !forced {
			t.Errorf("%s's status does not show %s's forced election: %+v", a.Name, stolen.Name, st.ForcedElections)
		}
		for _, v := range st.Verdicts {
			if v.Node == dead.Name && v.State != zone.Unhealthy {
				t.Errorf("%s holds %s as %s", a.Name, dead.Name, v.State)
			}
		}
	}
	// The thief goes quiet: the zone elects one of its own, and the dead node
	// stays unhealthy on the API.
	poll.Until(t, time.Minute, "an honest leader", func() (bool, string) {
		st := status(honest[0])
		for _, a := range honest {
			if st.Leader == a.Name {
				return true, ""
			}
		}
		return false, "leader " + st.Leader
	})
	waitStates(t, client, 2*time.Minute, map[string]zone.State{dead.Name: zone.Unhealthy})
	for _, a := range honest {
		if ann, _ := annotation(t, client, a.Name); ann.State != zone.Healthy {
			t.Errorf("honest member %s flipped to %s", a.Name, ann.State)
		}
	}
}
