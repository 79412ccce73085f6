package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/internal/cli"
	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/raftzone/recovery"
	"github.com/edgequorum/edgequorum/zone"
)

func init() {
	register(command{name: "recover", summary: "re-form a zone whose voters are gone for good", run: runRecover})
}

const recoverUsage = `Re-forms a zone that lost a majority of its Raft voters for good (machines
gone, disks replaced): until then it elects no leader and commits nothing.

Run it on ONE surviving voter, preferably the one with the highest commit
index in ` + "`edgequorum status`" + `, naming the voters that are gone:

  kubectl -n edgequorum-system exec <agent pod on a survivor> -- \
    /edgequorum recover --dead edge-3,edge-4,edge-5
  kubectl -n edgequorum-system delete pod <that agent pod>

It writes a request into the agent's --data-dir; the agent acts on it when it
next starts. It asks the running agent first and refuses while the zone has a
leader, when a named node is not a voter, or when the voters not named could
still elect a leader; the agent checks again at start and also refuses when a
named node answers on the zone port. The recovered member becomes the zone's
only voter and leads; it judges the named nodes unhealthy (the webhook leaves
them to eviction) and removes them from the zone; the other survivors are
taken back as voters within seconds. A lost node that comes back later joins
as a new member.`

func runRecover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("recover", recoverUsage, stderr)
	dataDir := fs.String("data-dir", "/var/lib/edgequorum", "the agent's --data-dir on this node")
	deadList := fs.String("dead", "", "comma-separated node names of the voters that are gone for good (required)")
	addr := fs.String("address", cli.EnvOr(cli.StatusAddressEnv, "127.0.0.1:9471"), "status server of this node's agent, asked before the request is written")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	var dead []string
	for _, n := range strings.Split(*deadList, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(dead, n) {
			dead = append(dead, n)
		}
	}
	if len(dead) == 0 {
		return cli.Usagef("--dead is required: name the voters that are gone for good")
	}

	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	body, err := fetchStatus(qctx, *addr, "/v1/status")
	cancel()
	if err != nil {
		fmt.Fprintf(stdout, "agent not reachable at %s (%v); the agent checks the request when it starts\n", *addr, err)
	} else {
		var st raftzone.Status
		if err := json.Unmarshal(body, &st); err != nil {
			return fmt.Errorf("decode agent status: %w", err)
		}
		if err := checkRecoverable(st, dead); err != nil {
			return fmt.Errorf("not recovering: %w", err)
		}
	}
	req := recovery.Request{Dead: dead, RequestedAt: time.Now().UTC()}
	if err := recovery.Write(*dataDir, req); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recovery request written to %s/%s (lost voters: %s)\n", *dataDir, recovery.RequestFile, strings.Join(dead, ", "))
	fmt.Fprintln(stdout, "restart this node's agent now (kubectl -n edgequorum-system delete pod <agent pod>); it logs \"zone recovered\" or why it refused")
	return nil
}

// checkRecoverable is the running agent's side of the refusal: a zone with a
// leader needs no recovery, and recovery.Check's rule applies to the
// roles the agent reports. The agent applies the same rule to its Raft
// configuration at start.
func checkRecoverable(st raftzone.Status, dead []string) error {
	if st.Leader != "" {
		return fmt.Errorf("the zone has a leader (%s): it has a quorum", st.Leader)
	}
	var voters, members []string
	for _, m := range st.Members {
		members = append(members, m.Node)
		if m.Suffrage == string(zone.Voter) {
			voters = append(voters, m.Node)
		}
	}
	return recovery.Check(st.Node, voters, members, dead)
}
