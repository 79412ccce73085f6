package raftzone

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/edgequorum/edgequorum/internal/promutil"
)

// MinKeyBytes is the shortest zone key accepted: HMAC-SHA256 keys shorter than the
// hash output weaken it, and a short key is usually a typo or an empty Secret.
const MinKeyBytes = 32

// ErrUnknownKey means a peer or a report named a key id this keyring lacks.
var ErrUnknownKey = errors.New("unknown key id")

// ErrRetiredKey means the key id was dropped from the key file and its retire
// grace has passed. It wraps ErrUnknownKey, so callers that sort failures by
// ErrUnknownKey (the transport's and the intake's "unknown_key" reason) count
// it there without knowing about rotation.
var ErrRetiredKey = fmt.Errorf("%w: retired", ErrUnknownKey)

// ErrKeyIDReused means a reload gave a key id that is in use (or retired and
// still in its grace) different key bytes. Such a reload is refused: a peer
// still holding the old bytes under that id would fail every MAC, with no
// second key to fall back on, so an id must never change meaning. A new key
// needs a new id.
var ErrKeyIDReused = errors.New("key id reused for different key bytes")

// DefaultRetireGrace is how long a key id dropped from the key file keeps
// verifying [--key-retire-grace]. It covers the stragglers of a rotation: the
// kubelet delivers a changed Secret to each node on its own schedule (about a
// minute), and each agent notices on its next poll.
const DefaultRetireGrace = 10 * time.Minute

// Keyring holds the zone keys. The first key signs; every key verifies, so an
// operator rotates by adding the new key second, then first, then dropping the
// old one, with no window in which two agents cannot talk.
//
// A Keyring is safe for concurrent use, and Reload swaps in a new key set while
// the transport and the reporter use it: every method reads one immutable
// snapshot, so a caller never sees the signing id of one key set with the key
// bytes of another.
type Keyring struct {
	cur atomic.Pointer[keySet]
	// clk dates retirements and tells when they expire; the real clock
	// unless SetClock.
	clk atomic.Pointer[clockHolder]
	// reload serialises Reload: each one derives the retired set from the
	// snapshot it replaces, so two at once must not both start from the same one.
	reload sync.Mutex
}

// keySet is one immutable snapshot of a Keyring.
type keySet struct {
	ids     []string          // current keys, signing order
	keys    map[string][]byte // current keys by id
	retired map[string]RetiredKey
}

// RetiredKey is a key id that was dropped from the key file and keeps
// verifying until Until.
type RetiredKey struct {
	ID string
	// RetiredAt is when the reload that dropped it happened.
	RetiredAt time.Time
	// Until is when it stops verifying: RetiredAt plus the retire grace.
	Until time.Time
	key   []byte
}

// clockHolder boxes a clock for atomic.Pointer, which needs a concrete type.
type clockHolder struct{ c clock.PassiveClock }

// NewKeyring builds a keyring from id/key pairs in signing order.
func NewKeyring(ids []string, keys [][]byte) (*Keyring, error) {
	if len(ids) == 0 || len(ids) != len(keys) {
		return nil, errors.New("keyring needs at least one key")
	}
	set := &keySet{keys: map[string][]byte{}}
	for i, id := range ids {
		if err := validKeyID(id); err != nil {
			return nil, err
		}
		if _, dup := set.keys[id]; dup {
			return nil, fmt.Errorf("key id %q appears twice", id)
		}
		if len(keys[i]) < MinKeyBytes {
			return nil, fmt.Errorf("key %q has %d bytes, need at least %d", id, len(keys[i]), MinKeyBytes)
		}
		set.ids = append(set.ids, id)
		set.keys[id] = bytes.Clone(keys[i])
	}
	k := &Keyring{}
	k.cur.Store(set)
	return k, nil
}

// LoadKeyFile reads a key file: one `id:base64` line per key, first line signs.
// Blank lines and lines starting with '#' are skipped. Every error names the file
// (and line), because the agent refuses to start without a usable key.
func LoadKeyFile(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	k, err := ParseKeys(f)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// ParseKeys parses the key file format from r.
func ParseKeys(r io.Reader) (*Keyring, error) {
	var ids []string
	var keys [][]byte
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		id, b64, ok := strings.Cut(text, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: want id:base64, found no ':'", line)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("line %d: key %q is not valid base64: %w", line, id, err)
		}
		ids = append(ids, strings.TrimSpace(id))
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("no keys (want one or more id:base64 lines)")
	}
	return NewKeyring(ids, keys)
}

// GenerateKeyLine returns a fresh `id:base64` line with a 32-byte random key.
func GenerateKeyLine(id string) (string, error) {
	if err := validKeyID(id); err != nil {
		return "", err
	}
	key := make([]byte, MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return id + ":" + base64.StdEncoding.EncodeToString(key), nil
}

func validKeyID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("key id %q must have 1 to 64 characters", id)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("key id %q may hold only letters, digits, '-', '_' and '.'", id)
		}
	}
	return nil
}

