package zonekeys

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// DefaultReloadPeriod is how often a Watcher reads the key file
// [--key-reload-period].
const DefaultReloadPeriod = 10 * time.Second

// maxKeyFileBytes bounds what a Watcher reads: a key file holds a handful
// of short lines, and a huge file is a mistake that must not cost memory every
// poll.
const maxKeyFileBytes = 64 << 10

// WatchConfig configures a Watcher. Zero fields take their defaults.
type WatchConfig struct {
	// Period is how often the file is read; DefaultReloadPeriod if zero.
	Period time.Duration
	// RetireGrace is how long a dropped key id keeps verifying;
	// DefaultRetireGrace if zero.
	RetireGrace time.Duration
	// Clock paces the polls; the real clock if nil. Retirements are dated by
	// the Ring's own clock (Ring.SetClock).
	Clock clock.WithTicker
	// Logger receives one line per reload, refused file and expired key;
	// slog.Default() if nil.
	Logger *slog.Logger
	// Registerer receives the metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// Watcher reloads a Ring from its key file while the agent runs, so
// that zone keys rotate without restarting agents.
//
// It polls the file's content instead of watching it: a Kubernetes Secret
// volume updates by writing a new directory and swapping the `..data` symlink
// the file name resolves through, which inotify on the file does not report,
// and which leaves the old file's mtime and size untouched. Reading the whole
// (tiny) file through its path and comparing a hash of it sees every change,
// however it was made, including a rewrite in place within one mtime tick.
//
// A file that cannot be read or parsed, or that Reload refuses, changes
// nothing: the keys in use stay, the error is logged and counted once per
// distinct content, and the watcher keeps polling. A bad key file never stops
// the agent.
//
// A file rewritten in place, outside Kubernetes, can be read half-written. The
// half is refused, or if it happens to parse, the keys it lacks retire and come
// back on the next poll, within their grace; either way nothing stops
// verifying. Replace such a file atomically (write a copy, rename it) all the
// same.
type Watcher struct {
	path string
	keys *Ring
	cfg  WatchConfig
	log  *slog.Logger

	reloads *prometheus.CounterVec

	// Only the Run goroutine touches these.
	handled  bool     // sum holds the content last handled
	sum      [32]byte // sha256 of that content
	readErr  string   // the read error last reported, to report it once
	inGrace  []string // retired ids that verified at the last poll
	baseline bool     // the first poll is done
}

// NewWatcher checks cfg and registers the metrics of a watcher that
// reloads k from path. Run starts it.
func NewWatcher(path string, k *Ring, cfg WatchConfig) (*Watcher, error) {
	if path == "" || k == nil {
		return nil, errors.New("key watcher needs a key file and a keyring")
	}
	if cfg.Period < 0 {
		return nil, fmt.Errorf("key reload period %s must be positive", cfg.Period)
	}
	if cfg.RetireGrace < 0 {
		return nil, fmt.Errorf("key retire grace %s must be positive", cfg.RetireGrace)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultReloadPeriod
	}
	if cfg.RetireGrace == 0 {
		cfg.RetireGrace = DefaultRetireGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Watcher{path: path, keys: k, cfg: cfg, log: cfg.Logger,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgequorum_keys_reloads_total",
			Help: "Changes of the zone key file this agent read, by result: ok (the new keys are in use) or error (the file was refused and the keys in use were kept).",
		}, []string{"result"})}
	// Both series exist from the start, so that an alert on the error rate
	// sees a zero before the first failure.
	w.reloads.WithLabelValues("ok")
	w.reloads.WithLabelValues("error")
	if cfg.Registerer != nil {
		var err error
		if w.reloads, err = promutil.Register(cfg.Registerer, w.reloads); err != nil {
			return nil, fmt.Errorf("key watcher metrics: %w", err)
		}
		if err := registerKeyringCollector(cfg.Registerer, k); err != nil {
			return nil, fmt.Errorf("key watcher metrics: %w", err)
		}
	}
	return w, nil
}

