package nfqueue

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Packets between the same two addresses leave in the order they came, each
// no later than its arrival plus the jitter; other pairs may overtake.
func TestHoldKeepsEachPairInOrderWithinTheJitter(t *testing.T) {
	const jitter = 40 * time.Millisecond
	q := newQueue(1, jitter, 7)
	var mu sync.Mutex
	var order []uint32
	q.verdict = func(id uint32) {
		mu.Lock()
		order = append(order, id)
		mu.Unlock()
	}
	a, b := [8]byte{127, 0, 0, 1, 127, 0, 0, 2}, [8]byte{127, 0, 0, 2, 127, 0, 0, 1}
	start := time.Now()
	const n = 200
	for i := range uint32(n) {
		pair := a
		if i%2 == 1 {
			pair = b
		}
		now := start.Add(time.Duration(i) * time.Millisecond)
		q.hold(i, pair, now)
		q.mu.Lock()
		for _, h := range q.held {
			if h.at.After(h.queued.Add(jitter)) {
				t.Fatalf("packet %d held until %s after it came, past the jitter %s", h.id, h.at.Sub(h.queued), jitter)
			}
		}
		q.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.release(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := len(order)
		mu.Unlock()
		if got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("released %d of %d packets", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.poke()
	<-done
	cancel()
	lastA, lastB := -1, -1
	overtaken := false
	for i, id := range order {
		last := &lastA
		if id%2 == 1 {
			last = &lastB
		}
		if int(id) < *last {
			t.Fatalf("packet %d released after %d of the same pair: %v", id, *last, order)
		}
		*last = int(id)
		if i > 0 && id < order[i-1] {
			overtaken = true
		}
	}
	if !overtaken {
		t.Error("no packet of one pair overtook the other's: the delays are not random")
	}
	if s := q.Stats(); s.Packets != n {
		t.Errorf("stats count %d packets, want %d", s.Packets, n)
	}
}

// Closing releases every held packet at once.
func TestCloseReleasesEverythingHeld(t *testing.T) {
	q := newQueue(1, time.Hour, 1)
	var released []uint32
	q.verdict = func(id uint32) { released = append(released, id) }
	for i := range uint32(5) {
		q.hold(i, [8]byte{byte(i)}, time.Now())
	}
	q.closing = true
	q.release(context.Background())
	if len(released) != 5 {
		t.Fatalf("released %v, want all 5 packets", released)
	}
}

func TestParsePacket(t *testing.T) {
	msg := []byte{2, 0, 0, 1} // nfgenmsg
	attr := func(typ uint16, v []byte) {
		msg = binary.NativeEndian.AppendUint16(msg, uint16(4+len(v)))
		msg = binary.NativeEndian.AppendUint16(msg, typ)
		msg = append(msg, v...)
		for len(msg)%4 != 0 {
			msg = append(msg, 0)
		}
	}
	attr(attrPacketHdr, []byte{0, 0, 0x12, 0x34, 8, 0, 3})
	ip := make([]byte, ipHeader)
	ip[0] = 0x45
	copy(ip[12:], []byte{127, 1, 2, 3, 127, 4, 5, 6})
	attr(attrPayload|0x4000, ip)
	id, pair, ok := parsePacket(msg)
	if !ok || id != 0x1234 || pair != [8]byte{127, 1, 2, 3, 127, 4, 5, 6} {
		t.Fatalf("parsePacket = %#x %v %v", id, pair, ok)
	}
	for _, bad := range [][]byte{nil, {2, 0}, {2, 0, 0, 1, 0xff, 0xff, 1, 0}, {2, 0, 0, 1, 2, 0, 1, 0}} {
		if _, _, ok := parsePacket(bad); ok {
			t.Errorf("parsePacket(%v) found a packet", bad)
		}
	}
}

func FuzzParsePacket(f *testing.F) {
	f.Add([]byte{2, 0, 0, 1, 11, 0, 1, 0, 0, 0, 0, 1, 8, 0, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) { parsePacket(b) })
}

// A real queue delays real loopback traffic and loses none of it. Needs
// root and iptables-legacy (Debian package iptables).
func TestQueueDelaysLoopbackTraffic(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind a netfilter queue")
	}
	ipt, err := exec.LookPath("iptables-legacy")
	if err != nil {
		t.Skip("needs iptables-legacy (Debian package iptables)")
	}
	const addr = "127.88.0.1"
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprint(c, strings.ToUpper(line))
			}()
		}
	}()
	const num = 47113
	const jitter = 30 * time.Millisecond
	q, err := Open(num, jitter, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- q.Run(ctx) }()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	rule := []string{"-w", "-t", "mangle", "OUTPUT", "-d", addr, "-p", "tcp", "--dport", port, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(num), "--queue-bypass"}
	iptables := func(op string) error {
		args := append([]string{rule[0], rule[1], rule[2], op}, rule[3:]...)
		if out, err := exec.Command(ipt, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables-legacy %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := iptables("-A"); err != nil {
		t.Fatal(err)
	}
	removed := false
	defer func() {
		if !removed {
			_ = iptables("-D")
		}
	}()
	for i := range 5 {
		c, err := net.DialTimeout("tcp", addr+":"+port, 5*time.Second)
		if err != nil {
			t.Fatalf("dial through the queue: %v", err)
		}
		fmt.Fprintf(c, "hello %d\n", i)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if want := fmt.Sprintf("HELLO %d\n", i); got != want || err != nil {
			t.Fatalf("echo through the queue = %q, %v; want %q", got, err, want)
		}
	}
	if err := iptables("-D"); err != nil {
		t.Fatal(err)
	}
	removed = true
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	s := q.Stats()
	// Each connection sends at least a SYN, an ACK and its data to the port.
	if s.Packets < 15 || s.MaxDelay <= 0 {
		t.Fatalf("stats %+v: want at least 15 packets held", s)
	}
}
