package raftzone

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/store"
	"github.com/edgequorum/edgequorum/zone"
	"github.com/edgequorum/edgequorum/zoneport"
)

func viewMember(node string) zone.Member {
	return zone.Member{Node: node, ServerID: "id-" + node, Zone: testZoneName, ProbeAddress: "127.0.0.9",
		RaftAddress: "127.0.0.9:9470", Role: zone.Nonvoter, JoinedAt: time.Unix(1700000000, 0).UTC()}
}

// sparesView is what a spare, c, holds after its first copy: three members,
// a verdict and its own row.
func sparesView() (store.View, viewCluster) {
	c := viewCluster{Leader: "a", LeaderAddress: "127.0.0.9:9470", Term: 3,
		Servers: map[string]string{"id-a": "voter", "id-b": "nonvoter"}, Tag: "t1", RowTag: "r1"}
	raw, _ := json.Marshal(c)
	return store.View{Applied: 10, AppliedTerm: 3, Node: "c",
		Members:  []zone.Member{viewMember("a"), viewMember("b"), viewMember("c")},
		Verdicts: []zone.Verdict{{Node: "b", State: zone.Healthy, Pros: 2, Members: 3, Term: 3}},
		Row:      map[string]store.Cell{"a": {OK: true, Score: 100}, "b": {OK: true, Score: 90}},
		Cluster:  raw}, c
}

