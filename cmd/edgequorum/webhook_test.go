package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/edgequorum/edgequorum/admission"
)

// TestWebhookUsage: every configuration mistake exits 2 with the flag named,
// before any connection to a cluster is tried.
func TestWebhookUsage(t *testing.T) {
	dir := t.TempDir()
	if code := run(context.Background(), []string{"certs", "--out-dir", dir}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("certs: exit %d", code)
	}
	tls := []string{"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-key-file", filepath.Join(dir, "tls.key")}
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"no TLS pair", nil, "--tls-secret, or --tls-cert-file and --tls-key-file, is required"},
		{"no key", []string{"--tls-cert-file", "x"}, "--tls-secret, or --tls-cert-file and --tls-key-file, is required"},
		{"files and a Secret", append([]string{"--tls-secret", "tls"}, tls...), "exclude each other"},
		{"managed without a Secret", append([]string{"--manage-certs"}, tls...), "--manage-certs needs --tls-secret"},
		{"managed without the repair loop", []string{"--tls-secret", "tls", "--manage-certs", "--repair=false"}, "--manage-certs needs --repair"},
		{"CA shorter than its certificates", []string{"--tls-secret", "tls", "--manage-certs", "--ca-validity", "1h", "--cert-validity", "2h"}, "--ca-validity"},
		{"bad IP SAN", []string{"--tls-secret", "tls", "--tls-ip-sans", "10.0.0.300"}, "tls-ip-sans"},
		{"bad listen address", append([]string{"--listen-address", "9443"}, tls...), "--listen-address"},
		{"bad lease namespace", append([]string{"--lease-namespace", "Not_A_Namespace"}, tls...), "--lease-namespace"},
		{"bad election namespace", append([]string{"--leader-election-namespace", "Not_A_Namespace"}, tls...), "--leader-election-namespace"},
		{"bad zone label", append([]string{"--zone-label", "a/b/c"}, tls...), "--zone-label"},
		{"negative zone lease cap", append([]string{"--max-zone-lease-duration", "-1s"}, tls...), "--max-zone-lease-duration"},
		{"negative protection", append([]string{"--max-cutoff-protection", "-1h"}, tls...), "--max-cutoff-protection"},
		{"slack below a second", append([]string{"--pod-ready-slack", "100ms"}, tls...), "--pod-ready-slack"},
		{"election timers", append([]string{"--leader-elect-lease-duration", "5s"}, tls...), "--leader-elect-lease-duration"},
		{"repair qps", append([]string{"--repair-qps", "0"}, tls...), "--repair-qps"},
		{"tiny body limit", append([]string{"--max-request-bytes", "10"}, tls...), "--max-request-bytes"},
		{"bad log level", append([]string{"--log-level", "loud"}, tls...), "--log-level"},
		{"tiny memory limit", append([]string{"--memory-limit", "1Mi"}, tls...), "--memory-limit"},
		{"memory limit not a quantity", append([]string{"--memory-limit", "lots"}, tls...), "memory-limit"},
		{"unknown flag", []string{"--nope"}, "nope"},
		{"not a duration", []string{"--node-lease-max-age", "soon"}, "node-lease-max-age"},
		// The zone Lease's own leaseDurationSeconds says how long it holds.
		{"removed zone lease age", append([]string{"--zone-lease-max-age", "20s"}, tls...), "zone-lease-max-age"},
		{"stray argument", append([]string{"extra"}, tls...), "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := run(context.Background(), append([]string{"webhook"}, tt.args...), &bytes.Buffer{}, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), tt.says) {
				t.Errorf("exit %d, stderr %q; want 2 mentioning %q", code, stderr.String(), tt.says)
			}
		})
	}
}

// TestWebhookNeedsACluster: with valid flags and no reachable cluster config
// the command fails at run time (exit 1), naming what it tried.
func TestWebhookNeedsACluster(t *testing.T) {
	dir := t.TempDir()
	if code := run(context.Background(), []string{"certs", "--out-dir", dir}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("certs: exit %d", code)
	}
	missing := filepath.Join(dir, "no-kubeconfig")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"webhook", "--kubeconfig", missing,
		"--tls-cert-file", filepath.Join(dir, "tls.crt"), "--tls-key-file", filepath.Join(dir, "tls.key")}, &bytes.Buffer{}, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "--kubeconfig") {
		t.Errorf("exit %d, stderr %q; want 1 naming --kubeconfig", code, stderr.String())
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("the command created the kubeconfig it was pointed at")
	}
}

func TestWebhookHelp(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"webhook", "--help"}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, flag := range []string{"-tls-cert-file", "-max-zone-lease-duration", "-max-cutoff-protection", "-dry-run", "-repair", "-listen-address", "-leader-election-namespace"} {
		if !strings.Contains(stderr.String(), flag) {
			t.Errorf("--help does not list %s", flag)
		}
	}
}

// TestClientLimitsLeaveTheWebhookItsOwnPace: the API clients' rate limit is
// above what the repair loop and the zone view may write together, so their
// own limits, which the operator sets, are what bind.
func TestClientLimitsLeaveTheWebhookItsOwnPace(t *testing.T) {
	cfg := admission.DefaultConfig()
	cfg.RepairQPS, cfg.RepairBurst, cfg.ZoneStatusQPS, cfg.ZoneStatusBurst = 40, 80, 100, 200
	var c rest.Config
	clientLimits(&c, cfg)
	if float64(c.QPS) <= cfg.RepairQPS+cfg.ZoneStatusQPS {
		t.Errorf("client QPS %g binds before --repair-qps %g and --zone-status-qps %g", c.QPS, cfg.RepairQPS, cfg.ZoneStatusQPS)
	}
	if c.Burst <= cfg.RepairBurst+cfg.ZoneStatusBurst {
		t.Errorf("client burst %d binds before the repair and zone status bursts %d and %d", c.Burst, cfg.RepairBurst, cfg.ZoneStatusBurst)
	}
}
