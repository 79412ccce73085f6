package raftzone

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinKeyBytes is the shortest zone key accepted: HMAC-SHA256 keys shorter than the
// hash output weaken it, and a short key is usually a typo or an empty Secret.
const MinKeyBytes = 32

// ErrUnknownKey means a peer or a report named a key id this keyring lacks.
var ErrUnknownKey = errors.New("unknown key id")

// Keyring holds the zone keys. The first key signs; every key verifies, so an
// operator rotates by adding the new key second, then first, then dropping the
// old one, with no window in which two agents cannot talk.
type Keyring struct {
	ids  []string
	keys map[string][]byte
}

// NewKeyring builds a keyring from id/key pairs in signing order.
func NewKeyring(ids []string, keys [][]byte) (*Keyring, error) {
	if len(ids) == 0 || len(ids) != len(keys) {
		return nil, errors.New("keyring needs at least one key")
	}
	k := &Keyring{keys: map[string][]byte{}}
	for i, id := range ids {
		if err := validKeyID(id); err != nil {
			return nil, err
		}
		if _, dup := k.keys[id]; dup {
			return nil, fmt.Errorf("key id %q appears twice", id)
		}
		if len(keys[i]) < MinKeyBytes {
			return nil, fmt.Errorf("key %q has %d bytes, need at least %d", id, len(keys[i]), MinKeyBytes)
		}
		k.ids = append(k.ids, id)
		k.keys[id] = bytes.Clone(keys[i])
	}
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
func (k *Keyring) SigningID() string { return k.ids[0] }

// SigningKey returns the key new MACs are made with.
func (k *Keyring) SigningKey() (string, []byte) { return k.ids[0], k.keys[k.ids[0]] }

// Key returns the key with the given id.
func (k *Keyring) Key(id string) ([]byte, error) {
	key, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownKey, id)
	}
	return key, nil
}

// IDs lists key ids in signing order.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// mac is HMAC-SHA256(key, parts...).
func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}