// TestMergeView checks how a spare folds a server's answer into its view: a
// part the server left out because the spare holds it stays, a new shared
// part replaces the old one and takes the row's cells about members that
// left with it, and an answer that is no consistent view changes nothing.
func TestMergeView(t *testing.T) {
	cur, c := sparesView()

	t.Run("unchanged parts left out", func(t *testing.T) {
		next, nc, err := mergeView(cur, c, viewAnswer{Applied: 12, AppliedTerm: 3, RowTag: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if next.Applied != 12 || !reflect.DeepEqual(next.Members, cur.Members) || !reflect.DeepEqual(next.Row, cur.Row) ||
			!reflect.DeepEqual(next.Verdicts, cur.Verdicts) || nc.Leader != "a" || nc.Tag != "t1" {
			t.Fatalf("merged view lost a part it was told to keep: %+v, cluster %+v", next, nc)
		}
	})

	t.Run("member left", func(t *testing.T) {
		nc := viewCluster{Leader: "c", LeaderAddress: "127.0.0.9:9470", Term: 4, Tag: "t2"}
		next, got, err := mergeView(cur, c, viewAnswer{Applied: 20, AppliedTerm: 4, Shared: true,
			Members: []zone.Member{viewMember("a"), viewMember("c")}, Cluster: &nc, RowTag: "r2"})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := next.Row["b"]; ok || len(next.Row) != 1 {
			t.Errorf("row kept a cell about b, who left: %v", next.Row)
		}
		if len(next.Verdicts) != 0 || got.Leader != "c" || got.RowTag != "r2" {
			t.Errorf("shared part not replaced: verdicts %v, cluster %+v", next.Verdicts, got)
		}
	})

	for _, tc := range []struct {
		name string
		ans  viewAnswer
	}{
		{"shared part without cluster", viewAnswer{Shared: true, Members: cur.Members}},
		{"verdict about no member", viewAnswer{Shared: true, Members: cur.Members, Cluster: &c,
			Verdicts: []zone.Verdict{{Node: "x", State: zone.Unhealthy, Cons: 2, Members: 3, Term: 3}}}},
		{"member without a name", viewAnswer{Shared: true, Members: []zone.Member{{ServerID: "id"}}, Cluster: &c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := mergeView(cur, c, tc.ans); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// FuzzViewAnswer feeds GET /v1/view answers, as a hostile server could send
// them, through what a spare does with one: decode, merge with its view,
// write it to its view store. Nothing may panic, and whatever is written
// reads back as a consistent view.
func FuzzViewAnswer(f *testing.F) {
	cur, c := sparesView()
	full := viewAnswer{Applied: 11, AppliedTerm: 3, Shared: true, Members: cur.Members, Verdicts: cur.Verdicts,
		Cluster: &c, RowSent: true, Row: cur.Row, RowTag: "r1", Last: &store.LastReport{Seq: 7}}
	for _, a := range []viewAnswer{full, {Applied: 12, RowTag: "r1"}, {RowSent: true, Row: map[string]store.Cell{"c": {}}}} {
		b, err := json.Marshal(a)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"shared":true,"members":null,"cluster":{}}`))
	f.Add([]byte(`{"rowSent":true,"row":{"a":{"score":1e308}},"rowTag":"x"}`))
	st, err := store.Open(filepath.Join(f.TempDir(), "view.db"), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	f.Fuzz(func(t *testing.T, data []byte) {
		var ans viewAnswer
		if json.Unmarshal(data, &ans) != nil {
			return
		}
		next, _, err := mergeView(cur, c, ans)
		if err != nil {
			return
		}
		if err := st.ImportView(next); err != nil {
			t.Fatalf("a merged view does not import: %v", err)
		}
		back, err := st.ExportView(cur.Node)
		if err != nil {
			t.Fatal(err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("the imported view reads back inconsistent: %v", err)
		}
		if !reflect.DeepEqual(back.Members, next.Members) && (len(back.Members) != 0 || len(next.Members) != 0) {
			t.Fatalf("members read back as %v, wrote %v", back.Members, next.Members)
		}
	})
}

// TestViewOnlyForMembers checks who a server copies its view to: the zone's
// members and its leader's verdicts are not for a box that holds the zone key
// and a node's key but is not that member (its server ID is not the one the
// zone pinned), and a member gets its own row, never another's.
func TestViewOnlyForMembers(t *testing.T) {
	z := newTestZone(t, 3)
	z.startAll()
	l := z.waitConverged(60*time.Second, 3)
	z.waitVerdicts(60*time.Second, allHealthy(z.names()))
	var caller *testNode
	for _, n := range z.running() {
		if n != l {
			caller = n
			break
		}
	}
	getQuery := func(p testPeer, query string) (int, viewAnswer, string) {
		t.Helper()
		sn := peerNet(t, z.fabric.Host(caller.ip), z.keys, p, z.list)
		resp, err := sn.HTTPClient().Get("https://" + l.ip + ":9470/v1/view" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var ans viewAnswer
		var eb errorBody
		_ = jsonUnmarshal(raw, &ans)
		_ = jsonUnmarshal(raw, &eb)
		return resp.StatusCode, ans, eb.Reason
	}
	get := func(p testPeer) (int, viewAnswer, string) { t.Helper(); return getQuery(p, "") }

	me := peerOf(t, caller)
	status, ans, reason := get(me)
	if status != http.StatusOK {
		t.Fatalf("member %s asked for its view: %d %s", caller.name, status, reason)
	}
	if !ans.Shared || len(ans.Members) != 3 || ans.Cluster == nil || ans.Cluster.Leader != l.name {
		t.Errorf("view lacks the zone: shared %v, %d members, cluster %+v", ans.Shared, len(ans.Members), ans.Cluster)
	}
	for peer := range ans.Row {
		if peer == caller.name {
			t.Errorf("row holds a cell about its own member")
		}
	}
	if want, _ := l.srv.store.MatrixRow(caller.name); len(ans.Row) != len(want) {
		t.Errorf("row of %s has %d cells, the leader's replica %d", caller.name, len(ans.Row), len(want))
	}

	// A caller that holds the shared part gets only what changed. The
	// zone is steady (every verdict healthy, one leader), so the shared
	// part stays as it was.
	status, again, reason := getQuery(me, "?have="+ans.Cluster.Tag)
	if status != http.StatusOK || again.Shared || again.Members != nil || again.Cluster != nil {
		t.Errorf("caller that holds the shared part got %d %s: shared %v, %d members", status, reason, again.Shared, len(again.Members))
	}
	if !again.RowSent || (again.RowTag != ans.RowTag && again.Applied == ans.Applied) {
		t.Errorf("caller that named no row got row sent %v, tag %q (was %q at the same index)", again.RowSent, again.RowTag, ans.RowTag)
	}
	if _, other, _ := getQuery(me, "?have=0123&row="+again.RowTag); !other.Shared || len(other.Members) != 3 {
		t.Errorf("caller with a stale tag got shared %v, %d members", other.Shared, len(other.Members))
	}

	impostor := me
	impostor.serverID = "00000000-0000-4000-8000-000000000000"
	if status, _, reason := get(impostor); status != http.StatusForbidden || reason != "not_member" {
		t.Errorf("caller with %s's key but another server ID got %d %q, want 403 not_member", caller.name, status, reason)
	}
}

// TestNewSpareAsksItsAdmitterFirst checks where a spare without a view looks
// for one: the leader that admitted it comes first, so that in a zone of a
// hundred members, mostly spares without a view of their own yet, a new
// spare's first few tries do not go to peers that cannot answer. Before it
// was admitted, every peer is a candidate.
func TestNewSpareAsksItsAdmitterFirst(t *testing.T) {
	list := &memberList{ok: true}
	for i := range 100 {
		n := fmt.Sprintf("n%d", i)
		list.cands = append(list.cands, zoneport.Candidate{Node: n, RaftAddress: fmt.Sprintf("127.0.1.%d:9470", i+1)})
	}
	s := &Member{cfg: Config{Node: "n0"}, deps: Deps{Members: list}}
	if got := s.viewSources(nil, viewCluster{}); len(got) != 99 || slices.Contains(got, "127.0.1.1:9470") {
		t.Fatalf("before admission: %d sources %v, want the 99 other peers", len(got), got)
	}
	leader := "127.0.1.42:9470"
	s.admittedBy.Store(&leader)
	for range 20 {
		got := s.viewSources(nil, viewCluster{})
		if len(got) != 99 || got[0] != leader || slices.Index(got[1:], leader) >= 0 {
			t.Fatalf("after admission by %s: sources start %v (%d), want the admitter first and once", leader, got[:3], len(got))
		}
	}
}

// TestStaleViewLeavesATryOutside checks that a spare's view cannot strand it:
// a member that turns spare again after a while as a server, or whose zone
// was recovered from a lost quorum, may hold a view whose servers are all
// gone. Every sync's last try then goes to a peer outside the view, in a new
// order each time, so the spare finds a live server, or a spare that names
// the leader, within a few report periods.
func TestStaleViewLeavesATryOutside(t *testing.T) {
	list := &memberList{ok: true}
	var members []zone.Member
	view := viewCluster{Leader: "n1", Servers: map[string]string{}}
	for i := range 10 {
		n := fmt.Sprintf("n%d", i)
		addr := fmt.Sprintf("127.0.1.%d:9470", i+1)
		list.cands = append(list.cands, zoneport.Candidate{Node: n, RaftAddress: addr})
		members = append(members, zone.Member{Node: n, ServerID: "id-" + n, RaftAddress: addr})
		if i >= 1 && i <= 5 {
			view.Servers["id-"+n] = "voter" // n1..n5, all gone
		}
	}
	admitter := "127.0.1.2:9470" // n1, gone too
	s := &Member{cfg: Config{Node: "n0"}, deps: Deps{Members: list}}
	s.admittedBy.Store(&admitter)
	inView := func(addr string) bool {
		for _, m := range members {
			if m.RaftAddress == addr {
				_, ok := view.Servers[m.ServerID]
				return ok
			}
		}
		return false
	}
	outside := map[string]bool{}
	for range 50 {
		got := s.viewSources(members, view)
		if len(got) != 9 || slices.Contains(got, "127.0.1.1:9470") {
			t.Fatalf("%d sources %v, want the 9 other members, each once", len(got), got)
		}
		for i, a := range got[:viewTries-1] {
			if !inView(a) {
				t.Fatalf("try %d goes to %s outside the view before the view's servers: %v", i+1, a, got)
			}
		}
		outside[got[viewTries-1]] = true
	}
	live := 0
	for a := range outside {
		if !inView(a) {
			live++
		}
	}
	if live < 3 {
		t.Errorf("the last try of 50 syncs went to %d peers outside the view (%v), want it spread over them", live, outside)
	}
}
