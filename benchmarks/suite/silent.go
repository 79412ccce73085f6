package suite

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SilentTable is the nftables table a silent death installs and deletes: one
// rule pair that drops every packet to and from the dead node's address. It
// is the suite's own and apart from LossTable, so that a silent death during
// the lossy-link phase could never replace the loss rule, nor the reverse.
const SilentTable = "edgequorum_bench_silent"

// deathKind is how a node dies in a kill phase.
type deathKind int

const (
	// reset: the processes are SIGKILLed and the node's address stays up,
	// so the kernel answers every probe at once with a TCP reset.
	reset deathKind = iota
	// silent: the same kills behind a drop of every packet to and from the
	// node's address, as a powered-off node or a pulled cable: every probe
	// waits out its timeout.
	silent
)

func (k deathKind) String() string {
	if k == silent {
		return "silent"
	}
	return "reset"
}

// killKind is the kind of the i-th death of a kill phase (1-based): odd ones
// reset, even ones silent, so any phase of two or more deaths has both and
// an interrupted phase has about as many of each.
func killKind(i int) deathKind {
	if i%2 == 0 {
		return silent
	}
	return reset
}

// silentRuleset is the nft script that (re)creates SilentTable with a rule
// pair that drops every packet from and to victim. Every packet on loopback
// passes the output hook once, whichever process sends it, so hooking output
// drops both directions and nothing twice.
//
// The victim must be a zone node's loopback address: an address outside
// 127.0.0.0/8, or one of the control plane's (exclude: the apiserver's and
// etcd's), is refused, so the rule can never cut the control plane off. Like
// lossRuleset, the script adds and deletes the table first, so it replaces a
// stale one in the same transaction.
func silentRuleset(victim netip.Addr, exclude []netip.Addr) (string, error) {
	if _, err := checkZoneAddrs([]netip.Addr{victim}, exclude); err != nil {
		return "", fmt.Errorf("silent death: %w", err)
	}
	var b strings.Builder
	b.WriteString(dropTableScript(SilentTable))
	fmt.Fprintf(&b, "table ip %s {\n", SilentTable)
	b.WriteString("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
	fmt.Fprintf(&b, "\t\tip saddr %s counter drop comment \"from the dead node\"\n", victim)
	fmt.Fprintf(&b, "\t\tip daddr %s counter drop comment \"to the dead node\"\n", victim)
	b.WriteString("\t}\n}\n")
	return b.String(), nil
}

// clearSilent deletes a SilentTable left by an earlier run that was killed
// during a silent death: it would keep that node's address dark.
func clearSilent(ctx context.Context) error {
	nft, err := findNft()
	if err != nil {
		return fmt.Errorf("silent deaths: %w", err)
	}
	if _, err := runNft(ctx, nft, dropTableScript(SilentTable)); err != nil {
		return fmt.Errorf("delete stale table %s: %w", SilentTable, err)
	}
	return nil
}

// silentDrop is one installed silent death's rule.
type silentDrop struct {
	nft    string
	victim netip.Addr

	once    sync.Once
	err     error
	packets int64 // dropped, read just before removal
}

// silence starts a silent death's drop of every packet to and from victim;
// for a reset death it does nothing and returns a nil drop, whose methods do
// nothing either.
func (s *suite) silence(ctx context.Context, kind deathKind, victim netip.Addr) (*silentDrop, error) {
	if kind != silent {
		return nil, nil
	}
	script, err := silentRuleset(victim, s.controlPlaneAddrs())
	if err != nil {
		return nil, err
	}
	nft, err := findNft()
	if err != nil {
		return nil, fmt.Errorf("silent deaths: %w", err)
	}
	if _, err := runNft(ctx, nft, script); err != nil {
		return nil, fmt.Errorf("install table %s: %w", SilentTable, err)
	}
	return &silentDrop{nft: nft, victim: victim}, nil
}

// remove reads how many packets were dropped and deletes the table; only the
// first call does anything, so it can be both deferred and called before a
// revival. It takes no context: it runs on the way out of an interrupted
// run, whose context is already done.
func (d *silentDrop) remove() error {
	if d == nil {
		return nil
	}
	d.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, d.nft, "list", "table", "ip", SilentTable).Output(); err == nil {
			d.packets, _ = sumCounters(string(out))
		}
		if _, err := runNft(ctx, d.nft, dropTableScript(SilentTable)); err != nil {
			d.err = fmt.Errorf("delete table %s (%s stays dark): %w", SilentTable, d.victim, err)
		}
	})
	return d.err
}

// lift ends the silence before the victim is revived (its kubelet must reach
// the apiserver to register again) and notes in o the packets dropped.
func (d *silentDrop) lift(o *killOutcome) error {
	if d == nil {
		return nil
	}
	if err := d.remove(); err != nil {
		return err
	}
	o.dropped = d.packets
	return nil
}

// sumCounters adds every rule counter of an `nft list table` listing.
func sumCounters(listing string) (int64, error) {
	var sum int64
	for line := range strings.Lines(listing) {
		m := counterRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("counter in %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}
