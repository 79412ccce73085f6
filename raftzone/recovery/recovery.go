// Package recovery is the operator's request to re-form a zone that lost its
// quorum for good, in the shape of Consul's peers.json: the file
// `edgequorum recover` writes into one surviving member's data dir, and the
// rule (Check) that refuses a recovery while a quorum may still exist. The
// member acts on the request at its next start (raftzone); this package only
// holds its format and its rule, so that the CLI needs nothing of the member.
//
// The operator names the voters that are gone for good. When the member's
// agent next starts it checks the request against its own Raft configuration
// and the network, rewrites its configuration to itself alone
// (raft.RecoverCluster), and leads. As its first act it judges the named nodes
// unhealthy and removes them from the zone, so the survivors' quorum and
// verdicts no longer count them; the other survivors are added back by the
// usual reconcile and promoted at once. Nothing is wiped by hand.
package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgequorum/edgequorum/internal/atomicfile"
)

// RequestFile is the request's name inside --data-dir.
const RequestFile = "recover.json"

// Request is what the operator asks for.
type Request struct {
	// Dead are the node names of the voters that are gone for good.
	Dead []string `json:"dead"`
	// RequestedAt is when `edgequorum recover` wrote the request.
	RequestedAt time.Time `json:"requestedAt"`
}

// Write validates req and writes it into dataDir, atomically,
// for the agent to act on at its next start.
func Write(dataDir string, req Request) error {
	if len(req.Dead) == 0 {
		return errors.New("--dead names no node")
	}
	for _, n := range req.Dead {
		if strings.TrimSpace(n) == "" || n != strings.TrimSpace(n) {
			return fmt.Errorf("--dead: %q is not a node name", n)
		}
	}
	if _, err := os.Stat(filepath.Join(dataDir, "raft", "raft.db")); err != nil {
		return fmt.Errorf("--data-dir %s holds no Raft state to recover from: %w", dataDir, err)
	}
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dataDir, RequestFile), append(b, '\n'), 0o600)
}

// Read reads the request at path; a missing file is no request (nil, nil).
func Read(path string) (*Request, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var req Request
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &req, nil
}

// Check refuses a recovery while a quorum may still exist. self, the
// voters of the last configuration and the members are node names. Every node
// named dead must be a member and a voter other than self, self must be a
// voter, and the voters not named must be too few to elect a leader. Both
// `edgequorum recover` (from the agent's status) and the agent at start (from
// its Raft configuration) apply it.
func Check(self string, voters, members, dead []string) error {
	if !slices.Contains(voters, self) {
		return fmt.Errorf("%s is not a voter of the last configuration; recover on a surviving voter", self)
	}
	var errs []error
	for _, n := range dead {
		switch {
		case n == self:
			errs = append(errs, fmt.Errorf("--dead names this node, %s", n))
		case !slices.Contains(members, n):
			errs = append(errs, fmt.Errorf("--dead: %s is not a member of this zone", n))
		case !slices.Contains(voters, n):
			errs = append(errs, fmt.Errorf("--dead: %s is not a voter; only lost voters cost a quorum", n))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var alive []string
	for _, v := range voters {
		if !slices.Contains(dead, v) {
			alive = append(alive, v)
		}
	}
	if q := len(voters)/2 + 1; len(alive) >= q {
		return fmt.Errorf("%d of %d voters are not named dead (%s): that is a quorum, the zone can elect a leader by itself",
			len(alive), len(voters), strings.Join(alive, ", "))
	}
	return nil
}
