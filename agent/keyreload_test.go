package agent

import (
	"context"
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/edgequorum/edgequorum/internal/poll"
	"github.com/edgequorum/edgequorum/zonekeys"
)

// writeKeyFile replaces path atomically, as a Secret volume update does: a
// poll never sees half a file.
func writeKeyFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func keyFileLine(id, fill string) string {
	return id + ":" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(fill, 32))) + "\n"
}

// TestKeyReloadFollowsTheKeyFile runs the agent's key reload on its real
// clock: a rotated key file reaches the keyring the zone parts share.
func TestKeyReloadFollowsTheKeyFile(t *testing.T) {
	cfg := validConfig()
	cfg.KeyFile = filepath.Join(t.TempDir(), "zone.key")
	cfg.KeyReloadPeriod = 5 * time.Millisecond
	writeKeyFile(t, cfg.KeyFile, keyFileLine("k1", "a"))
	keys, err := zonekeys.LoadFile(cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w, err := newKeyReload(cfg, keys, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	writeKeyFile(t, cfg.KeyFile, keyFileLine("k2", "b")+keyFileLine("k1", "a"))
	poll.UntilTrue(t, 10*time.Second, "the agent to sign with k2", func() bool { return keys.SigningID() == "k2" })
	writeKeyFile(t, cfg.KeyFile, "k3:not-base64\n")
	poll.Until(t, 10*time.Second, "the bad file to be counted", func() (bool, string) {
		n, err := testutil.GatherAndCount(reg, "edgequorum_keys_reloads_total")
		if err != nil || n != 2 {
			return false, "series missing"
		}
		want := "\n# HELP edgequorum_keys_reloads_total Changes of the zone key file this agent read, by result: ok (the new keys are in use) or error (the file was refused and the keys in use were kept).\n" +
			"# TYPE edgequorum_keys_reloads_total counter\n" +
			"edgequorum_keys_reloads_total{result=\"error\"} 1\nedgequorum_keys_reloads_total{result=\"ok\"} 1\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "edgequorum_keys_reloads_total"); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if got := strings.Join(keys.IDs(), ","); got != "k2,k1" {
		t.Fatalf("keys after a bad file: %s", got)
	}
}

func TestKeyReloadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		flag string
	}{
		{"zero grace", func(c *Config) { c.KeyRetireGrace = 0 }, "--key-retire-grace"},
		{"negative grace", func(c *Config) { c.KeyRetireGrace = -time.Minute }, "--key-retire-grace"},
		{"zero period", func(c *Config) { c.KeyReloadPeriod = 0 }, "--key-reload-period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag+" must be positive") {
				t.Fatalf("Validate = %v; want one naming %s", err, tc.flag)
			}
		})
	}
	c := validConfig()
	if c.KeyRetireGrace != 10*time.Minute || c.KeyReloadPeriod != 10*time.Second {
		t.Fatalf("defaults grace %s, period %s", c.KeyRetireGrace, c.KeyReloadPeriod)
	}
	c.KeyRetireGrace = time.Minute
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(c.Warnings(), "\n"); !strings.Contains(w, "--key-retire-grace 1m0s") || !strings.Contains(w, "--key-reload-period 10s") {
		t.Fatalf("a grace shorter than Secret propagation does not warn: %q", w)
	}
}
