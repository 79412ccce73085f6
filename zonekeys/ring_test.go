package zonekeys

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/internal/syncbuf"
)

func TestParseKeys(t *testing.T) {
	good := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	other := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("o", 40)))
	short := base64.StdEncoding.EncodeToString([]byte("too-short"))
	tests := []struct {
		name    string
		in      string
		wantIDs []string
		wantErr string
	}{
		{name: "one key", in: "k1:" + good + "\n", wantIDs: []string{"k1"}},
		{name: "rotation keeps order", in: "# new key signs\nk2:" + other + "\n\nk1:" + good, wantIDs: []string{"k2", "k1"}},
		{name: "empty", in: "", wantErr: "no keys"},
		{name: "only comments", in: "# nothing\n", wantErr: "no keys"},
		{name: "no colon", in: good, wantErr: "line 1: want id:base64"},
		{name: "bad base64", in: "k1:@@@", wantErr: "line 1: key \"k1\" is not valid base64"},
		{name: "short key", in: "k1:" + short, wantErr: "has 9 bytes, need at least 32"},
		{name: "duplicate id", in: "k1:" + good + "\nk1:" + other, wantErr: "appears twice"},
		{name: "bad id", in: "k 1:" + good, wantErr: "may hold only"},
		{name: "empty id", in: ":" + good, wantErr: "1 to 64 characters"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := Parse(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(k.IDs(), ","); got != strings.Join(tc.wantIDs, ",") {
				t.Fatalf("ids %s, want %v", got, tc.wantIDs)
			}
			if k.SigningID() != tc.wantIDs[0] {
				t.Fatalf("signing id %s", k.SigningID())
			}
		})
	}
}

func TestLoadKeyFileNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := LoadFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("k1:short\n"), 0o600)
	if _, err := LoadFile(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v", err)
	}
	line, err := GenerateLine("gen")
	if err != nil {
		t.Fatal(err)
	}
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte(line+"\n"), 0o600)
	k, err := LoadFile(ok)
	if err != nil {
		t.Fatal(err)
	}
	if id, key := k.SigningKey(); id != "gen" || len(key) != MinKeyBytes {
		t.Fatalf("generated key %s/%d bytes", id, len(key))
	}
	if _, err := GenerateLine("bad id"); err == nil {
		t.Fatal("GenerateLine accepted a bad id")
	}
}

// keyT0 is when the fake clocks of these tests start.
var keyT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// keyLines is the key file text of ring(t, pairs...).
func keyLines(pairs ...string) string {
	var b strings.Builder
	for i := 0; i < len(pairs); i += 2 {
		fmt.Fprintf(&b, "%s:%s\n", pairs[i], base64.StdEncoding.EncodeToString([]byte(strings.Repeat(pairs[i+1], 32))))
	}
	return b.String()
}

// verifies reports whether a MAC signed by from checks out with to's keys, the
// way readProof and the intake check one.
func verifies(from, to *Ring) error {
	id, key := from.SigningKey()
	msg := []byte("ekm|client")
	sum := func(k []byte) []byte { m := hmac.New(sha256.New, k); m.Write(msg); return m.Sum(nil) }
	got := sum(key)
	vk, err := to.Key(id)
	if err != nil {
		return err
	}
	if !hmac.Equal(sum(vk), got) {
		return fmt.Errorf("MAC with %q does not verify", id)
	}
	return nil
}

