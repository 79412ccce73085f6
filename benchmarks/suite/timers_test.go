package suite

import (
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/agent"
)

// TestAgentTimersKeepTheAgentsRules: the constants describe the agent's
// defaults, and a dilated zone's flags keep the rule that the quiet zone
// Lease renewal is no shorter than the busy one. Before, the renewal was
// scaled and the quiet one was not, so at ×16 every agent refused its flags
// and the size waited out its formation timeout.
func TestAgentTimersKeepTheAgentsRules(t *testing.T) {
	def := agent.DefaultConfig()
	if def.ZoneLeaseRenew != LeaseRenew || def.ZoneLeaseQuietRenew != LeaseQuietRenew {
		t.Fatalf("agent defaults renew %s, quiet %s; the suite says %s, %s",
			def.ZoneLeaseRenew, def.ZoneLeaseQuietRenew, LeaseRenew, LeaseQuietRenew)
	}
	for _, k := range []float64{2, 4, 16, 32} {
		flags := map[string]time.Duration{}
		for _, f := range agentTimers(k) {
			name, v, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
			if d, err := time.ParseDuration(v); ok && err == nil {
				flags[name] = d
			}
		}
		renew, quiet := flags["zone-lease-renew"], flags["zone-lease-quiet-renew"]
		if renew != scaled(LeaseRenew, k) || quiet < renew {
			t.Errorf("×%g: --zone-lease-renew %s, --zone-lease-quiet-renew %s; want %s and no less", k, renew, quiet, scaled(LeaseRenew, k))
		}
	}
}
