package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Defaults of Confirm.
const (
	// DefaultConfirmConnects is how many fresh connections confirm a
	// suspicion. At 5 % packet loss one connection to a live peer fails
	// about one time in ten (a lost SYN or SYN-ACK: Linux resends the SYN
	// after 1 s, when the connection has timed out); five all failing,
	// about one in 10⁵ (DESIGN.md, verdict rule).
	DefaultConfirmConnects = 5
	// DefaultConfirmGap is the time between their starts: apart, so that
	// one short burst of loss does not drop them all, and close, so that a
	// dead peer is confirmed about one timeout after its first failed probe.
	DefaultConfirmGap = 50 * time.Millisecond
)

// Confirm is how a suspicion of a target is confirmed or refuted at once,
// beside the thresholds. A probe that fails, or has had no answer for half its
// timeout, raises it. The connections go to the kubelet probe's port (else
// to that of the first probe that is not an agent probe), and only once that
// probe has succeeded on the target: a port that never answered — a firewall
// that drops — would make every suspicion look like silence.
//
// Why: a dead box and a lossy link look alike to one probe, and the kubelet's
// rule tells them apart by waiting — FailureThreshold failures a period
// apart, seconds. A few fresh TCP connections to the target's kubelet port,
// opened at once, tell them apart sooner: if the box's kernel answers any of
// them, with a SYN-ACK or a reset, the box is there and its probes' failures
// follow the thresholds as before (a stalled or restarting process keeps its
// kubelet-like grace); if none gets any answer within the timeout — each
// resending its SYN at half of it, so that a moment of darkness does not
// fail them all at once — the box is silent, and the target is judged failed
// at once, until one of its probes that started after the confirmation
// succeeds. Only silence confirms: a
// refused connection means the box is up and a process is down, which the
// thresholds judge.
type Confirm struct {
	// Connects is how many fresh connections one confirmation opens. Zero
	// means DefaultConfirmConnects; a negative value turns confirmation off
	// (the thresholds alone judge, as a kubelet would).
	Connects int
	// Gap is the time between the connections' starts. Zero means
	// DefaultConfirmGap.
	Gap time.Duration
	// Timeout bounds each connection. Zero means the kubelet probe's
	// timeout (DefaultTimeout unless a kubelet spec sets one).
	Timeout time.Duration
}

// Off reports whether confirmation is turned off.
func (c Confirm) Off() bool { return c.Connects < 0 }

func (c Confirm) validate() error {
	switch {
	case c.Gap < 0:
		return fmt.Errorf("gap %s is negative", c.Gap)
	case c.Timeout < 0:
		return fmt.Errorf("timeout %s is negative", c.Timeout)
	case c.Connects > MaxConfirmConnects:
		return fmt.Errorf("connects %d exceeds %d", c.Connects, MaxConfirmConnects)
	}
	return nil
}

// MaxConfirmConnects bounds what one confirmation sends to a peer.
const MaxConfirmConnects = 16

// withDefaults fills the zero fields; kubelet is the kubelet spec, if any.
func (c Confirm) withDefaults(specs []Spec) Confirm {
	if c.Connects == 0 {
		c.Connects = DefaultConfirmConnects
	}
	if c.Gap == 0 {
		c.Gap = DefaultConfirmGap
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
		for _, s := range specs {
			if s.Kind == KindKubelet {
				c.Timeout = s.withDefaults().Timeout
				break
			}
		}
	}
	return c
}

// confirmSpec picks the probe whose port confirmations connect to: the
// kubelet probe, else the first other probe that opens a TCP connection of its
// own; -1 when there is none (only agent probes, which travel on the zone
// port's authenticated connections). A Manager without one does not confirm.
func confirmSpec(specs []Spec) int {
	for i, s := range specs {
		if s.Kind == KindKubelet {
			return i
		}
	}
	for i, s := range specs {
		if s.Kind != KindAgent {
			return i
		}
	}
	return -1
}

// confirmPort is the port confirmations connect to on t: that of spec, for a
// kubelet probe without a port of its own the one t's Node publishes.
func confirmPort(spec Spec, t Target) int {
	if spec.Kind == KindKubelet && spec.Port == 0 && t.KubeletPort > 0 {
		return t.KubeletPort
	}
	return spec.withDefaults().Port
}

// Outcomes of a confirmation, the label values of
// edgequorum_probe_confirmations_total.
const (
	confirmSilent   = "silent"   // no connection got any answer
	confirmAnswered = "answered" // the box answered one (connected or refused)
	// confirmInconclusive: some connection failed for a reason that says
	// nothing about the peer (a local error); no verdict from it.
	confirmInconclusive = "inconclusive"
)

// connectOutcome sorts one confirmation connection's error.
func connectOutcome(err error) string {
	var ne net.Error
	switch {
	case err == nil, errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET):
		return confirmAnswered
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return confirmSilent
	}
	return confirmInconclusive
}

// confirm runs one confirmation of t and returns its outcome: silent only if
// every connection went unanswered. It stops early when one is answered, and
// returns "" when ctx ends first (the target was removed or the Manager
// stopped): no outcome.
func (m *Manager) confirm(ctx context.Context, t *target) string {
	c := m.confirmCfg
	address := net.JoinHostPort(t.Host, strconv.Itoa(confirmPort(m.cfg.Specs[m.confirmIdx], t.Target)))
	ctx, cancel := context.WithCancel(ctx)
	outcomes := make(chan string, c.Connects)
	var wg sync.WaitGroup
	defer func() {
		// An answer ends the confirmation: the connections still trying
		// stop now instead of at their timeout.
		cancel()
		wg.Wait()
	}()
	launched := 0
	launch := func() {
		launched++
		wg.Go(func() {
			dctx, dcancel := context.WithTimeout(ctx, c.Timeout)
			defer dcancel()
			// Hedged as the TCP probe is: a lost SYN is resent at half the
			// timeout, so one connection is silent only when the box was dark
			// at both of its SYNs, not at one instant.
			conn, err := hedgedDial(dctx, m.dial, address)
			if err == nil {
				_ = conn.Close()
			}
			if ctx.Err() != nil {
				outcomes <- ""
				return
			}
			outcomes <- connectOutcome(err)
		})
	}
	launch()
	var gap <-chan time.Time
	var timer Timer
	if launched < c.Connects {
		timer = m.cfg.Clock.NewTimer(c.Gap)
		defer func() { timer.Stop() }()
		gap = timer.C()
	}
	result, got := confirmSilent, 0
	for got < c.Connects {
		select {
		case <-ctx.Done():
			return ""
		case <-gap:
			launch()
			if launched < c.Connects {
				timer.Reset(c.Gap)
			} else {
				gap = nil
			}
		case o := <-outcomes:
			got++
			switch o {
			case "":
				return ""
			case confirmAnswered:
				return confirmAnswered // cancel stops the rest
			case confirmInconclusive:
				result = confirmInconclusive
			}
		}
	}
	return result
}

// dial opens a confirmation connection the way probes open theirs.
func (m *Manager) dial(ctx context.Context, network, address string) (net.Conn, error) {
	if m.cfg.Dial != nil {
		return m.cfg.Dial(ctx, network, address)
	}
	return Dialer(nil).DialContext(ctx, network, address)
}