// SigningID is the id of the key new MACs are made with.
func (k *Keyring) SigningID() string { return k.cur.Load().ids[0] }

// SigningKey returns the key new MACs are made with. The id and the bytes come
// from the same key set even while a Reload runs.
func (k *Keyring) SigningKey() (string, []byte) {
	set := k.cur.Load()
	return set.ids[0], set.keys[set.ids[0]]
}

// Key returns the key with the given id: a current key, or a retired one whose
// grace has not passed yet. A retired key past its grace fails with
// ErrRetiredKey, which wraps ErrUnknownKey.
func (k *Keyring) Key(id string) ([]byte, error) {
	set := k.cur.Load()
	if key, ok := set.keys[id]; ok {
		return key, nil
	}
	if r, ok := set.retired[id]; ok {
		if k.now().Before(r.Until) {
			return r.key, nil
		}
		return nil, fmt.Errorf("%w key id %q: dropped from the key file at %s, stopped verifying at %s",
			ErrRetiredKey, id, r.RetiredAt.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339))
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownKey, id)
}

// IDs lists the current key ids in signing order; retired ones are not listed
// (see Retired).
func (k *Keyring) IDs() []string { return slices.Clone(k.cur.Load().ids) }

// Retired lists the retired key ids that still verify, soonest to expire
// first.
func (k *Keyring) Retired() []RetiredKey {
	set, now := k.cur.Load(), k.now()
	var out []RetiredKey
	for _, r := range set.retired {
		if now.Before(r.Until) {
			r.key = nil // the listing is for logs and metrics, not for MACs
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b RetiredKey) int {
		if c := a.Until.Compare(b.Until); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// SetClock sets the clock that dates retirements and expires retired keys;
// nil restores the real clock. Tests inject a fake one so that a grace passes
// without sleeping.
func (k *Keyring) SetClock(c clock.PassiveClock) {
	if c == nil {
		k.clk.Store(nil)
		return
	}
	k.clk.Store(&clockHolder{c})
}

func (k *Keyring) now() time.Time {
	if h := k.clk.Load(); h != nil {
		return h.c.Now()
	}
	return time.Now()
}

// KeyChange is what a Reload changed.
type KeyChange struct {
	// SigningID is the id that signs from now on (next's first key).
	SigningID string
	// PreviousSigningID is the id that signed before.
	PreviousSigningID string
	// Added are ids that were neither current nor retired before.
	Added []string
	// Retired are the ids this reload dropped; they verify until RetiredUntil.
	Retired      []string
	RetiredUntil time.Time
	// Restored are retired ids, still in their grace, that next brought back.
	Restored []string
	// Expired are retired ids whose grace had passed; this reload forgot them.
	Expired []string
}

// Changed reports whether the reload changed which keys sign or verify.
func (c KeyChange) Changed() bool {
	return c.SigningID != c.PreviousSigningID || len(c.Added) > 0 || len(c.Retired) > 0 || len(c.Restored) > 0
}

// Reload swaps next's keys in: next's first key signs from now on and all of
// its keys verify. A current key id that next lacks retires: it keeps
// verifying for grace, so that an agent the new key file has not reached yet
// (the kubelet updates Secret volumes node by node) can still talk to this
// one, and then stops. A retired id that comes back within its grace, with the
// same bytes, is current again; one whose grace passed is forgotten.
//
// Reload refuses, keeping the keys in use, when grace is not positive or when
// next gives a current or still-retired id other key bytes (ErrKeyIDReused);
// the error names the id. Only next's current keys count: its own retired keys
// are ignored. next is not used after Reload returns.
func (k *Keyring) Reload(next *Keyring, grace time.Duration) (KeyChange, error) {
	if next == nil || next == k {
		return KeyChange{}, errors.New("reload needs another keyring")
	}
	if grace <= 0 {
		return KeyChange{}, fmt.Errorf("retire grace %s must be positive", grace)
	}
	k.reload.Lock()
	defer k.reload.Unlock()
	old, in := k.cur.Load(), next.cur.Load()
	now := k.now()
	change := KeyChange{SigningID: in.ids[0], PreviousSigningID: old.ids[0]}
	out := &keySet{ids: slices.Clone(in.ids), keys: make(map[string][]byte, len(in.keys)), retired: map[string]RetiredKey{}}
	for _, id := range in.ids {
		key := in.keys[id]
		if cur, ok := old.keys[id]; ok {
			if !hmac.Equal(cur, key) {
				return KeyChange{}, fmt.Errorf("%w: key id %q already names another key; give the new key a new id", ErrKeyIDReused, id)
			}
		} else if r, ok := old.retired[id]; ok && now.Before(r.Until) {
			if !hmac.Equal(r.key, key) {
				return KeyChange{}, fmt.Errorf("%w: key id %q was retired at %s and still verifies until %s with its old key; give the new key a new id",
					ErrKeyIDReused, id, r.RetiredAt.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339))
			}
			change.Restored = append(change.Restored, id)
		} else {
			change.Added = append(change.Added, id)
		}
		out.keys[id] = key // already a private copy: NewKeyring cloned it
	}
	// Earlier retirements keep their own deadline: dropping a key twice must
	// not extend its life.
	for id, r := range old.retired {
		switch {
		case out.keys[id] != nil:
		case now.Before(r.Until):
			out.retired[id] = r
		default:
			change.Expired = append(change.Expired, id)
		}
	}
	for _, id := range old.ids {
		if _, kept := out.keys[id]; !kept {
			out.retired[id] = RetiredKey{ID: id, RetiredAt: now, Until: now.Add(grace), key: old.keys[id]}
			change.Retired = append(change.Retired, id)
		}
	}
	if len(change.Retired) > 0 {
		change.RetiredUntil = now.Add(grace)
	}
	slices.Sort(change.Restored)
	slices.Sort(change.Expired)
	k.cur.Store(out)
	return change, nil
}

// sameKeys reports whether next holds exactly k's current keys in k's order.
func (k *Keyring) sameKeys(next *Keyring) bool {
	a, b := k.cur.Load(), next.cur.Load()
	if !slices.Equal(a.ids, b.ids) {
		return false
	}
	for _, id := range a.ids {
		if !hmac.Equal(a.keys[id], b.keys[id]) {
			return false
		}
	}
	return true
}

// mac is HMAC-SHA256(key, parts...).
func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// DefaultKeyReloadPeriod is how often a KeyWatcher reads the key file
// [--key-reload-period].
const DefaultKeyReloadPeriod = 10 * time.Second

// maxKeyFileBytes bounds what a KeyWatcher reads: a key file holds a handful
// of short lines, and a huge file is a mistake that must not cost memory every
// poll.
const maxKeyFileBytes = 64 << 10

// KeyWatchConfig configures a KeyWatcher. Zero fields take their defaults.
type KeyWatchConfig struct {
	// Period is how often the file is read; DefaultKeyReloadPeriod if zero.
	Period time.Duration
	// RetireGrace is how long a dropped key id keeps verifying;
	// DefaultRetireGrace if zero.
	RetireGrace time.Duration
	// Clock paces the polls; the real clock if nil. Retirements are dated by
	// the Keyring's own clock (Keyring.SetClock).
	Clock clock.WithTicker
	// Logger receives one line per reload, refused file and expired key;
	// slog.Default() if nil.
	Logger *slog.Logger
	// Registerer receives the metrics; nil keeps them private.
	Registerer prometheus.Registerer
}

// KeyWatcher reloads a Keyring from its key file while the agent runs, so
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
type KeyWatcher struct {
	path string
	keys *Keyring
	cfg  KeyWatchConfig
	log  *slog.Logger

	reloads *prometheus.CounterVec

	// Only the Run goroutine touches these.
	handled  bool     // sum holds the content last handled
	sum      [32]byte // sha256 of that content
	readErr  string   // the read error last reported, to report it once
	inGrace  []string // retired ids that verified at the last poll
	baseline bool     // the first poll is done
}

// NewKeyWatcher checks cfg and registers the metrics of a watcher that
// reloads k from path. Run starts it.
func NewKeyWatcher(path string, k *Keyring, cfg KeyWatchConfig) (*KeyWatcher, error) {
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
		cfg.Period = DefaultKeyReloadPeriod
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
	w := &KeyWatcher{path: path, keys: k, cfg: cfg, log: cfg.Logger,
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

// WatchKeyFile reloads k from path every cfg.Period until ctx ends
// (NewKeyWatcher, then Run).
func WatchKeyFile(ctx context.Context, path string, k *Keyring, cfg KeyWatchConfig) error {
	w, err := NewKeyWatcher(path, k, cfg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// Run polls the key file at once and then every period until ctx ends. It
// returns nil: no key file problem is worth stopping the agent for, since the
// keys in use still work.
func (w *KeyWatcher) Run(ctx context.Context) error {
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
func (w *KeyWatcher) poll() {
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
	next, err := ParseKeys(bytes.NewReader(data))
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

func (w *KeyWatcher) refused(err error) {
	w.reloads.WithLabelValues("error").Inc()
	w.log.Error("zone key file refused; keeping the keys in use", "signingKeyID", w.keys.SigningID(), "keyIDs", w.keys.IDs(), "err", err)
}

// noteExpired logs, once each, the retired ids whose grace passed since the
// last poll: from then on peers and reports still using them are refused.
func (w *KeyWatcher) noteExpired() {
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

// keyringCollector exports a Keyring's state as it is at scrape time, so that
// a retired key's grace ending shows without waiting for a poll.
type keyringCollector struct {
	k       *Keyring
	retired *prometheus.Desc
	info    *prometheus.Desc
}

func registerKeyringCollector(reg prometheus.Registerer, k *Keyring) error {
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
