package suite

import (
	"context"
	"fmt"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/scrape"
)

// quietMetric is 1 on a leader whose last zone Lease renewal was quiet.
const quietMetric = "edgequorum_apiwriter_zone_lease_quiet"

// QuietTimeout bounds waitQuiet in real time (scaled by a size's
// time-dilation factor): a zone that formed renews busily for six renewals
// after the last that had to be (35 s at the 5 s renewal), and its first
// quiet renewal comes at the next period after that.
const QuietTimeout = 90 * time.Second

// waitQuiet waits until a member leads and its last zone Lease renewal was
// quiet: the steady state of a zone in a shipped cloud, whose leader renews
// every 40 s, not the busy renewals every 5 s that follow formation, a
// leadership change or a member in need. It returns how long it waited, and
// an error naming the leader's state if timeout passed first. Without a
// webhook announced (Config.NoWebhook) no zone turns quiet and the caller
// does not wait.
func waitQuiet(ctx context.Context, members []member, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	state := "no member reported " + isLeaderMetric + "=1"
	for {
		for _, m := range members {
			s, err := scrape.Fetch(ctx, m.metricsURL)
			if err != nil || s.Sum(isLeaderMetric, nil) != 1 {
				continue
			}
			if s.Sum(quietMetric, nil) == 1 {
				return time.Since(start), nil
			}
			state = fmt.Sprintf("leader %s renews busily (%s=0)", m.name, quietMetric)
			break
		}
		select {
		case <-ctx.Done():
			return time.Since(start), fmt.Errorf("zone not quiet after %s: %s", timeout, state)
		case <-tick.C:
		}
	}
}
