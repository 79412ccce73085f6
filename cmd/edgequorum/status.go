package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/internal/matrixsvg"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/zone"
)

func init() {
	register(command{name: "status", summary: "show an agent's view of its zone", run: runStatus})
}

const statusUsage = `Asks an agent's status server for its view of the zone (or, with --leader,
the leader's view) and prints it as a table or JSON. Inside the agent's pod it
needs no flags: kubectl -n edgequorum-system exec <agent pod> -- /edgequorum status

With --matrix it shows who sees whom instead: the zone's committed opinion
matrix, one row per checker, one column per target, as a table, as JSON (-o
json), or as a picture to open in a browser: -o svg writes the SVG to stdout,
-o FILE.svg writes it to FILE.svg.`

// envOr returns the environment variable key, or def when it is unset or empty.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("status", statusUsage, stderr)
	addr := fs.String("address", cli.EnvOr(cli.StatusAddressEnv, "127.0.0.1:9471"), "agent status server URL (its --status-address; default $"+cli.StatusAddressEnv+", which the DaemonSet sets, else 127.0.0.1:9471)")
	leader := fs.Bool("leader", false, "show the zone leader's view, fetched through this agent")
	matrix := fs.Bool("matrix", false, "show the zone's opinion matrix (who sees whom) instead of the member table")
	output := fs.String("o", "table", "output format: table, json, or metrics (the agent's Prometheus metrics, which only this node may read); "+
		"with --matrix also svg (the picture, to stdout) or a file name ending in .svg (the picture, written there)")
	timeout := fs.Duration("timeout", 5*time.Second, "request timeout")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	picture := *output == "svg" || isSVGFile(*output)
	switch {
	case *matrix && *output == "metrics":
		return cli.Usagef("-o metrics shows this agent's metrics; it does not combine with --matrix")
	case *matrix && *output != "table" && *output != "json" && !picture:
		return cli.Usagef("-o %q: with --matrix want table, json, svg or a file name ending in .svg", *output)
	case !*matrix && picture:
		return cli.Usagef("-o %q: only the matrix is drawn; add --matrix", *output)
	case !*matrix && *output != "table" && *output != "json" && *output != "metrics":
		return cli.Usagef("-o %q: want table, json or metrics", *output)
	}
	path := "/v1/status"
	switch {
	case *output == "metrics" && *leader:
		return cli.Usagef("-o metrics shows this agent's metrics; it does not combine with --leader")
	case *output == "metrics":
		path = "/metrics"
	case *leader:
		path += "/leader"
	}
	if *matrix {
		path += "/matrix"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	body, err := fetchStatus(ctx, *addr, path)
	if err != nil {
		return err
	}
	if *matrix {
		return showMatrix(body, *output, stdout)
	}
	if *output == "json" || *output == "metrics" {
		_, err := stdout.Write(body)
		return err
	}
	var st raftzone.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("decode agent status: %w", err)
	}
	printStatus(stdout, st)
	return nil
}

