package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
)

// TestWholeZoneCutAtAnyGrace: the webhook tells a zone cut off as a whole from
// its Leases alone, so a webhook at its default flags protects the zone
// whatever grace period the controller manager runs with. Before, the webhook
// waited 40 s of silence from every kubelet: under a 20 s grace the nodes went
// Unknown, were tainted and their pods evicted first.
func TestWholeZoneCutAtAnyGrace(t *testing.T) {
	for _, grace := range []time.Duration{20 * time.Second, 50 * time.Second} {
		t.Run(fmt.Sprintf("grace %s", grace), func(t *testing.T) {
			name := fmt.Sprintf("edge-g%d", int(grace.Seconds()))
			c, z := startZone(t, testcluster.Options{NodeMonitorGracePeriod: grace}, zonerun.Options{Zone: name, Nodes: 3})
			client := c.Client()
			all := names(z)
			waitHealthy(t, client, 2*time.Minute, all)

			// No flags but the ones every installation sets.
			startWebhookWith(t, c, z)
			web := deployApp(t, client, "web", all)
			taints := watchTaints(t, client, all)

			z.CutCloud()
			took := waitAllUnknown(t, client, all, grace+2*time.Minute)
			t.Logf("every node Unknown %s after the cut (grace %s)", took.Round(time.Second), grace)
			// Two toleration periods: without the cut-off rule every pod
			// would be evicted by now.
			holdZoneProtected(t, client, web, taints, all, 2*tolerationSeconds*time.Second)
			if err := z.ReconnectCloud(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
