package recovery

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	voters := []string{"a", "b", "c", "d", "e"}
	members := append(slices.Clone(voters), "f")
	for _, tc := range []struct {
		name, self string
		voters     []string
		dead       []string
		err        string
	}{
		{name: "three of five voters gone", self: "a", dead: []string{"c", "d", "e"}},
		{name: "four of five gone", self: "a", dead: []string{"b", "c", "d", "e"}},
		{name: "named twice", self: "a", dead: []string{"c", "d", "e", "e"}},
		{name: "two of five leave a quorum", self: "a", dead: []string{"d", "e"}, err: "3 of 5 voters are not named dead (a, b, c)"},
		{name: "a voter outside the member list counts", self: "a", voters: append(slices.Clone(voters), "server 1234", "server 5678"),
			dead: []string{"c", "d", "e"}, err: "4 of 7 voters are not named dead"},
		{name: "not a member", self: "a", dead: []string{"c", "d", "x"}, err: "x is not a member"},
		{name: "a nonvoter costs no quorum", self: "a", dead: []string{"c", "d", "f"}, err: "f is not a voter"},
		{name: "not ourselves", self: "a", dead: []string{"a", "d", "e"}, err: "--dead names this node, a"},
		{name: "only a voter recovers", self: "f", dead: []string{"c", "d", "e"}, err: "f is not a voter of the last configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.voters
			if v == nil {
				v = voters
			}
			err := Check(tc.self, v, members, tc.dead)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

// TestRecoverAfterLosingAQuorum loses three of the five voters of a zone of
// six for good. The survivors cannot elect a leader; a recovery request that
// names too few dead is refused, and one that names all three re-forms the
// zone around the member it was given to: it leads, the other survivors are
// taken back as voters, the dead are judged unhealthy and leave, and verdicts
// continue.
