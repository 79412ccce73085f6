package raftzone

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgequorum/edgequorum/raftzone/seats"
	"github.com/edgequorum/edgequorum/zone"
)

func TestVerdictChanges(t *testing.T) {
	tally := map[string]zone.Verdict{
		"a": {Node: "a", State: zone.Healthy},
		"b": {Node: "b", State: zone.Unknown},
		"c": {Node: "c", State: zone.Unhealthy},
		"d": {Node: "d", State: zone.Healthy},
	}
	committed := map[string]zone.Verdict{
		"a": {Node: "a", State: zone.Healthy},   // unchanged: skipped
		"b": {Node: "b", State: zone.Unhealthy}, // unknown keeps it
		"c": {Node: "c", State: zone.Healthy},   // flips
		// d has no verdict yet
	}
	got := verdictChanges(tally, committed)
	if fmt.Sprint(got) != fmt.Sprint([]zone.Verdict{tally["c"], tally["d"]}) {
		t.Fatalf("changes = %v", got)
	}
}

func TestDesiredVoters(t *testing.T) {
	for _, tc := range []struct{ m, limit, want int }{
		{0, 5, 1}, {1, 5, 1}, {2, 5, 2}, {3, 5, 3}, {4, 5, 4}, {5, 5, 5}, {6, 5, 5}, {129, 5, 5}, {129, 7, 7}, {4, 3, 3},
	} {
		if got := seats.DesiredVoters(tc.m, tc.limit); got != tc.want {
			t.Errorf("seats.DesiredVoters(%d, %d) = %d, want %d", tc.m, tc.limit, got, tc.want)
		}
	}
}

func TestConfigValidateNamesFlags(t *testing.T) {
	good := DefaultConfig()
	good.Node, good.Zone, good.AdvertiseAddress, good.DataDir = "n", "z", "127.0.0.1", "/tmp/x"
	good.Keys = testKeys(t)
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	tests := []struct {
		flag   string
		mutate func(*Config)
	}{
		{"--node-name", func(c *Config) { c.Node = "" }},
		{"--advertise-address", func(c *Config) { c.AdvertiseAddress = "node-1" }},
		{"--data-dir", func(c *Config) { c.DataDir = " " }},
		{"--key-file", func(c *Config) { c.Keys = nil }},
		{"--voters", func(c *Config) { c.Voters = 4 }},
		{"--standbys", func(c *Config) { c.Standbys = -1 }},
		{"--peer-port", func(c *Config) { c.PeerPort = 70000 }},
		{"--vote-period", func(c *Config) { c.VotePeriod = 0 }},
		{"--vote-timeout", func(c *Config) { c.VoteTimeout = c.ReportPeriod }},
		{"--report-batch-window", func(c *Config) { c.BatchWindow = c.ReportPeriod }},
		{"--heartbeat-batch-window", func(c *Config) { c.HeartbeatBatchWindow = c.ReportPeriod }},
		{"--heartbeat-batch-window", func(c *Config) { c.HeartbeatBatchWindow = -time.Second }},
		{"--heartbeat-batch-window", func(c *Config) { c.HeartbeatBatchWindow = c.BatchWindow / 2 }},
		// The window left at its default: the message names the flag the
		// operator set and the one that would fix it.
		{"--report-batch-window 1.9s must not be longer than the heartbeat batch window, which defaults to nine tenths of --report-period (1.8s); shorten it or set --heartbeat-batch-window",
			func(c *Config) { c.BatchWindow = 1900 * time.Millisecond }},
		{"--raft-leader-lease-timeout", func(c *Config) { c.RaftLeaderLeaseTimeout = 2 * c.RaftHeartbeatTimeout }},
		{"--raft-heartbeat-interval", func(c *Config) { c.RaftHeartbeatInterval = c.RaftHeartbeatTimeout }},
		{"--raft-heartbeat-interval", func(c *Config) { c.RaftHeartbeatInterval = -time.Second }},
		{"--raft-leader-lease-timeout", func(c *Config) {
			c.RaftHeartbeatInterval, c.RaftLeaderLeaseTimeout = c.RaftHeartbeatTimeout/2, c.RaftHeartbeatTimeout/2
		}},
	}
	for _, tc := range tests {
		c := good
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: err = %v", tc.flag, err)
		}
	}

	// The heartbeat batch window follows the report period unless set, so
	// an operator who only shortens the period gets a window that fits it.
	if got := good.heartbeatBatchWindow(); got != 1800*time.Millisecond {
		t.Errorf("default heartbeat batch window at a 2s report period = %s, want 1.8s", got)
	}
	fast := good
	fast.ReportPeriod, fast.VoteTimeout = time.Second, 5*time.Second
	if err := fast.Validate(); err != nil || fast.heartbeatBatchWindow() != 900*time.Millisecond {
		t.Errorf("--report-period 1s alone: err %v, window %s; want valid, 900ms", err, fast.heartbeatBatchWindow())
	}
	noPeriod := good
	noPeriod.ReportPeriod = 0
	if err := noPeriod.Validate(); err == nil || strings.Contains(err.Error(), "heartbeat batch window") || strings.Contains(err.Error(), "--heartbeat-batch-window") {
		t.Errorf("--report-period 0: want the period's error alone, not one about the window that follows it; got %v", err)
	}
}
