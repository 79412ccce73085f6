package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgequorum/edgequorum/raftzone"
	"github.com/edgequorum/edgequorum/raftzone/recovery"
)

func TestCheckRecoverable(t *testing.T) {
	st := raftzone.Status{Node: "a", Zone: "z"}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		st.Members = append(st.Members, raftzone.MemberStatus{Node: n, Suffrage: "voter"})
	}
	st.Members = append(st.Members, raftzone.MemberStatus{Node: "f", Suffrage: "nonvoter"})
	for _, tc := range []struct {
		name   string
		leader string
		dead   []string
		err    string
	}{
		{name: "three of five lost", dead: []string{"c", "d", "e"}},
		{name: "a leader", leader: "b", dead: []string{"c", "d", "e"}, err: "has a leader (b)"},
		{name: "quorum left", dead: []string{"d", "e"}, err: "3 of 5 voters are not named dead"},
		{name: "nonvoter", dead: []string{"c", "d", "f"}, err: "--dead: f is not a voter"},
		{name: "ourselves", dead: []string{"a", "d", "e"}, err: "names this node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := st
			st.Leader = tc.leader
			err := checkRecoverable(st, tc.dead)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestRecoverCommand(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	// No --dead: a usage error naming the flag.
	if code := run(context.Background(), []string{"recover", "--data-dir", dir}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--dead") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	// A data dir without Raft state has nothing to recover.
	errOut.Reset()
	args := []string{"recover", "--data-dir", dir, "--dead", "b, c,c", "--address", "127.0.0.1:1"}
	if code := run(context.Background(), args, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "holds no Raft state") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "raft", "raft.db"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, recovery.RequestFile))
	if err != nil || !strings.Contains(string(b), `"b",`) || strings.Count(string(b), `"c"`) != 1 {
		t.Fatalf("request %s (%v), want b and c once each", b, err)
	}
}
