package zone

import (
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
)

// SigMemo remembers node signatures that verified, so that a process checks a
// signature once although it meets it twice: the leader checks every report at
// its intake and again when it applies the batch that carries it, and at 129
// members that second check was a tenth of the leader's CPU. A verification is
// a pure function of key, message and signature, so a remembered success is
// exact; failures are not kept. It holds at most its size in entries, dropping
// the oldest. The zero SigMemo and a nil one remember nothing.
type SigMemo struct {
	size int // fixed by NewSigMemo
	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte
	next int
}

// NewSigMemo returns a memo of the last size successes.
func NewSigMemo(size int) *SigMemo {
	size = max(size, 0)
	return &SigMemo{size: size, seen: make(map[[sha256.Size]byte]struct{}, size), ring: make([][sha256.Size]byte, 0, size)}
}

// Verify is ed25519.Verify, answered from the memo when this key, message and
// signature verified before. A key or signature of the wrong size never
// verifies (ed25519.Verify would panic on such a key), which also keeps the
// memo's key — key, signature and message back to back — unambiguous.
func (m *SigMemo) Verify(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	if m == nil || m.size <= 0 {
		return ed25519.Verify(pub, msg, sig)
	}
	h := sha256.New()
	h.Write(pub)
	h.Write(sig)
	h.Write(msg)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	m.mu.Lock()
	_, ok := m.seen[k]
	m.mu.Unlock()
	if ok {
		return true
	}
	if !ed25519.Verify(pub, msg, sig) {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[k]; ok {
		return true
	}
	if len(m.ring) < m.size {
		m.ring = append(m.ring, k)
	} else {
		delete(m.seen, m.ring[m.next])
		m.ring[m.next] = k
		m.next = (m.next + 1) % len(m.ring)
	}
	m.seen[k] = struct{}{}
	return true
}
