package suite

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/zone"
)

// LossTable is the nftables table the lossy-link phase installs and deletes.
// Its name is the suite's own, so that nothing else's ruleset is touched: the
// phase only ever adds, reads and deletes this table.
const LossTable = "edgequorum_bench_loss"

// lossLink is the installed loss rule of one phase, removed by remove.
type lossLink struct {
	nft string
}

// lossRuleset is the nft script that (re)creates LossTable with one rule:
// drop percent % of the packets whose source and destination are both among
// nodes, chosen at random per packet (numgen random). The rule hooks output
// only: on loopback every packet passes output once and input once, so
// hooking both would drop about twice the rate asked for.
//
// Every address must be a zone node's loopback address: an address outside
// 127.0.0.0/8, or one of the control plane's (exclude: the apiserver's and
// etcd's), is refused, so no typo can drop traffic of anything else. The
// script starts by adding and deleting the table, so it replaces a stale one
// of the same name in the same transaction.
func lossRuleset(nodes, exclude []netip.Addr, percent int) (string, error) {
	if percent < 1 || percent > 99 {
		return "", fmt.Errorf("loss of %d %%: want 1 to 99", percent)
	}
	if len(nodes) < 2 {
		return "", fmt.Errorf("loss between %d nodes: want at least 2", len(nodes))
	}
	elems, err := checkZoneAddrs(nodes, exclude)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(dropTableScript(LossTable))
	fmt.Fprintf(&b, "table ip %s {\n", LossTable)
	fmt.Fprintf(&b, "\tset zone_nodes {\n\t\ttype ipv4_addr\n\t\telements = { %s }\n\t}\n", strings.Join(elems, ", "))
	b.WriteString("\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
	b.WriteString("\t\tip saddr @zone_nodes ip daddr @zone_nodes counter comment \"zone\"\n")
	fmt.Fprintf(&b, "\t\tip saddr @zone_nodes ip daddr @zone_nodes numgen random mod 100 < %d counter drop comment \"lost\"\n", percent)
	b.WriteString("\t}\n}\n")
	return b.String(), nil
}

// checkZoneAddrs returns the distinct addresses of nodes as nft set
// elements, refusing any outside 127.0.0.0/8 or among exclude (the control
// plane's), so that no typo can drop traffic of anything else.
func checkZoneAddrs(nodes, exclude []netip.Addr) ([]string, error) {
	loopback := netip.MustParsePrefix("127.0.0.0/8")
	var elems []string
	for _, a := range nodes {
		switch {
		case !a.Is4() || !loopback.Contains(a):
			return nil, fmt.Errorf("node address %s is not in %s: the benchmark only drops loopback traffic", a, loopback)
		case slices.Contains(exclude, a):
			return nil, fmt.Errorf("node address %s is the control plane's: its traffic must never be dropped", a)
		}
		if !slices.Contains(elems, a.String()) {
			elems = append(elems, a.String())
		}
	}
	return elems, nil
}

// dropTableScript deletes an nft table whether or not it exists: adding an
// existing table is a no-op, so the delete always has one to remove.
func dropTableScript(table string) string {
	return fmt.Sprintf("add table ip %s\ndelete table ip %s\n", table, table)
}

// runNftList lists one of the suite's tables, counters included.
func runNftList(ctx context.Context, nft, table string) (string, error) {
	out, err := exec.CommandContext(ctx, nft, "list", "table", "ip", table).Output()
	if err != nil {
		return "", fmt.Errorf("nft list table %s: %w", table, err)
	}
	return string(out), nil
}

// findNft locates the nft binary (hack/node-packages.sh installs it).
func findNft() (string, error) {
	path, err := exec.LookPath("nft")
	if err != nil {
		return "", fmt.Errorf("the lossy-link phase needs nft (Debian package nftables, see hack/node-packages.sh) and root: %w", err)
	}
	return path, nil
}

// runNft feeds a script to nft -f -.
func runNft(ctx context.Context, nft, script string) (string, error) {
	cmd := exec.CommandContext(ctx, nft, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nft -f: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// clearLoss deletes a LossTable left by an earlier run that was killed
// before it could clean up.
func clearLoss(ctx context.Context) error {
	nft, err := findNft()
	if err != nil {
		return err
	}
	if _, err := runNft(ctx, nft, dropTableScript(LossTable)); err != nil {
		return fmt.Errorf("delete stale table %s: %w", LossTable, err)
	}
	return nil
}

// startLoss installs the loss rule between nodes.
func startLoss(ctx context.Context, nodes, exclude []netip.Addr, percent int) (*lossLink, error) {
	script, err := lossRuleset(nodes, exclude, percent)
	if err != nil {
		return nil, err
	}
	nft, err := findNft()
	if err != nil {
		return nil, err
	}
	if _, err := runNft(ctx, nft, script); err != nil {
		return nil, fmt.Errorf("install table %s: %w", LossTable, err)
	}
	return &lossLink{nft: nft}, nil
}

// counters reads the packets the rule saw and dropped.
func (l *lossLink) counters(ctx context.Context) (seen, dropped int64, err error) {
	out, err := runNftList(ctx, l.nft, LossTable)
	if err != nil {
		return 0, 0, err
	}
	return parseLossCounters(out)
}

var counterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+`)

// parseLossCounters reads the two rule counters from `nft list table`.
func parseLossCounters(listing string) (seen, dropped int64, err error) {
	found := 0
	for line := range strings.Lines(listing) {
		m := counterRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		v, perr := strconv.ParseInt(m[1], 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("counter in %q: %w", line, perr)
		}
		found++
		if strings.Contains(line, " drop") {
			dropped = v
		} else {
			seen = v
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("table %s lists %d counters, want 2", LossTable, found)
	}
	return seen, dropped, nil
}

// remove deletes the table. It takes no context: it runs on the way out of
// an interrupted run, whose context is already done.
func (l *lossLink) remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := runNft(ctx, l.nft, dropTableScript(LossTable)); err != nil {
		return fmt.Errorf("delete table %s: %w", LossTable, err)
	}
	return nil
}

// lossTarget is what the lossy-link phase needs of one system's formed zone.
type lossTarget struct {
	label   string
	k       float64
	timeout time.Duration
	names   []string
	ips     []netip.Addr
	w       *watcher
	// kill kills one node other than last, waits for its unhealthy
	// annotation and revives it.
	kill func(ctx context.Context, last string) killOutcome
}

// killOutcome is one kill and revival, on the wall clock.
type killOutcome struct {
	victim string
	kind   deathKind
	// killed is the death: for a silent one, just before its drop rule
	// was installed, so the milliseconds nft takes count against the
	// system, never for it.
	killed time.Time
	// dropped is how many packets to or from a silently dead node were
	// dropped.
	dropped int64
	// detect is death → unhealthy annotation; detectErr when it never came.
	detect    time.Duration
	detectErr error
	// commit is death → committed verdict (edgequorum only; 0 when unknown).
	commit time.Duration
	// healthy is when the revived node was annotated healthy again; recovery
	// is restart → that annotation.
	healthy  time.Time
	recovery time.Duration
	// err is a failure that ends the phase (the node could not be revived).
	err error
}

// droppedNote is the end of a kill's progress line: the packets a silent
// death dropped, the evidence that it was silent.
func (o killOutcome) droppedNote() string {
	if o.kind != silent {
		return ""
	}
	return fmt.Sprintf(" (%d packets to or from it dropped)", o.dropped)
}

// lossy runs every loss level of the phase on one system's formed zone: with
// the loss on, a window with every node alive, then LossKills kills and
// revivals. Any non-healthy verdict for a node that was alive is false.
func (s *suite) lossy(ctx context.Context, n int, t lossTarget) []LossFigures {
	var out []LossFigures
	for _, pct := range s.cfg.LossPercents {
		if ctx.Err() != nil {
			break
		}
		f := s.lossLevel(ctx, n, t, pct)
		f.normalize(t.k)
		out = append(out, f)
	}
	return out
}

// deadSpan is a killed node's time from death to its healthy annotation.
type deadSpan struct {
	node     string
	from, to time.Time
}

func (s *suite) lossLevel(ctx context.Context, n int, t lossTarget, pct int) LossFigures {
	f := LossFigures{}
	fail := func(err error) LossFigures {
		f.Errors = append(f.Errors, fmt.Sprintf("%d %% loss: %v", pct, err))
		s.progress(n, t.label, "lossy links %d %%: %v", pct, err)
		return f
	}
	if err := t.w.waitAll(ctx, t.timeout, t.names, zone.Healthy); err != nil {
		return fail(fmt.Errorf("zone not healthy before the loss: %w (not healthy: %v)", err, t.w.notHealthy(t.names)))
	}
	link, err := startLoss(ctx, t.ips, s.controlPlaneAddrs(), pct)
	if err != nil {
		return fail(err)
	}
	f.Ran = true
	start := time.Now()
	removed := false
	remove := func() {
		if removed {
			return
		}
		removed = true
		if seen, dropped, err := link.counters(context.Background()); err == nil {
			f.Packets, f.Dropped = seen, dropped
		} else {
			f.Errors = append(f.Errors, fmt.Sprintf("%d %% loss: %v", pct, err))
		}
		if err := link.remove(); err != nil {
			f.Errors = append(f.Errors, fmt.Sprintf("%d %% loss: %v", pct, err))
		}
	}
	defer remove()
	window := scaled(s.cfg.LossWindow, t.k)
	s.progress(n, t.label, "lossy links: dropping %d %% of packets between the %d nodes; %s with every node alive, then %d %s",
		pct, n, window, s.cfg.LossKills, plural(s.cfg.LossKills, "kill", "kills"))
	err = sleep(ctx, window)
	var dead []deadSpan
	var last string
	for i := 1; i <= s.cfg.LossKills && err == nil; i++ {
		o := t.kill(ctx, last)
		last = o.victim
		if o.victim != "" {
			end := o.healthy
			if end.IsZero() {
				end = time.Now().Add(time.Hour) // never came back: none of its verdicts is false
			}
			dead = append(dead, deadSpan{node: o.victim, from: o.killed, to: end})
		}
		detectS := "—"
		if o.detectErr != nil {
			f.Errors = append(f.Errors, fmt.Sprintf("%d %% loss: kill %d (%s): %v", pct, i, o.victim, o.detectErr))
		} else if o.victim != "" {
			f.DetectAnnot = append(f.DetectAnnot, o.detect.Seconds())
			detectS = fmt.Sprintf("%.2fs", o.detect.Seconds()/t.k)
		}
		if o.err != nil {
			err = o.err
			break
		}
		f.Recovery = append(f.Recovery, o.recovery.Seconds())
		s.progress(n, t.label, "lossy links %d %%: kill %d/%d %s annotated unhealthy %s; healthy again %.2fs after restart",
			pct, i, s.cfg.LossKills, o.victim, detectS, o.recovery.Seconds()/t.k)
	}
	lossEnd := time.Now()
	remove()
	if err != nil {
		return fail(err)
	}
	// A verdict in flight when the loss ended was caused by it.
	if err := sleep(ctx, scaled(VotePeriod, t.k)+2*time.Second); err != nil {
		return fail(err)
	}
	f.Seconds = lossEnd.Sub(start).Seconds()
	f.NodeSeconds = float64(len(t.names)) * f.Seconds
	for _, d := range dead {
		to := d.to
		if to.After(lossEnd) {
			to = lossEnd
		}
		f.NodeSeconds -= to.Sub(d.from).Seconds()
	}
	f.FalseVerdicts, f.FalseNodes = falseVerdictsAmong(t.w.transitions(start, time.Now()), dead)
	s.progress(n, t.label, "lossy links %d %% over: %d false verdicts %v in %.0f node-seconds; %d of %d zone packets dropped",
		pct, f.FalseVerdicts, f.FalseNodes, f.NodeSeconds/t.k, f.Dropped, f.Packets)
	return f
}

// falseVerdictsAmong counts the non-healthy verdicts for nodes that were
// alive: every one but a killed node's between its death and its healthy
// annotation.
func falseVerdictsAmong(ts []transition, dead []deadSpan) (int, []string) {
	count := 0
	var nodes []string
	for _, t := range ts {
		if t.To == zone.Healthy {
			continue
		}
		if slices.ContainsFunc(dead, func(d deadSpan) bool { return d.node == t.Node && !t.At.Before(d.from) && !t.At.After(d.to) }) {
			continue
		}
		count++
		if !slices.Contains(nodes, t.Node) {
			nodes = append(nodes, t.Node)
		}
	}
	return count, nodes
}

// controlPlaneAddrs are the addresses whose traffic the loss rule must never
// touch: 127.0.0.1, where etcd and kube-controller-manager listen, and the
// apiserver's.
func (s *suite) controlPlaneAddrs() []netip.Addr {
	out := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	if ap, err := netip.ParseAddrPort(strings.TrimPrefix(s.cluster.APIServerURL(), "https://")); err == nil {
		out = append(out, ap.Addr())
	}
	return out
}

// lossAt reports whether the lossy-link phase runs at size n.
func (c *Config) lossAt(n int) bool {
	return !c.OnlyOurs && !c.DetectOnly && len(c.LossPercents) > 0 && (len(c.LossSizes) == 0 || slices.Contains(c.LossSizes, n))
}
