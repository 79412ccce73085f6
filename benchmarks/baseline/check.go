package baseline

import (
	"context"
	"net"
	"strconv"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// pingPlugin is SuperEdge's ping check: a TCP connect to one port, tried up to
// Tries times, scoring 100×weight when any try connects.
type pingPlugin struct {
	cfg   Ping
	local net.IP
}

const pingPluginName = "PingCheck"

func (p pingPlugin) check(ctx context.Context, ip string) float64 {
	d := net.Dialer{Timeout: p.cfg.Timeout, LocalAddr: &net.TCPAddr{IP: p.local}}
	addr := net.JoinHostPort(ip, strconv.Itoa(p.cfg.Port))
	for range p.cfg.Tries {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return 100 * p.cfg.Weight
		}
	}
	return 0
}

// checker runs ExecuteCheck: every plugin against every listed IP, self
// included, then the score line turns scores into the local row.
type checker struct {
	cfg   Config
	state *state
	ping  pingPlugin
}

func (c *checker) run(ctx context.Context) {
	ips := c.state.checkedIPs()
	workqueue.ParallelizeUntil(ctx, 16, len(ips), func(i int) {
		c.state.setScore(ips[i], pingPluginName, c.ping.check(ctx, ips[i]))
	})
	now := time.Now()
	for ip, total := range c.state.totals() {
		c.state.setLocal(c.cfg.LocalIP, ip, total >= c.cfg.ScoreLine, now)
	}
}