// fetchStatus GETs path from the agent status server at addr (host:port or
// URL) and returns the body of a 200 answer.
func fetchStatus(ctx context.Context, addr, path string) ([]byte, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil, cli.Usagef("--address %q: %v", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask agent at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read agent status: %w", err)
	}
	if resp.StatusCode == http.StatusNotFound {
		// An agent of a release before the endpoint: say so, not just 404.
		return nil, fmt.Errorf("agent at %s answered %s for %s: its release does not serve it; upgrade the agent", addr, resp.Status, path)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent at %s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

func printStatus(w io.Writer, st raftzone.Status) {
	yes := map[bool]string{true: "yes", false: "no"}
	lastWrite := "never"
	if st.LastAPIWrite != nil {
		lastWrite = st.At.Sub(*st.LastAPIWrite).Round(100*time.Millisecond).String() + " ago"
	}
	voters := fmt.Sprintf("voters %d of %d", st.Voters, st.WantVoters)
	if st.Forming {
		voters = fmt.Sprintf("FORMING: %d of %d voters", st.Voters, st.WantVoters)
	}
	fmt.Fprintf(w, "node %s   zone %s   %s   term %d   leader %s   %s\n", st.Node, st.Zone, st.State, st.Term, orDash(st.Leader), voters)
	fmt.Fprintf(w, "commit %d   applied %d   joined %s   ready %s   apiserver %s   last API write %s   pending writes %d\n",
		st.CommitIndex, st.AppliedIndex, yes[st.Joined], yes[st.Ready], map[bool]string{true: "reachable", false: "unreachable"}[st.APIReachable], lastWrite, st.PendingWrites)
	fmt.Fprintf(w, "release %s   speaks %s   zone at %s\n", orDash(st.Release), st.Level, zoneLevel(st))
	if st.UnreadableNewer > 0 {
		fmt.Fprintf(w, "SKEW: %d committed entries are of a newer release than this member reads: upgrade it (last: %s)\n",
			st.UnreadableNewer, st.UnreadableLast)
	}
	fmt.Fprintln(w)
	verdicts := map[string]zone.Verdict{}
	for _, v := range st.Verdicts {
		verdicts[v.Node] = v
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tRELEASE\tADDRESS\tLAST REPORT\tAPI\tVERDICT\tPROS/CONS\tTERM")
	for _, m := range st.Members {
		age := "-"
		if m.LastReportAgeSeconds != nil {
			age = (time.Duration(*m.LastReportAgeSeconds * float64(time.Second))).Round(100 * time.Millisecond).String()
		}
		v, ok := verdicts[m.Node]
		state, pc, term := "-", "-", "-"
		if ok {
			state, pc, term = string(v.State), fmt.Sprintf("%d/%d", v.Pros, v.Cons), fmt.Sprint(v.Term)
		}
		role := m.Role
		if role == "" {
			// An agent from before spares existed names suffrage only.
			role = m.Suffrage
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Node, orDash(role), orDash(m.Release), m.RaftAddress, age, yes[m.APIReachable], state, pc, term)
	}
	tw.Flush()
	printTrust(w, st)
}

// zoneLevel names the level a server found its zone at; a spare's view does
// not carry it.
func zoneLevel(st raftzone.Status) string {
	if st.ZoneLevel == 0 {
		return "- (a spare does not know)"
	}
	return st.ZoneLevel.String()
}

// printTrust prints what this member saw that a stolen or broken box does: the
// elections voters forced, a leader that committed none of its reports, and
// what its replica refused of what leaders committed. Nothing when all is
// quiet.
func printTrust(w io.Writer, st raftzone.Status) {
	var lines []string
	for _, f := range st.ForcedElections {
		line := fmt.Sprintf("%s forced %d election(s), the last %s ago", f.Node, f.Count, st.At.Sub(f.Last).Round(time.Second))
		if f.Refused > 0 {
			line += fmt.Sprintf(", %d refused over its budget", f.Refused)
		}
		lines = append(lines, line)
	}
	if st.ReportsUncommittedSeconds >= 1 {
		lines = append(lines, fmt.Sprintf("the leader has committed none of this member's reports for %s", time.Duration(st.ReportsUncommittedSeconds*float64(time.Second)).Round(time.Second)))
	}
	if st.StalledLeader != "" {
		lines = append(lines, fmt.Sprintf("stopped following %s in term %d: it committed none of this member's reports", st.StalledLeader, st.StalledTerm))
	}
	reasons := make([]string, 0, len(st.Held))
	for r := range st.Held {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		lines = append(lines, fmt.Sprintf("replica refused %d committed item(s): %s", st.Held[r], r))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nTRUST (see DESIGN.md, \"Trust\")")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// isSVGFile reports whether -o names a file for the matrix picture.
func isSVGFile(output string) bool {
	return output != "svg" && strings.HasSuffix(strings.ToLower(output), ".svg")
}

// showMatrix prints or draws the matrix the agent answered with body, as
// output asks: table, json (the answer as it came), svg (to w) or a file name
// ending in .svg.
func showMatrix(body []byte, output string, w io.Writer) error {
	if output == "json" {
		_, err := w.Write(body)
		return err
	}
	var v raftzone.MatrixView
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("decode the agent's matrix: %w", err)
	}
	switch {
	case output == "table":
		printMatrix(w, v)
		return nil
	case output == "svg":
		return matrixsvg.Write(w, v)
	}
	var b bytes.Buffer
	if err := matrixsvg.Write(&b, v); err != nil {
		return err
	}
	// Write-then-rename: an operator reloading the picture never sees half
	// of it.
	if err := atomicfile.Write(output, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	fmt.Fprintf(w, "wrote %s: the matrix of zone %s (%d members) seen from %s at %s\n",
		output, v.Zone, len(v.Members), v.Node, v.At.UTC().Format(time.RFC3339))
	return nil
}

// printMatrix prints the matrix as a table: a row per checker, a column per
// target, each cell the checker's opinion and the age of its last report
// (ok 2s, FAIL 3s, stale 40s, - for none), and the zone's verdict on each
// checker beside its row.
func printMatrix(w io.Writer, v raftzone.MatrixView) {
	vt := time.Duration(v.VoteTimeoutSeconds * float64(time.Second))
	fmt.Fprintf(w, "zone %s   term %d   leader %s   seen from %s at %s   stale after %s\n",
		v.Zone, v.Term, orDash(v.Leader), v.Node, v.At.UTC().Format(time.RFC3339), vt)
	if v.Partial {
		fmt.Fprintln(w, "PARTIAL: this spare's view holds its own row only; --leader shows every row")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "CHECKER \\ TARGET")
	for _, m := range v.Members {
		fmt.Fprint(tw, "\t"+m)
	}
	fmt.Fprintln(tw, "\tVERDICT\tPROS/CONS")
	for _, row := range v.Rows {
		fmt.Fprint(tw, row.Checker)
		for _, c := range row.Cells {
			fmt.Fprint(tw, "\t"+matrixCell(c))
		}
		fmt.Fprintf(tw, "\t%s\t%d/%d\n", row.Verdict, row.Pros, row.Cons)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nok, FAIL: the checker's opinion, with its last report's age; stale: that report is older than %s, so the verdicts do not count it; -: no opinion\n", vt)
}

func matrixCell(c raftzone.MatrixCell) string {
	age := ""
	if c.AgeSeconds != nil {
		age = " " + time.Duration(*c.AgeSeconds*float64(time.Second)).Round(time.Second).String()
	}
	switch c.State {
	case raftzone.CellReached:
		return "ok" + age
	case raftzone.CellFailed:
		return "FAIL" + age
	case raftzone.CellStale:
		return "stale" + age
	}
	return "-"
}
