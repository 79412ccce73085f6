package zone

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
)

// NodeKeyAnnotation is the Node annotation where a node's agent registers the
// public half of its node key. Only that node's own agent may write it (an
// admission policy compares the Node with the node-name claim of the writer's
// ServiceAccount token), so a key found there speaks for that node and no other.
const NodeKeyAnnotation = "edgequorum.io/node-key"

// nodeKeyPrefix names the algorithm in the annotation value, so a later key type
// can be told apart instead of misread.
const nodeKeyPrefix = "ed25519:"

// EncodeNodeKey renders a node's public key as the NodeKeyAnnotation value.
func EncodeNodeKey(pub ed25519.PublicKey) string {
	return nodeKeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParseNodeKey reads a NodeKeyAnnotation value. Anything but an Ed25519 public
// key of the right length is an error: a node whose annotation does not parse
// has no registered key, never a guessed one.
func ParseNodeKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(s, nodeKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("node key %q: want %s<base64>", truncate(s, 24), nodeKeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("node key: not valid base64: %w", err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("node key: %d bytes, an Ed25519 public key has %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