// TestRotationHasNoWindow walks the documented rotation through a zone of
// agents that reload one at a time, as the kubelet delivers the Secret node by
// node, and checks after every single reload that every agent verifies every
// other agent's MAC. The operator waits for all agents before the next step,
// so at any moment the agents are at one step or the one before.
func TestRotationHasNoWindow(t *testing.T) {
	steps := []struct{ name, file string }{
		{"new key added second", keyLines("k1", "a", "k2", "b")},
		{"new key made first", keyLines("k2", "b", "k1", "a")},
		{"old key dropped", keyLines("k2", "b")},
	}
	clk := clocktesting.NewFakeClock(keyT0)
	agents := make([]*Ring, 4)
	for i := range agents {
		agents[i] = ring(t, "k1", "a")
		agents[i].SetClock(clk)
	}
	checkAll := func(when string) {
		t.Helper()
		for i, a := range agents {
			for j, b := range agents {
				if err := verifies(a, b); err != nil {
					t.Fatalf("%s: agent %d (signs %s) -> agent %d (keys %v): %v", when, i, a.SigningID(), j, b.IDs(), err)
				}
			}
		}
	}
	checkAll("start")
	for _, step := range steps {
		for i, a := range agents {
			next, err := Parse(strings.NewReader(step.file))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Reload(next, DefaultRetireGrace); err != nil {
				t.Fatalf("%s: agent %d: %v", step.name, i, err)
			}
			clk.Step(20 * time.Second) // the next node's kubelet is later
			checkAll(fmt.Sprintf("%s, %d of %d agents reloaded", step.name, i+1, len(agents)))
		}
	}
	for i, a := range agents {
		if a.SigningID() != "k2" || len(a.Retired()) != 1 {
			t.Fatalf("agent %d signs %s, retired %v", i, a.SigningID(), a.Retired())
		}
	}
	clk.Step(DefaultRetireGrace)
	checkAll("after the grace")
	for i, a := range agents {
		if _, err := a.Key("k1"); !errors.Is(err, ErrRetiredKey) {
			t.Fatalf("agent %d: k1 after the grace: %v", i, err)
		}
	}
}

