package baseline

import (
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Detail is one checker's opinion of one checked IP. The JSON field names are
// SuperEdge's, so the exchange carries the same bytes.
type Detail struct {
	Normal bool
	Time   time.Time
}

// Row is a checker's opinions, by checked IP.
type Row map[string]Detail

// state is what one daemon knows: the zone's nodes as of the last node-list
// refresh, the plugin scores per checked IP, and every checker's row. One mutex
// guards it all; the loops hold it only to copy or replace.
type state struct {
	mu     sync.RWMutex
	nodes  []*corev1.Node
	scores map[string]map[string]float64 // checked IP → plugin → weighted score
	rows   map[string]Row                // checker IP → its row
}

func newState() *state {
	return &state{scores: map[string]map[string]float64{}, rows: map[string]Row{}}
}

// setNodes installs a refreshed node list and drops the scores and rows of IPs
// that left it, as SyncNodeList does. The rows of nodes still listed stay, even
// when the node is dead: only their age retires their votes.
func (s *state) setNodes(localIP string, nodes []*corev1.Node) {
	ips := map[string]bool{}
	for _, n := range nodes {
		if ip := internalIP(n); ip != "" {
			ips[ip] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes = nodes
	for ip := range ips {
		if s.scores[ip] == nil {
			s.scores[ip] = map[string]float64{}
		}
	}
	for ip := range s.scores {
		if !ips[ip] {
			delete(s.scores, ip)
		}
	}
	for ip := range s.rows {
		if !ips[ip] {
			delete(s.rows[localIP], ip)
			delete(s.rows, ip)
		}
	}
}

// checkedIPs lists the IPs to check, self included.
func (s *state) checkedIPs() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.scores))
	for ip := range s.scores {
		out = append(out, ip)
	}
	return out
}

func (s *state) setScore(ip, plugin string, score float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.scores[ip]; m != nil {
		m[plugin] = score
	}
}

// totals sums each checked IP's plugin scores.
func (s *state) totals() map[string]float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]float64, len(s.scores))
	for ip, m := range s.scores {
		var sum float64
		for _, v := range m {
			sum += v
		}
		out[ip] = sum
	}
	return out
}

// setLocal records this node's own result, stamped now.
func (s *state) setLocal(localIP, ip string, normal bool, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows[localIP] == nil {
		s.rows[localIP] = Row{}
	}
	s.rows[localIP][ip] = Detail{Normal: normal, Time: now}
}

// setRow replaces a peer's whole row with what it sent, stamped with our clock
// because the two clocks need not agree.
func (s *state) setRow(source string, row Row, now time.Time) {
	stamped := make(Row, len(row))
	for ip, d := range row {
		d.Time = now
		stamped[ip] = d
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[source] = stamped
}

func (s *state) localRow(localIP string) Row {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.rows[localIP])
}

func (s *state) allRows() map[string]Row {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Row, len(s.rows))
	for ip, r := range s.rows {
		out[ip] = maps.Clone(r)
	}
	return out
}

// nodeByAddr returns the listed node with that InternalIP. It is the copy of
// the last node-list refresh, which is what SuperEdge's vote writes back.
func (s *state) nodeByAddr(ip string) *corev1.Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, n := range s.nodes {
		if internalIP(n) == ip {
			return n
		}
	}
	return nil
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
