package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// TestWholeZoneCutAtAnyGrace: the webhook tells a zone cut off as a whole from
// its Leases alone, so a webhook at its default flags protects the zone
// whatever grace period the controller manager runs with. Before, the webhook
// waited 40 s of silence from every kubelet: under a 20 s grace the nodes went
// Unknown, were tainted and their pods evicted first. The cut comes while the
// zone renews its Lease quietly, as a healthy zone does most of the time:
// its last renewal may be tens of seconds old, still valid, when the link
// goes.
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
			waitZoneLeaseQuiet(t, client, name, 3*time.Minute)

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

// waitZoneLeaseQuiet waits until zoneName's leader renews its zone Lease
// quietly: once it has read that every webhook replica reads the quiet
// format, and no member needs the cloud's attention.
func waitZoneLeaseQuiet(t *testing.T, client kubernetes.Interface, zoneName string, timeout time.Duration) {
	t.Helper()
	took := poll.Until(t, timeout, "a quiet zone Lease renewal", func() (bool, string) {
		l, err := client.CoordinationV1().Leases(zone.DefaultLeaseNamespace).Get(context.Background(), zone.LeaseName(zoneName), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		f := l.Annotations[zone.LeaseFormatAnnotation]
		return f == zone.FormatLevel(zone.LeaseQuietFormat), fmt.Sprintf("format %q, duration %ds", f, ptr.Deref(l.Spec.LeaseDurationSeconds, 0))
	})
	t.Logf("zone %s renews its Lease quietly (after %s)", zoneName, took.Round(time.Second))
}
