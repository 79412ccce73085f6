package agent

import (
	"context"

	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/edgequorum/edgequorum/apiwriter"
	"github.com/edgequorum/edgequorum/internal/atomicfile"
	"github.com/edgequorum/edgequorum/internal/kubeclient"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zone/zonek8s"
	"github.com/edgequorum/edgequorum/zoneport"
)

// controlPlaneLabel marks nodes that never join a zone: they are the cloud.
const controlPlaneLabel = "node-role.kubernetes.io/control-plane"

// zoneFile caches the zone in the data dir so an agent restarted during a cloud
// outage still knows which zone it belongs to.
const zoneFile = "zone"

// discoverZone reads this node's zone label, retrying until ctx ends. When the
// apiserver cannot be reached, the zone cached from an earlier run is used.
func discoverZone(ctx context.Context, client kubeclient.Interface, node, label, dataDir string, log func(msg string, args ...any)) (string, error) {
	cachePath := filepath.Join(dataDir, zoneFile)
	for attempt := 0; ; attempt++ {
		n, err := client.Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			z := n.Labels[label]
			if z == "" {
				return "", fmt.Errorf("node %s has no %s label: edgequorum needs every agent's node in a zone (see --zone-label)", node, label)
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return "", fmt.Errorf("--data-dir %s: %w", dataDir, err)
			}
			// Atomically: a crash mid-write must not leave a torn zone
			// name for the next start during a cloud outage.
			if err := atomicfile.Write(cachePath, []byte(z+"\n"), 0o600); err != nil {
				return "", fmt.Errorf("cache zone in --data-dir: %w", err)
			}
			return z, nil
		}
		if b, rerr := os.ReadFile(cachePath); rerr == nil {
			z := strings.TrimSpace(string(b))
			log("apiserver unavailable; using the zone cached in the data dir", "zone", z, "err", err)
			return z, nil
		}
		log("cannot read this node's zone yet; retrying", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("read zone of node %s: %w", node, err)
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 10*time.Second)):
		}
	}
}

// nodeMembers is the zone's member list from a Node informer restricted to the
// zone's label value.
type nodeMembers struct {
	informer cache.Controller
	lister   kubeclient.NodeLister
	peerPort int
	// onNode, set before run (restoreVerdicts), sees every Node the informer
	// delivers and its periodic resync.
	onNode atomic.Pointer[func(*kubeclient.Node)]
}

func newNodeMembers(client kubeclient.Interface, label, zoneName string, peerPort int) *nodeMembers {
	m := &nodeMembers{peerPort: peerPort}
	deliver := func(obj any) {
		if n, ok := obj.(*kubeclient.Node); ok {
			if f := m.onNode.Load(); f != nil {
				(*f)(n)
			}
		}
	}
	// Keep only what the member list and the leader need: a Node's managed
	// fields and conditions are most of what its slim type decodes (its
	// images are not decoded at all), multiplied by the zone's size on every
	// member. Of the conditions, Ready tells the leader which members the
	// cloud cannot hear (the quorum's evidence is wanted for them), and
	// EdgeQuorum whether a Node shows its verdict.
	slim := func(obj any) (any, error) {
		if n, ok := obj.(*kubeclient.Node); ok {
			n.ManagedFields = nil
			n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c zonek8s.NodeCondition) bool {
				return c.Type != kubeclient.NodeReady && c.Type != zonek8s.ConditionType
			})
		}
		return obj, nil
	}
	m.informer, m.lister = kubeclient.NewNodeInformer(client, labels.Set{label: zoneName}.String(), 10*time.Minute,
		cache.ResourceEventHandlerFuncs{AddFunc: deliver, UpdateFunc: func(_, obj any) { deliver(obj) }}, slim)
	return m
}

func (m *nodeMembers) run(ctx context.Context) { m.informer.RunWithContext(ctx) }

// zoneVerdicts shows the API writer the zone's Nodes and committed verdicts
// (apiwriter.NodeVerdicts).
type zoneVerdicts struct {
	members *nodeMembers
	srv     *raftzone.Member
}

func (z zoneVerdicts) ZoneNodes() []*kubeclient.Node {
	nodes, err := z.members.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	return nodes
}

func (z zoneVerdicts) CommittedVerdict(node string) (zone.Verdict, bool) {
	return z.srv.CommittedVerdict(node)
}

// restoreVerdicts has the leader check every zone Node the informer delivers,
// and its periodic resync, against the committed verdict: a Node that was
// registered anew or lost its annotation gets it written again. The writer
// also reads the zone's Nodes to vouch, in the zone Lease, for the verdicts
// its predecessors signed.
func (m *nodeMembers) restoreVerdicts(srv *raftzone.Member, w *apiwriter.Writer) {
	w.Follow(zoneVerdicts{members: m, srv: srv})
	w.Gather(srv)
	check := func(n *kubeclient.Node) {
		if v, ok := srv.CommittedVerdict(n.Name); ok {
			w.Restore(n, v)
		}
	}
	m.onNode.Store(&check)
}

// Candidates implements zoneport.MemberSource. Until the informer has synced it
// says so, and raftzone then changes no membership.
func (m *nodeMembers) Candidates() ([]zoneport.Candidate, bool) {
	if !m.informer.HasSynced() {
		return nil, false
	}
	nodes, err := m.lister.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	out := make([]zoneport.Candidate, 0, len(nodes))
	for _, n := range nodes {
		if _, cp := n.Labels[controlPlaneLabel]; cp {
			continue
		}
		ip := internalIP(n)
		if ip == "" {
			continue
		}
		c := zoneport.Candidate{Node: n.Name, ProbeAddress: ip,
			RaftAddress: net.JoinHostPort(ip, strconv.Itoa(m.peerPort)),
			KubeletPort: kubeletPort(n)}
		// The node's own agent registered this key (nodekey-policy.yaml lets
		// nobody else write it). A missing or unparsable annotation leaves the
		// key nil: the node has no registered key, and no guessed one. Nothing
		// is logged here: Candidates runs on every zone-port handshake and
		// reconcile, and the zone port's refusal of that node names it.
		if s, ok := n.Annotations[zone.NodeKeyAnnotation]; ok {
			if pub, err := zone.ParseNodeKey(s); err == nil {
				c.PublicKey = pub
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b zoneport.Candidate) int { return strings.Compare(a.Node, b.Node) })
	return out, true
}

func internalIP(n *kubeclient.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == kubeclient.NodeInternalIP && net.ParseIP(a.Address) != nil {
			return a.Address
		}
	}
	return ""
}

// kubeletPort is the kubelet port n publishes (status.daemonEndpoints), or 0
// when it publishes none that a TCP connection could use.
func kubeletPort(n *kubeclient.Node) int {
	if p := int(n.Status.DaemonEndpoints.KubeletEndpoint.Port); p > 0 && p <= 65535 {
		return p
	}
	return 0
}
