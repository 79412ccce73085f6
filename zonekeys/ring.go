package zonekeys

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
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

// Ring holds the zone keys. The first key signs; every key verifies, so an
// operator rotates by adding the new key second, then first, then dropping the
// old one, with no window in which two agents cannot talk.
//
// A Ring is safe for concurrent use, and Reload swaps in a new key set while
// the transport and the reporter use it: every method reads one immutable
// snapshot, so a caller never sees the signing id of one key set with the key
// bytes of another.
type Ring struct {
	cur atomic.Pointer[keySet]
	// clk dates retirements and tells when they expire; the real clock
	// unless SetClock.
	clk atomic.Pointer[clockHolder]
	// reload serialises Reload: each one derives the retired set from the
	// snapshot it replaces, so two at once must not both start from the same one.
	reload sync.Mutex
}

// keySet is one immutable snapshot of a Ring.
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

// New builds a keyring from id/key pairs in signing order.
func New(ids []string, keys [][]byte) (*Ring, error) {
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
	k := &Ring{}
	k.cur.Store(set)
	return k, nil
}

// LoadFile reads a key file: one `id:base64` line per key, first line signs.
// Blank lines and lines starting with '#' are skipped. Every error names the file
// (and line), because the agent refuses to start without a usable key.
func LoadFile(path string) (*Ring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	defer f.Close()
	k, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// Parse parses the key file format from r.
func Parse(r io.Reader) (*Ring, error) {
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
	return New(ids, keys)
}

// GenerateLine returns a fresh `id:base64` line with a 32-byte random key.
func GenerateLine(id string) (string, error) {
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
func (k *Ring) SigningID() string { return k.cur.Load().ids[0] }

// SigningKey returns the key new MACs are made with. The id and the bytes come
// from the same key set even while a Reload runs.
func (k *Ring) SigningKey() (string, []byte) {
	set := k.cur.Load()
	return set.ids[0], set.keys[set.ids[0]]
}

// Key returns the key with the given id: a current key, or a retired one whose
// grace has not passed yet. A retired key past its grace fails with
// ErrRetiredKey, which wraps ErrUnknownKey.
func (k *Ring) Key(id string) ([]byte, error) {
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
func (k *Ring) IDs() []string { return slices.Clone(k.cur.Load().ids) }

// Retired lists the retired key ids that still verify, soonest to expire
// first.
func (k *Ring) Retired() []RetiredKey {
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
func (k *Ring) SetClock(c clock.PassiveClock) {
	if c == nil {
		k.clk.Store(nil)
		return
	}
	k.clk.Store(&clockHolder{c})
}

func (k *Ring) now() time.Time {
	if h := k.clk.Load(); h != nil {
		return h.c.Now()
	}
	return time.Now()
}

// Change is what a Reload changed.
type Change struct {
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
func (c Change) Changed() bool {
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
func (k *Ring) Reload(next *Ring, grace time.Duration) (Change, error) {
	if next == nil || next == k {
		return Change{}, errors.New("reload needs another keyring")
	}
	if grace <= 0 {
		return Change{}, fmt.Errorf("retire grace %s must be positive", grace)
	}
	k.reload.Lock()
	defer k.reload.Unlock()
	old, in := k.cur.Load(), next.cur.Load()
	now := k.now()
	change := Change{SigningID: in.ids[0], PreviousSigningID: old.ids[0]}
	out := &keySet{ids: slices.Clone(in.ids), keys: make(map[string][]byte, len(in.keys)), retired: map[string]RetiredKey{}}
	for _, id := range in.ids {
		key := in.keys[id]
		if cur, ok := old.keys[id]; ok {
			if !hmac.Equal(cur, key) {
				return Change{}, fmt.Errorf("%w: key id %q already names another key; give the new key a new id", ErrKeyIDReused, id)
			}
		} else if r, ok := old.retired[id]; ok && now.Before(r.Until) {
			if !hmac.Equal(r.key, key) {
				return Change{}, fmt.Errorf("%w: key id %q was retired at %s and still verifies until %s with its old key; give the new key a new id",
					ErrKeyIDReused, id, r.RetiredAt.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339))
			}
			change.Restored = append(change.Restored, id)
		} else {
			change.Added = append(change.Added, id)
		}
		out.keys[id] = key // already a private copy: New cloned it
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
func (k *Ring) sameKeys(next *Ring) bool {
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