// TestRetiredKeyGrace checks that a dropped key verifies for exactly the
// grace, that dropping it again does not extend it, and that it can come back
// while it still verifies.
func TestRetiredKeyGrace(t *testing.T) {
	clk := clocktesting.NewFakeClock(keyT0)
	k := ring(t, "k2", "b", "k1", "a")
	k.SetClock(clk)
	old, _ := k.Key("k1")

	change, err := k.Reload(ring(t, "k2", "b"), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	until := keyT0.Add(10 * time.Minute)
	if strings.Join(change.Retired, ",") != "k1" || !change.RetiredUntil.Equal(until) || change.SigningID != "k2" || !change.Changed() {
		t.Fatalf("change %+v", change)
	}
	if got := strings.Join(k.IDs(), ","); got != "k2" {
		t.Fatalf("IDs %s: retired keys are not current", got)
	}
	clk.SetTime(until.Add(-time.Nanosecond))
	if key, err := k.Key("k1"); err != nil || string(key) != string(old) {
		t.Fatalf("k1 just inside the grace: %v", err)
	}
	if r := k.Retired(); len(r) != 1 || r[0].ID != "k1" || !r[0].Until.Equal(until) || r[0].key != nil {
		t.Fatalf("Retired() = %+v", r)
	}

	// A later reload that still lacks k1 keeps its deadline.
	clk.SetTime(keyT0.Add(5 * time.Minute))
	if _, err := k.Reload(ring(t, "k2", "b", "k3", "c"), 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if r := k.Retired(); len(r) != 1 || !r[0].Until.Equal(until) {
		t.Fatalf("second drop moved the deadline: %+v", r)
	}

	clk.SetTime(until)
	_, err = k.Key("k1")
	if !errors.Is(err, ErrRetiredKey) || !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("k1 at the end of the grace: %v, want ErrRetiredKey wrapping ErrUnknownKey", err)
	}
	for _, want := range []string{`"k1"`, keyT0.Format(time.RFC3339), until.Format(time.RFC3339)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
	if r := k.Retired(); len(r) != 0 {
		t.Fatalf("Retired() after the grace = %+v", r)
	}
	// The next reload forgets it.
	change, err = k.Reload(ring(t, "k2", "b", "k3", "c"), 10*time.Minute)
	if err != nil || strings.Join(change.Expired, ",") != "k1" || change.Changed() {
		t.Fatalf("change %+v, %v", change, err)
	}
	if _, err := k.Key("k1"); !errors.Is(err, ErrUnknownKey) || errors.Is(err, ErrRetiredKey) {
		t.Fatalf("forgotten k1: %v", err)
	}
}

func TestRetiredKeyComesBack(t *testing.T) {
	clk := clocktesting.NewFakeClock(keyT0)
	k := ring(t, "k1", "a")
	k.SetClock(clk)
	if _, err := k.Reload(ring(t, "k2", "b"), time.Minute); err != nil {
		t.Fatal(err)
	}
	// An operator who dropped the old key too early puts it back.
	change, err := k.Reload(ring(t, "k1", "a", "k2", "b"), time.Minute)
	if err != nil || strings.Join(change.Restored, ",") != "k1" || len(change.Added) != 0 || len(change.Retired) != 0 {
		t.Fatalf("change %+v, %v", change, err)
	}
	clk.Step(time.Hour)
	if _, err := k.Key("k1"); err != nil || k.SigningID() != "k1" || len(k.Retired()) != 0 {
		t.Fatalf("restored k1: %v", err)
	}
}

// TestReloadRefusesReusedID checks that an id never changes meaning: not
// while current, not while retired and still verifying.
func TestReloadRefusesReusedID(t *testing.T) {
	clk := clocktesting.NewFakeClock(keyT0)
	k := ring(t, "k1", "a", "k2", "b")
	k.SetClock(clk)
	k1, _ := k.Key("k1")
	for _, tc := range []struct {
		name string
		next *Ring
	}{
		{"current id, new bytes", ring(t, "k1", "x", "k2", "b")},
		{"current id, new bytes, moved", ring(t, "k2", "b", "k1", "x")},
	} {
		_, err := k.Reload(tc.next, time.Minute)
		if !errors.Is(err, ErrKeyIDReused) || !strings.Contains(err.Error(), `"k1"`) {
			t.Fatalf("%s: err %v, want ErrKeyIDReused naming k1", tc.name, err)
		}
		if got, _ := k.Key("k1"); string(got) != string(k1) || k.SigningID() != "k1" || len(k.IDs()) != 2 {
			t.Fatalf("%s: a refused reload changed the keys", tc.name)
		}
	}
	if _, err := k.Reload(ring(t, "k2", "b"), time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err := k.Reload(ring(t, "k2", "b", "k1", "x"), time.Minute)
	if !errors.Is(err, ErrKeyIDReused) || !strings.Contains(err.Error(), "retired") {
		t.Fatalf("retired id, new bytes: %v", err)
	}
	// Once its grace passed, the id is free again.
	clk.Step(time.Minute)
	if _, err := k.Reload(ring(t, "k2", "b", "k1", "x"), time.Minute); err != nil {
		t.Fatalf("id reused after its grace: %v", err)
	}

	if _, err := k.Reload(nil, time.Minute); err == nil {
		t.Error("Reload(nil) accepted")
	}
	if _, err := k.Reload(ring(t, "k9", "z"), 0); err == nil || !strings.Contains(err.Error(), "grace") {
		t.Errorf("zero grace: %v", err)
	}
}

// TestKeyringConcurrentReload runs readers against a keyring that rotates
// under them (run with -race): every signing id a reader sees verifies, with
// the bytes it was signed with.
func TestKeyringConcurrentReload(t *testing.T) {
	files := []*Ring{
		ring(t, "k1", "a", "k2", "b"), ring(t, "k2", "b", "k1", "a"), ring(t, "k2", "b"),
		ring(t, "k2", "b", "k3", "c"), ring(t, "k3", "c", "k2", "b"), ring(t, "k3", "c"),
	}
	k := ring(t, "k1", "a")
	var (
		wg   sync.WaitGroup
		stop = make(chan struct{})
		errs = make(chan error, 4)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, key := k.SigningKey()
				got, err := k.Key(id)
				if err == nil && string(got) != string(key) {
					err = fmt.Errorf("key %q changed bytes", id)
				}
				if err == nil && len(k.IDs()) == 0 {
					err = errors.New("no current keys")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, next := range files {
		if _, err := k.Reload(next, time.Hour); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if k.SigningID() != "k3" || len(k.Retired()) != 2 {
		t.Fatalf("signs %s, retired %+v", k.SigningID(), k.Retired())
	}
}

// keyDir is a Secret volume as the kubelet writes it: the file name is a
// symlink through `..data` into a timestamped directory, and an update writes
// a new directory and swaps `..data`.
type keyDir struct {
	t    *testing.T
	dir  string
	gen  int
	path string // what --key-file names
}

func newKeyDir(t *testing.T, content string) *keyDir {
	d := &keyDir{t: t, dir: t.TempDir()}
	d.path = filepath.Join(d.dir, "zone.key")
	d.update(content)
	if err := os.Symlink(filepath.Join("..data", "zone.key"), d.path); err != nil {
		t.Fatal(err)
	}
	return d
}

// update swaps in content the way the kubelet's AtomicWriter does, with the
// old file's mtime, so that only the content tells the change.
func (d *keyDir) update(content string) {
	d.t.Helper()
	d.gen++
	ts := filepath.Join(d.dir, fmt.Sprintf("..2026_03_01_12_00_0%d.000", d.gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		d.t.Fatal(err)
	}
	file := filepath.Join(ts, "zone.key")
	if err := os.WriteFile(file, []byte(content), 0o400); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Chtimes(file, keyT0, keyT0); err != nil {
		d.t.Fatal(err)
	}
	tmp := filepath.Join(d.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		d.t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(d.dir, "..data"))
	if err := os.Rename(tmp, filepath.Join(d.dir, "..data")); err != nil {
		d.t.Fatal(err)
	}
	if old != "" {
		os.RemoveAll(filepath.Join(d.dir, old))
	}
}

func newTestWatcher(t *testing.T, path string, k *Ring, tick *clocktesting.FakeClock) (*Watcher, *prometheus.Registry, *syncbuf.Buffer) {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncbuf.Buffer{}
	w, err := NewWatcher(path, k, WatchConfig{Period: 10 * time.Second, RetireGrace: 10 * time.Minute, Clock: tick,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("watcher logs:\n%s", logs.String())
		}
	})
	return w, reg, logs
}

// TestWatchKeyFileFollowsSecretSwap runs the watcher through a Secret-style
// symlink swap of a file with the same size and mtime.
func TestWatchKeyFileFollowsSecretSwap(t *testing.T) {
	d := newKeyDir(t, keyLines("k1", "a", "k2", "b"))
	k, err := LoadFile(d.path)
	if err != nil {
		t.Fatal(err)
	}
	keyClock, tick := clocktesting.NewFakeClock(keyT0), clocktesting.NewFakeClock(keyT0)
	k.SetClock(keyClock)
	w, reg, logs := newTestWatcher(t, d.path, k, tick)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	d.update(keyLines("k2", "b", "k1", "a")) // same size, same mtime
	poll.UntilTrue(t, 10*time.Second, "the watcher to load the swapped file", func() bool {
		tick.Step(10 * time.Second)
		return k.SigningID() == "k2"
	})
	d.update(keyLines("k2", "b"))
	// The log line is the last thing a reload does.
	poll.UntilTrue(t, 10*time.Second, "the watcher to drop k1", func() bool {
		tick.Step(10 * time.Second)
		return strings.Contains(logs.String(), "retired=[k1]")
	})
	if got := testutil.ToFloat64(w.reloads.WithLabelValues("ok")); got != 2 {
		t.Errorf("ok reloads %v, want 2 (the first poll of the unchanged file is no reload)", got)
	}
	want := `
# HELP edgequorum_keys_retired Zone key ids dropped from the key file that still verify until their retire grace ends.
# TYPE edgequorum_keys_retired gauge
edgequorum_keys_retired 1
# HELP edgequorum_keys_info 1 for each zone key id this agent accepts, by state: signing (the key file's first line), verifying (another line), retired (dropped, in its grace).
# TYPE edgequorum_keys_info gauge
edgequorum_keys_info{id="k1",state="retired"} 1
edgequorum_keys_info{id="k2",state="signing"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgequorum_keys_retired", "edgequorum_keys_info"); err != nil {
		t.Error(err)
	}
	for _, line := range []string{`msg="zone keys reloaded"`, "signingKeyID=k2", "previousSigningKeyID=k1", "retired=[k1]", "retiredUntil=2026-03-01T12:10:00Z"} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("logs lack %s", line)
		}
	}
	// The grace ends at scrape time, without waiting for a poll.
	keyClock.Step(10 * time.Minute)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.NewReplacer(
		"edgequorum_keys_retired 1", "edgequorum_keys_retired 0",
		"edgequorum_keys_info{id=\"k1\",state=\"retired\"} 1\n", "").Replace(want)),
		"edgequorum_keys_retired", "edgequorum_keys_info"); err != nil {
		t.Error(err)
	}
}

// TestKeyWatcherKeepsKeysOnBadFile polls by hand: a file with a bad line, a
// reused id or no file at all keeps the keys in use, is counted once per
// distinct content, and a good file afterwards is loaded.
func TestKeyWatcherKeepsKeysOnBadFile(t *testing.T) {
	d := newKeyDir(t, keyLines("k1", "a"))
	k, err := LoadFile(d.path)
	if err != nil {
		t.Fatal(err)
	}
	k.SetClock(clocktesting.NewFakeClock(keyT0))
	w, _, logs := newTestWatcher(t, d.path, k, clocktesting.NewFakeClock(keyT0))
	errorsCounted := func() float64 { return testutil.ToFloat64(w.reloads.WithLabelValues("error")) }
	okCounted := func() float64 { return testutil.ToFloat64(w.reloads.WithLabelValues("ok")) }

	w.poll() // the file the agent started with
	if okCounted() != 0 || errorsCounted() != 0 {
		t.Fatalf("first poll counted ok=%v error=%v", okCounted(), errorsCounted())
	}
	if !strings.Contains(logs.String(), `msg="zone keys in use"`) || !strings.Contains(logs.String(), "signingKeyID=k1") {
		t.Fatalf("first poll does not say which keys are in use:\n%s", logs.String())
	}
	for i, tc := range []struct{ name, content, logged string }{
		{"bad line", keyLines("k2", "b") + "k1 not a key line\n" + keyLines("k1", "a"), "line 2: want id:base64"},
		{"reused id", keyLines("k1", "x"), `key id \"k1\" already names another key`},
		{"empty", "", "no keys"},
	} {
		d.update(tc.content)
		w.poll()
		w.poll() // the same bad content is reported once
		if got := errorsCounted(); got != float64(i+1) {
			t.Fatalf("%s: %v errors counted, want %d", tc.name, got, i+1)
		}
		if k.SigningID() != "k1" || len(k.IDs()) != 1 {
			t.Fatalf("%s: keys changed to %v", tc.name, k.IDs())
		}
		if !strings.Contains(logs.String(), tc.logged) {
			t.Fatalf("%s: logs lack %q", tc.name, tc.logged)
		}
	}
	os.Remove(d.path)
	w.poll()
	w.poll()
	if got := errorsCounted(); got != 4 || !strings.Contains(logs.String(), "cannot read the zone key file") {
		t.Fatalf("missing file: %v errors counted", got)
	}
	if err := os.Symlink(filepath.Join("..data", "zone.key"), d.path); err != nil {
		t.Fatal(err)
	}
	d.update(keyLines("k2", "b", "k1", "a"))
	w.poll()
	if k.SigningID() != "k2" || okCounted() != 1 || errorsCounted() != 4 {
		t.Fatalf("good file after bad ones: signs %s, ok=%v error=%v", k.SigningID(), okCounted(), errorsCounted())
	}
}

// TestKeyWatcherLogsExpiry checks the one line an operator gets when a
// retired key stops verifying.
func TestKeyWatcherLogsExpiry(t *testing.T) {
	d := newKeyDir(t, keyLines("k2", "b", "k1", "a"))
	k, err := LoadFile(d.path)
	if err != nil {
		t.Fatal(err)
	}
	keyClock := clocktesting.NewFakeClock(keyT0)
	k.SetClock(keyClock)
	w, _, logs := newTestWatcher(t, d.path, k, clocktesting.NewFakeClock(keyT0))
	w.poll()
	d.update(keyLines("k2", "b"))
	w.poll()
	keyClock.Step(10*time.Minute - time.Second)
	w.poll()
	if strings.Contains(logs.String(), "stopped verifying") {
		t.Fatal("expiry logged inside the grace")
	}
	keyClock.Step(time.Second)
	w.poll()
	w.poll()
	if n := strings.Count(logs.String(), `msg="retired zone key stopped verifying" keyID=k1`); n != 1 {
		t.Fatalf("expiry logged %d times:\n%s", n, logs.String())
	}
}

func TestNewKeyWatcherChecksConfig(t *testing.T) {
	k := ring(t, "k1", "a")
	for _, cfg := range []WatchConfig{{Period: -time.Second}, {RetireGrace: -time.Second}} {
		if _, err := NewWatcher("/x", k, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	reg := prometheus.NewRegistry()
	if _, err := NewWatcher("/x", k, WatchConfig{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	// A second watcher of the same keyring shares the series; another
	// keyring on the same registry is refused instead of exporting the wrong one.
	if _, err := NewWatcher("/x", k, WatchConfig{Registerer: reg}); err != nil {
		t.Fatalf("same keyring again: %v", err)
	}
	if _, err := NewWatcher("/x", ring(t, "k9", "z"), WatchConfig{Registerer: reg}); err == nil {
		t.Fatal("another keyring on the same registry accepted")
	}
}

// ring is a Ring of the given id, fill-character pairs (see keyLines).
func ring(t *testing.T, pairs ...string) *Ring {
	t.Helper()
	k, err := Parse(strings.NewReader(keyLines(pairs...)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
