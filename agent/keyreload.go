package agent

import (
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgequorum/edgequorum/zonekeys"
)

// newKeyReload builds the watcher that rereads --key-file every
// --key-reload-period into keys, the keyring the zone port, the reporter and
// the intake share, so that a rotated key Secret takes effect without
// restarting the agent. Keys dropped from the file keep verifying for
// --key-retire-grace. Its Run never fails: a bad file is logged and counted
// (edgequorum_keys_reloads_total{result="error"}) and the keys in use stay.
func newKeyReload(cfg Config, keys *zonekeys.Ring, log *slog.Logger, reg prometheus.Registerer) (*zonekeys.Watcher, error) {
	w, err := zonekeys.NewWatcher(cfg.KeyFile, keys, zonekeys.WatchConfig{
		Period:      cfg.KeyReloadPeriod,
		RetireGrace: cfg.KeyRetireGrace,
		Logger:      log.With("component", "keys"),
		Registerer:  reg,
	})
	if err != nil {
		return nil, fmt.Errorf("--key-file reload: %w", err)
	}
	return w, nil
}
