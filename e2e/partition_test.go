package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/testcluster"
	"github.com/edgequorum/edgequorum/internal/zonerun"
	"github.com/edgequorum/edgequorum/zone"
)

// nftPartition cuts every packet between the two groups of loopback IPs with an
// nftables table of its own. Agents bind all their outgoing zone traffic and
// probes to their advertise address, so source and destination IP identify
// both ends.
type nftPartition struct {
	t     *testing.T
	table string
}

func requireNft(t *testing.T) {
	t.Helper()
	if testcluster.UnitRun() {
		t.Skipf("skipping: multi-process partition tests, and %s is set", testcluster.UnitEnv)
	}
	if os.Geteuid() != 0 {
		t.Skip("multi-process partition tests need root for nftables rules on loopback")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		if os.Getenv(testcluster.RequireEnv) != "" {
			t.Fatalf("nft not found (install the Debian package nftables; .ci/run does): %v", err)
		}
		t.Skip("nft not found: install the Debian package nftables")
	}
}

// partitionTablePrefix names every partition table, so that a later run can
// find the ones an earlier, killed run left behind.
const partitionTablePrefix = "eqe2e"

// clearStale runs once per test process, before its first partition.
var clearStale sync.Once

// clearStalePartitions deletes the partition tables of an earlier run that
// was killed before its cleanup: they would go on dropping traffic between
// loopback addresses this run's zones may be given.
func clearStalePartitions(t *testing.T) {
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list tables: %v\n%s", err, out)
	}
	for _, table := range staleTables(string(out)) {
		if out, err := exec.Command("nft", "delete", "table", "inet", table).CombinedOutput(); err != nil {
			t.Fatalf("nft delete stale table %s: %v\n%s", table, err, out)
		}
		t.Logf("deleted partition table %s left by an earlier run", table)
	}
}

// staleTables picks the partition tables out of `nft list tables`.
func staleTables(listing string) []string {
	var out []string
	for line := range strings.Lines(listing) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "table" && f[1] == "inet" && strings.HasPrefix(f[2], partitionTablePrefix) {
			out = append(out, f[2])
		}
	}
	return out
}

func partition(t *testing.T, a, b []string) *nftPartition {
	t.Helper()
	clearStale.Do(func() { clearStalePartitions(t) })
	p := &nftPartition{t: t, table: fmt.Sprintf("%s%d", partitionTablePrefix, time.Now().UnixNano()%1_000_000_000)}
	var rules strings.Builder
	fmt.Fprintf(&rules, "table inet %s {\n chain out {\n  type filter hook output priority 0; policy accept;\n", p.table)
	for _, x := range a {
		for _, y := range b {
			fmt.Fprintf(&rules, "  ip saddr %s ip daddr %s drop\n  ip saddr %s ip daddr %s drop\n", x, y, y, x)
		}
	}
	rules.WriteString(" }\n}\n")
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v\n%s\n%s", err, out, rules.String())
	}
	t.Cleanup(p.heal)
	return p
}

func (p *nftPartition) heal() {
	if p.table == "" {
		return
	}
	if out, err := exec.Command("nft", "delete", "table", "inet", p.table).CombinedOutput(); err != nil {
		p.t.Errorf("nft delete table %s: %v\n%s", p.table, err, out)
	}
	p.table = ""
}

// TestPartitionedZoneProcesses splits a zone of five agent processes 2/3 with
// nftables, the old leader in the minority: the majority elects a leader,
// judges the unreachable minority and writes that; the minority shows nothing
// committed after the cut; after healing, everyone is healthy again.
func TestPartitionedZoneProcesses(t *testing.T) {
	requireNft(t)
	c, z := startZone(t, testcluster.Options{}, zonerun.Options{Zone: "edge-p", Nodes: 5})
	ctx := context.Background()
	client := c.Client()
	all := map[string]zone.State{}
	for _, n := range names(z) {
		all[n] = zone.Healthy
	}
	waitStates(t, client, 2*time.Minute, all)
	var leader *zonerun.Agent
	poll.Until(t, 30*time.Second, "leader and five voters", func() (bool, string) {
		l, err := z.Leader(ctx)
		if err != nil {
			return false, err.Error()
		}
		st, err := l.Status(ctx)
		if err != nil {
			return false, err.Error()
		}
		voters := 0
		for _, m := range st.Members {
			if m.Suffrage == "voter" {
				voters++
			}
		}
		leader = l
		return voters == 5, fmt.Sprintf("%d voters", voters)
	})

	var minority, majority []*zonerun.Agent
	for _, a := range z.Agents() {
		if a == leader || (len(minority) == 1 && len(majority) >= 2) {
			minority = append(minority, a)
		} else {
			majority = append(majority, a)
		}
	}
	ips := func(as []*zonerun.Agent) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.IP)
		}
		return out
	}
	p := partition(t, ips(minority), ips(majority))

	want := map[string]zone.State{}
	for _, a := range minority {
		want[a.Name] = zone.Unhealthy
	}
	for _, a := range majority {
		want[a.Name] = zone.Healthy
	}
	took := waitStates(t, client, 2*time.Minute, want)
	t.Logf("majority judged the cut-off minority %v in %s", ips(minority), took.Round(100*time.Millisecond))

	for _, a := range minority {
		st, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == "Leader" {
			t.Errorf("%s still leads inside the minority", a.Name)
		}
	}
	// The majority has committed its verdicts on the minority in its new
	// term, so it holds everything committed before the cut: cut is the most
	// the minority may ever show. A minority member may still learn part of
	// that (a last commit index from the old leader, or, once it turns spare,
	// a view copied from it), but nothing committed since.
	var cut uint64
	for _, a := range majority {
		st, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cut = max(cut, st.CommitIndex)
	}
	// Let the majority commit a good number of entries meanwhile.
	poll.Until(t, time.Minute, "majority keeps committing", func() (bool, string) {
		st, err := majority[0].Status(ctx)
		return err == nil && st.CommitIndex >= cut+10, fmt.Sprint(st.CommitIndex)
	})
	for _, a := range minority {
		st, err := a.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.CommitIndex > cut {
			t.Errorf("minority member %s shows index %d committed during the partition (the majority had %d at the cut)", a.Name, st.CommitIndex, cut)
		}
	}

	p.heal()
	took = waitStates(t, client, 2*time.Minute, all)
	t.Logf("zone healthy again %s after the partition healed", took.Round(100*time.Millisecond))
}

func TestStaleTablesAreOnlyPartitionTables(t *testing.T) {
	listing := "table inet eqe2e123456\ntable ip edgequorum_bench_soak\ntable inet filter\ntable ip eqe2e9\ntable inet eqe2e77\n"
	got := staleTables(listing)
	if strings.Join(got, ",") != "eqe2e123456,eqe2e77" {
		t.Fatalf("staleTables = %v, want the two inet eqe2e tables and nothing else", got)
	}
}