// WatchFile reloads k from path every cfg.Period until ctx ends
// (NewWatcher, then Run).
func WatchFile(ctx context.Context, path string, k *Ring, cfg WatchConfig) error {
	w, err := NewWatcher(path, k, cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Run polls the key file at once and then every period until ctx ends. It
// returns nil: no key file problem is worth stopping the agent for, since the
// keys in use still work.
func (w *Watcher) Run(ctx context.Context) error {
	t := w.cfg.Clock.NewTicker(w.cfg.Period)
	defer t.Stop()
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// poll reads the file once and reloads the keyring if the content changed.
func (w *Watcher) poll() {
	defer w.noteExpired()
	data, err := readKeyFile(w.path)
	if err != nil {
		w.baseline = true
		if msg := err.Error(); msg != w.readErr {
			w.readErr = msg
			w.reloads.WithLabelValues("error").Inc()
			w.log.Error("cannot read the zone key file; keeping the keys in use", "path", w.path, "signingKeyID", w.keys.SigningID(), "err", err)
		}
		return
	}
	if w.readErr != "" {
		w.readErr = ""
		w.log.Info("zone key file readable again", "path", w.path)
	}
	sum := sha256.Sum256(data)
	if w.handled && sum == w.sum {
		return
	}
	w.handled, w.sum = true, sum
	next, err := Parse(bytes.NewReader(data))
	if err == nil && !w.baseline && w.keys.sameKeys(next) {
		// The file the agent started with: nothing to reload or count, but
		// one line saying which keys are in use, so that during a rotation
		// an agent that restarted can be checked like one that reloaded.
		w.baseline = true
		w.log.Info("zone keys in use", "path", w.path, "signingKeyID", w.keys.SigningID(), "keyIDs", w.keys.IDs())
		return
	}
	w.baseline = true
	if err != nil {
		w.refused(fmt.Errorf("key file %s: %w", w.path, err))
		return
	}
	change, err := w.keys.Reload(next, w.cfg.RetireGrace)
	if err != nil {
		w.refused(fmt.Errorf("key file %s: %w", w.path, err))
		return
	}
	w.reloads.WithLabelValues("ok").Inc()
	attrs := []any{"path", w.path, "signingKeyID", change.SigningID, "keyIDs", w.keys.IDs()}
	if change.SigningID != change.PreviousSigningID {
		attrs = append(attrs, "previousSigningKeyID", change.PreviousSigningID)
	}
	if len(change.Added) > 0 {
		attrs = append(attrs, "added", change.Added)
	}
	if len(change.Restored) > 0 {
		attrs = append(attrs, "restored", change.Restored)
	}
	if len(change.Retired) > 0 {
		attrs = append(attrs, "retired", change.Retired, "retiredUntil", change.RetiredUntil.UTC().Format(time.RFC3339))
	}
	w.log.Info("zone keys reloaded", attrs...)
}

func (w *Watcher) refused(err error) {
	w.reloads.WithLabelValues("error").Inc()
	w.log.Error("zone key file refused; keeping the keys in use", "signingKeyID", w.keys.SigningID(), "keyIDs", w.keys.IDs(), "err", err)
}

// noteExpired logs, once each, the retired ids whose grace passed since the
// last poll: from then on peers and reports still using them are refused.
func (w *Watcher) noteExpired() {
	var now []string
	for _, r := range w.keys.Retired() {
		now = append(now, r.ID)
	}
	for _, id := range w.inGrace {
		if !slices.Contains(now, id) && !slices.Contains(w.keys.IDs(), id) {
			w.log.Info("retired zone key stopped verifying", "keyID", id)
		}
	}
	w.inGrace = now
}

// readKeyFile reads path, following symlinks, up to maxKeyFileBytes.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("key file %s is larger than %d bytes", path, maxKeyFileBytes)
	}
	return data, nil
}

// keyringCollector exports a Ring's state as it is at scrape time, so that
// a retired key's grace ending shows without waiting for a poll.
type keyringCollector struct {
	k       *Ring
	retired *prometheus.Desc
	info    *prometheus.Desc
}

func registerKeyringCollector(reg prometheus.Registerer, k *Ring) error {
	c := &keyringCollector{k: k,
		retired: prometheus.NewDesc("edgequorum_keys_retired",
			"Zone key ids dropped from the key file that still verify until their retire grace ends.", nil, nil),
		info: prometheus.NewDesc("edgequorum_keys_info",
			"1 for each zone key id this agent accepts, by state: signing (the key file's first line), verifying (another line), retired (dropped, in its grace).",
			[]string{"id", "state"}, nil),
	}
	existing, err := promutil.Register(reg, c)
	if err != nil {
		return err
	}
	if existing.k != k {
		return errors.New("the registry already exports another keyring")
	}
	return nil
}

func (c *keyringCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.retired
	ch <- c.info
}

func (c *keyringCollector) Collect(ch chan<- prometheus.Metric) {
	ids, retired := c.k.IDs(), c.k.Retired()
	ch <- prometheus.MustNewConstMetric(c.retired, prometheus.GaugeValue, float64(len(retired)))
	for i, id := range ids {
		state := "verifying"
		if i == 0 {
			state = "signing"
		}
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, id, state)
	}
	for _, r := range retired {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, r.ID, "retired")
	}
}
