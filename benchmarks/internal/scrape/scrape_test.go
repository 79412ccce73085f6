package scrape

import (
	"math"
	"strings"
	"testing"
)

const text = `# TYPE edgequorum_transport_bytes_total counter
edgequorum_transport_bytes_total{direction="received"} 100
edgequorum_transport_bytes_total{direction="sent"} 250
# TYPE edgequorum_raft_rpcs_sent_total counter
edgequorum_raft_rpcs_sent_total{type="heartbeat"} 7
edgequorum_raft_rpcs_sent_total{type="append_entries"} 3
# TYPE edgequorum_raft_is_leader gauge
edgequorum_raft_is_leader 1
# TYPE edgequorum_raft_apply_duration_seconds histogram
edgequorum_raft_apply_duration_seconds_bucket{command="reports",le="0.001"} 4
edgequorum_raft_apply_duration_seconds_bucket{command="reports",le="0.002"} 9
edgequorum_raft_apply_duration_seconds_bucket{command="reports",le="+Inf"} 10
edgequorum_raft_apply_duration_seconds_sum{command="reports"} 0.02
edgequorum_raft_apply_duration_seconds_count{command="reports"} 10
`

func TestParseAndSum(t *testing.T) {
	s, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Sum("edgequorum_transport_bytes_total", map[string]string{"direction": "sent"}); got != 250 {
		t.Errorf("sent = %v", got)
	}
	if got := s.Sum("edgequorum_raft_rpcs_sent_total", nil); got != 10 {
		t.Errorf("rpcs = %v", got)
	}
	if got := s.Sum("edgequorum_raft_is_leader", nil); got != 1 {
		t.Errorf("is_leader = %v", got)
	}
	b := s.Buckets("edgequorum_raft_apply_duration_seconds", map[string]string{"command": "reports"})
	if len(b) != 3 || b[0].UpperBound != 0.001 || b[0].Count != 4 || !math.IsInf(b[2].UpperBound, 1) || b[2].Count != 10 {
		t.Errorf("buckets = %v", b)
	}
	if b := s.Buckets("edgequorum_raft_apply_duration_seconds", map[string]string{"command": "verdicts"}); len(b) != 0 {
		t.Errorf("unmatched buckets = %v", b)
	}
}
