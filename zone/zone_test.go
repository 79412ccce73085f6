package zone

import (
	"bytes"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/skew"
)

func sampleReport() Report {
	return Report{Zone: "z", From: "a", Seq: 7, SentAt: time.Unix(100, 5), APIReachable: true,
		Results: []Result{{Peer: "b", OK: true, Score: 100, Latency: time.Millisecond}, {Peer: "c", Score: 50}}}
}

func TestSigningBytesCoverEveryField(t *testing.T) {
	base := sampleReport()
	key := bytes.Repeat([]byte{1}, 32)
	if err := base.Sign("k1", key); err != nil {
		t.Fatal(err)
	}
	if !base.VerifyMAC(key) {
		t.Fatal("a freshly signed report does not verify")
	}
	mutations := map[string]func(*Report){
		"zone":     func(r *Report) { r.Zone = "y" },
		"from":     func(r *Report) { r.From = "b" },
		"seq":      func(r *Report) { r.Seq++ },
		"sentAt":   func(r *Report) { r.SentAt = r.SentAt.Add(time.Nanosecond) },
		"api":      func(r *Report) { r.APIReachable = false },
		"keyID":    func(r *Report) { r.KeyID = "k2" },
		"peer":     func(r *Report) { r.Results[0].Peer = "bb" },
		"ok":       func(r *Report) { r.Results[1].OK = true },
		"score":    func(r *Report) { r.Results[1].Score = 50.0000001 },
		"latency":  func(r *Report) { r.Results[0].Latency++ },
		"dropped":  func(r *Report) { r.Results = r.Results[:1] },
		"boundary": func(r *Report) { r.Zone, r.From = "za", "" },
	}
	for name, mut := range mutations {
		r := base
		r.Results = append([]Result(nil), base.Results...)
		mut(&r)
		if r.VerifyMAC(key) {
			t.Errorf("changing %s keeps the MAC valid", name)
		}
	}
	if base.VerifyMAC(bytes.Repeat([]byte{2}, 32)) {
		t.Error("MAC verifies under another key")
	}
}

func TestSigningBytesNeedSortedResults(t *testing.T) {
	r := sampleReport()
	r.Results[0], r.Results[1] = r.Results[1], r.Results[0]
	if _, err := r.SigningBytes(); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("unsorted results: %v", err)
	}
	SortResults(r.Results)
	if _, err := r.SigningBytes(); err != nil {
		t.Fatal(err)
	}
	r.Results = append(r.Results, r.Results[1])
	if _, err := r.SigningBytes(); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("duplicate peer: %v", err)
	}
}

func TestQuorum(t *testing.T) {
	for m, want := range map[int]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 9: 5, 129: 65} {
		if got := Quorum(m); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", m, got, want)
		}
	}
}

var validName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

func TestLeaseNames(t *testing.T) {
	seen := map[string]string{}
	for _, z := range []string{"edge-a", "Edge_A", "edge_a", "us-east-1a", "a.b", "---", "UPPER", "x"} {
		for _, name := range []string{LeaseName(z), GenesisLeaseName(z)} {
			if !validName.MatchString(name) || len(name) > 253 {
				t.Errorf("zone %q: %q is not a valid object name", z, name)
			}
			if other, ok := seen[name]; ok && other != z {
				t.Errorf("zones %q and %q share %q", z, other, name)
			}
			seen[name] = z
		}
	}
	if LeaseName("edge-a") != "edgequorum-edge-a" || GenesisLeaseName("edge-a") != "edgequorum-genesis-edge-a" {
		t.Errorf("plain zone names must map unchanged: %s %s", LeaseName("edge-a"), GenesisLeaseName("edge-a"))
	}
}

func TestParseAnnotation(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := Verdict{Node: "n", State: Healthy, Pros: 3, Cons: 1, Members: 5, Term: 9, Leader: "l", DecidedAt: at}
	a := AnnotationFor("z", v, skew.Oldest())
	if a.State != Healthy || a.Zone != "z" || a.Term != 9 || a.Members != 5 || !a.At.Equal(at) {
		t.Fatalf("annotation %+v", a)
	}
	for _, tc := range []struct {
		in      string
		wantErr bool
	}{
		{`{"state":"healthy","zone":"z","term":1}`, false},
		{`{"state":"unknown"}`, false},
		{`{"state":"fine"}`, true},
		{`{"zone":"z"}`, true},
		{`not json`, true},
	} {
		if _, err := ParseAnnotation(tc.in); (err != nil) != tc.wantErr {
			t.Errorf("ParseAnnotation(%s) err = %v", tc.in, err)
		}
	}
}
