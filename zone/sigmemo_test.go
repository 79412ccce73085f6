package zone

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
)

// TestSigMemo checks that the memo answers exactly as ed25519.Verify does —
// for another key, another message or a changed signature too, after the
// genuine one was remembered — keeps only successes, and holds at most its
// size, dropping the oldest.
func TestSigMemo(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte("report 1")
	sig := ed25519.Sign(priv, msg)
	bent := append([]byte(nil), sig...)
	bent[5] ^= 1

	m := NewSigMemo(2)
	for round := range 2 { // the second round answers from the memo
		for _, c := range []struct {
			name     string
			pub      ed25519.PublicKey
			msg, sig []byte
			want     bool
		}{
			{"genuine", pub, msg, sig, true},
			{"other key", other, msg, sig, false},
			{"other message", pub, []byte("report 2"), sig, false},
			{"changed signature", pub, msg, bent, false},
		} {
			if got := m.Verify(c.pub, c.msg, c.sig); got != c.want {
				t.Errorf("round %d, %s: Verify = %v, want %v", round, c.name, got, c.want)
			}
		}
		if len(m.seen) != 1 {
			t.Fatalf("round %d: memo holds %d entries, want the one success", round, len(m.seen))
		}
	}

	first := m.ring[0]
	for i := range 3 {
		b := []byte(fmt.Sprint("more ", i))
		if !m.Verify(pub, b, ed25519.Sign(priv, b)) {
			t.Fatal("a genuine signature failed")
		}
	}
	if len(m.seen) != 2 || len(m.ring) != 2 {
		t.Fatalf("memo of size 2 holds %d entries (%d in the ring)", len(m.seen), len(m.ring))
	}
	if _, ok := m.seen[first]; ok {
		t.Error("the oldest entry was kept")
	}
	if !m.Verify(pub, msg, sig) {
		t.Error("a forgotten genuine signature no longer verifies")
	}

	var nilMemo *SigMemo
	if !nilMemo.Verify(pub, msg, sig) || nilMemo.Verify(pub, msg, bent) {
		t.Error("a nil memo does not verify as ed25519.Verify does")
	}

	// Sizes from a hostile member list or report: false, never a panic,
	// and no key that a shifted split of the same bytes could match.
	for _, memo := range []*SigMemo{nil, m} {
		if memo.Verify(pub[:31], msg, sig) || memo.Verify(pub, msg, sig[:63]) ||
			memo.Verify(append(pub[:32:32], sig[0]), msg, sig[1:]) {
			t.Errorf("a key or signature of the wrong size verified (memo %v)", memo != nil)
		}
	}
}

// TestSigMemoConcurrent has the intake and the replica meet the same
// signatures at once; run with -race.
func TestSigMemoConcurrent(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msgs := make([][]byte, 16)
	sigs := make([][]byte, len(msgs))
	for i := range msgs {
		msgs[i] = []byte(fmt.Sprint("report ", i))
		sigs[i] = ed25519.Sign(priv, msgs[i])
	}
	m := NewSigMemo(8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				j := (i + g) % len(msgs)
				if !m.Verify(pub, msgs[j], sigs[j]) {
					t.Errorf("goroutine %d: report %d failed", g, j)
				}
			}
		}()
	}
	wg.Wait()
	if len(m.seen) != len(m.ring) || len(m.ring) > 8 {
		t.Errorf("memo holds %d entries, ring %d, size 8", len(m.seen), len(m.ring))
	}
}

// BenchmarkSigMemo compares a signature verified by ed25519 with one the memo
// remembers, for a report-sized message.
func BenchmarkSigMemo(b *testing.B) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	msg := make([]byte, 2048)
	sig := ed25519.Sign(priv, msg)
	for _, bc := range []struct {
		name string
		memo *SigMemo
	}{{"verify", nil}, {"remembered", NewSigMemo(16)}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if !bc.memo.Verify(pub, msg, sig) {
					b.Fatal("genuine signature failed")
				}
			}
		})
	}
}
