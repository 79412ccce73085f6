package suite

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgequorum/edgequorum/benchmarks/internal/nfqueue"
)

// Jitter needs a packet held and released late. This kernel family has no
// netem qdisc on every host and nftables' queue statement is not always
// built; the xt NFQUEUE target of iptables-legacy is, so SoakJitter sends the
// zone's packets to a netfilter queue of its own (nfqueue) from a chain of
// its own in the legacy mangle table, which nothing else of the suite uses.
const (
	// SoakJitterChain is the soak's iptables-legacy chain (mangle table),
	// jumped to from OUTPUT while a jitter zone runs.
	SoakJitterChain = "EQ_SOAK_JITTER"
	// soakQueueBase is the first netfilter queue number; jitter zone i
	// uses soakQueueBase+i.
	soakQueueBase = 47200
)

// findIptablesLegacy finds the legacy iptables binary.
func findIptablesLegacy() (string, error) {
	path, err := exec.LookPath("iptables-legacy")
	if err != nil {
		return "", fmt.Errorf("a jitter zone needs iptables-legacy (Debian package iptables, see hack/node-packages.sh) and root: %w", err)
	}
	return path, nil
}

// jitterRules are the iptables-legacy argument lists that create
// SoakJitterChain: every packet between two nodes of a jitter zone goes to
// that zone's queue, and the chain is jumped to from OUTPUT. --queue-bypass
// lets packets through undelayed, never dropped, if no queue is bound. Every
// address must be a zone node's loopback address, never the control plane's.
func jitterRules(zones []*soakZone, exclude []netip.Addr) ([][]string, error) {
	rules := [][]string{{"-N", SoakJitterChain}}
	for i, sz := range zones {
		elems, err := checkZoneAddrs(sz.ips, exclude)
		if err != nil {
			return nil, fmt.Errorf("zone %s: %w", sz.name, err)
		}
		list := strings.Join(elems, ",")
		rules = append(rules, []string{"-A", SoakJitterChain, "-s", list, "-d", list,
			"-j", "NFQUEUE", "--queue-num", strconv.Itoa(soakQueueBase + i), "--queue-bypass"})
	}
	return append(rules, []string{"-A", "OUTPUT", "-j", SoakJitterChain}), nil
}

// jitterCleanup is the argument lists that remove SoakJitterChain, each of
// which may fail when there is nothing to remove.
var jitterCleanup = [][]string{{"-D", "OUTPUT", "-j", SoakJitterChain}, {"-F", SoakJitterChain}, {"-X", SoakJitterChain}}

// runIptables runs iptables-legacy on the mangle table, waiting for its lock.
func runIptables(ctx context.Context, ipt string, args []string) error {
	full := append([]string{"-w", "-t", "mangle"}, args...)
	if out, err := exec.CommandContext(ctx, ipt, full...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-legacy %s: %w: %s", strings.Join(full, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// removeJitterChain removes SoakJitterChain, a stale one included: OUTPUT may
// hold the jump more than once after an interrupted run.
func removeJitterChain(ctx context.Context, ipt string) {
	for range 8 {
		if runIptables(ctx, ipt, jitterCleanup[0]) != nil {
			break
		}
	}
	for _, args := range jitterCleanup[1:] {
		_ = runIptables(ctx, ipt, args)
	}
}

// jitterLinks is the running jitter of a soak: one queue per jitter zone and
// the chain that feeds them.
type jitterLinks struct {
	ipt    string
	zones  []*soakZone
	queues []*nfqueue.Queue
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error // by zone, each written by its queue's goroutine
	once   sync.Once
}

// startJitter binds a queue per jitter zone, then installs the chain that
// feeds them. No jitter zone, nothing to do (and no iptables needed).
func startJitter(ctx context.Context, zones []*soakZone, exclude []netip.Addr, seed uint64) (*jitterLinks, error) {
	var jz []*soakZone
	for _, sz := range zones {
		if sz.spec.Kind == SoakJitter {
			jz = append(jz, sz)
		}
	}
	if len(jz) == 0 {
		return nil, nil
	}
	ipt, err := findIptablesLegacy()
	if err != nil {
		return nil, err
	}
	rules, err := jitterRules(jz, exclude)
	if err != nil {
		return nil, err
	}
	removeJitterChain(ctx, ipt)
	qctx, cancel := context.WithCancel(context.Background())
	j := &jitterLinks{ipt: ipt, zones: jz, cancel: cancel, errs: make([]error, len(jz))}
	for i, sz := range jz {
		q, err := nfqueue.Open(uint16(soakQueueBase+i), sz.spec.Jitter, seed+uint64(i))
		if err != nil {
			j.stop()
			return nil, fmt.Errorf("zone %s: %w", sz.name, err)
		}
		j.queues = append(j.queues, q)
		j.wg.Go(func() {
			if err := q.Run(qctx); err != nil {
				j.errs[i] = fmt.Errorf("zone %s: %w", sz.name, err)
			}
		})
	}
	for _, args := range rules {
		if err := runIptables(ctx, ipt, args); err != nil {
			j.stop()
			return nil, err
		}
	}
	return j, nil
}

// stop removes the chain, then releases every held packet, unbinds the
// queues and records what each delayed; once, and safe on nil.
func (j *jitterLinks) stop() error {
	if j == nil {
		return nil
	}
	j.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		removeJitterChain(ctx, j.ipt)
		j.cancel()
		j.wg.Wait()
		for i, q := range j.queues {
			s := q.Stats()
			res := &j.zones[i].res
			res.Delayed, res.DelayMean, res.DelayMax = s.Packets, s.Mean(), s.MaxDelay
			if s.Overruns > 0 {
				res.Errors = append(res.Errors, fmt.Sprintf("jitter queue overran %d times (packets passed undelayed or were lost)", s.Overruns))
			}
			_ = q.Close()
		}
	})
	return errors.Join(j.errs...)
}
