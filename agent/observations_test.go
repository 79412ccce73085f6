package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/probe"
	"github.com/edgequorum/edgequorum/zoneport"
)

type fakePeers struct {
	mu      sync.Mutex
	peers   []zoneport.Candidate
	started chan struct{}
}

func (f *fakePeers) Peers() []zoneport.Candidate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]zoneport.Candidate(nil), f.peers...)
}

func (f *fakePeers) Started() <-chan struct{} { return f.started }

func (f *fakePeers) set(ps ...zoneport.Candidate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers = ps
}

// fakeTargets records what syncTargets asked for: the current targets and
// how many times each was (re)added.
type fakeTargets struct {
	mu      sync.Mutex
	targets map[string]probe.Target
	adds    int
}

func (f *fakeTargets) AddTarget(name string, t probe.Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets[name] = t
	f.adds++
}

func (f *fakeTargets) RemoveTarget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.targets, name)
}

func (f *fakeTargets) snapshot() (map[string]probe.Target, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.targets), f.adds
}

func TestSyncTargetsFollowsPeers(t *testing.T) {
	src := &fakePeers{started: make(chan struct{})}
	dst := &fakeTargets{targets: map[string]probe.Target{}}
	src.set(zoneport.Candidate{Node: "b", ProbeAddress: "127.0.0.2"}, zoneport.Candidate{Node: "c", ProbeAddress: "127.0.0.3"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		syncTargets(ctx, dst, src, "zone-a", time.Millisecond, nil, slog.New(slog.DiscardHandler))
	}()
	defer func() { cancel(); <-done }()

	waitTargets := func(what string, want map[string]probe.Target) {
		t.Helper()
		poll.Until(t, 10*time.Second, what, func() (bool, string) {
			got, _ := dst.snapshot()
			return maps.Equal(got, want), fmt.Sprint(got)
		})
	}
	close(src.started)
	waitTargets("the first peers", map[string]probe.Target{"b": {Host: "127.0.0.2"}, "c": {Host: "127.0.0.3"}})

	src.set(zoneport.Candidate{Node: "b", ProbeAddress: "127.0.0.20"})
	waitTargets("b moved and c gone", map[string]probe.Target{"b": {Host: "127.0.0.20"}})
	_, adds := dst.snapshot()
	if adds != 3 {
		t.Fatalf("%d AddTarget calls, want 3: unchanged peers are not re-added, moved ones are", adds)
	}

	// b's kubelet publishes another port: its probes follow.
	src.set(zoneport.Candidate{Node: "b", ProbeAddress: "127.0.0.20", KubeletPort: 10350})
	waitTargets("b's kubelet port", map[string]probe.Target{"b": {Host: "127.0.0.20", KubeletPort: 10350}})
}
