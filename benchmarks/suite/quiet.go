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

// settle waits before a steady window: settle, the pause that lets start-up
// work pass, and, with a webhook announced, until the zone is also quiet
// (waitQuiet, timeout), whichever comes later. It reports progress for
// size n's phase and returns the wait's error, if the zone did not turn
// quiet (the caller reports it and measures the zone all the same), or
// ctx's.
func (s *suite) settle(ctx context.Context, n int, phase string, members []member, settle, timeout, quietRenew time.Duration) (notQuiet, err error) {
	start := time.Now()
	if !s.cfg.NoWebhook {
		_, notQuiet = waitQuiet(ctx, members, timeout)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if notQuiet != nil {
			s.progress(n, phase, "%v; sampling it busy", notQuiet)
		} else {
			s.progress(n, phase, "zone quiet (the leader renews its Lease every %s) after %s of settling", quietRenew, time.Since(start).Round(time.Second))
		}
	}
	return notQuiet, sleep(ctx, settle-time.Since(start))
}
