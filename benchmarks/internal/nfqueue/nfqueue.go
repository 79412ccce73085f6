// Package nfqueue delays packets for the benchmarks: it binds one netfilter
// queue (nfnetlink_queue, the kernel's NFQUEUE target) and accepts every
// packet the kernel hands it after a random delay, which is how the soak adds
// jitter on a host whose kernel has no netem qdisc.
//
// It owns its netlink socket and the packets queued to it, nothing else: the
// iptables rule that sends packets to the queue is the caller's, installed
// after Open and removed before Close. It never drops or alters a packet;
// every packet it reads is accepted, only late, and Close accepts the ones
// still held at once. It needs root (CAP_NET_ADMIN) and Linux.
package nfqueue

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nfnetlink_queue's constants (linux/netfilter/nfnetlink_queue.h).
const (
	subsysQueue = 3 // NFNL_SUBSYS_QUEUE

	msgPacket  = 0 // NFQNL_MSG_PACKET
	msgVerdict = 1 // NFQNL_MSG_VERDICT
	msgConfig  = 2 // NFQNL_MSG_CONFIG

	cfgCmd    = 1 // NFQA_CFG_CMD
	cfgParams = 2 // NFQA_CFG_PARAMS
	cfgMaxLen = 3 // NFQA_CFG_QUEUE_MAXLEN
	cfgMask   = 4 // NFQA_CFG_MASK
	cfgFlags  = 5 // NFQA_CFG_FLAGS

	cmdBind   = 1 // NFQNL_CFG_CMD_BIND
	cmdUnbind = 2 // NFQNL_CFG_CMD_UNBIND

	copyPacket = 2 // NFQNL_COPY_PACKET

	flagFailOpen = 1 // NFQA_CFG_F_FAIL_OPEN: a full queue accepts rather than drops

	attrPacketHdr  = 1  // NFQA_PACKET_HDR
	attrVerdictHdr = 2  // NFQA_VERDICT_HDR
	attrPayload    = 10 // NFQA_PAYLOAD

	nfAccept = 1 // NF_ACCEPT

	nlaTypeMask = 0x3fff // an attribute's type without NLA_F_NESTED and NLA_F_NET_BYTEORDER

	// ipHeader is how much of each packet the kernel copies to us: the
	// IPv4 header, for the addresses.
	ipHeader = 20
	// maxLen is the queue's length in the kernel; past it packets pass
	// undelayed (fail-open), counted by the kernel, not lost.
	maxLen = 8192
)

// Stats is what a queue did.
type Stats struct {
	// Packets is how many packets were delayed and accepted.
	Packets int64
	// TotalDelay and MaxDelay are over those packets, as held here.
	TotalDelay, MaxDelay time.Duration
	// Overruns counts receive-buffer overruns: messages the kernel could
	// not deliver (their packets pass or drop as the kernel decides).
	Overruns int64
}

// Mean is the mean delay of the accepted packets.
func (s Stats) Mean() time.Duration {
	if s.Packets == 0 {
		return 0
	}
	return s.TotalDelay / time.Duration(s.Packets)
}

// Queue is one bound netfilter queue that jitters what it receives.
type Queue struct {
	fd     int
	num    uint16
	jitter time.Duration
	rng    *rand.Rand

	mu      sync.Mutex
	held    holdHeap
	seq     uint64
	last    map[[8]byte]time.Time // per address pair: the latest release
	stats   Stats
	wake    chan struct{}
	closing bool
	// verdict accepts one packet; a test replaces it.
	verdict func(id uint32)
}

// Open binds queue num: every packet queued to it is held for a uniformly
// random 0..jitter and then accepted, except that no packet is released before
// an earlier one between the same two addresses (a link's delay varies; it
// does not reorder). seed makes the delays repeatable.
func Open(num uint16, jitter time.Duration, seed uint64) (*Queue, error) {
	if jitter <= 0 {
		return nil, fmt.Errorf("nfqueue: jitter %s: want a positive duration", jitter)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nfqueue: netlink socket: %w", err)
	}
	q := newQueue(num, jitter, seed)
	q.fd = fd
	q.verdict = q.sendVerdict
	if err := q.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return q, nil
}

func newQueue(num uint16, jitter time.Duration, seed uint64) *Queue {
	return &Queue{fd: -1, num: num, jitter: jitter, rng: rand.New(rand.NewPCG(seed, seed^0x6a17)),
		last: map[[8]byte]time.Time{}, wake: make(chan struct{}, 1)}
}

func (q *Queue) setup() error {
	if err := unix.Bind(q.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("nfqueue: bind netlink socket: %w", err)
	}
	// A burst must not overflow the socket; if it does anyway, say so
	// rather than fail every later read.
	_ = unix.SetsockoptInt(q.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(q.fd, unix.SOL_NETLINK, unix.NETLINK_NO_ENOBUFS, 1)
	// Reads wake up to notice Run's context ending.
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(q.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("nfqueue: receive timeout: %w", err)
	}
	cmd := func(c byte) []byte { return []byte{c, 0, 0, unix.AF_INET} } // command, pad, be16 pf
	params := binary.BigEndian.AppendUint32(nil, ipHeader)
	params = append(params, copyPacket)
	steps := []struct {
		what  string
		attrs []attr
	}{
		{"bind queue", []attr{{cfgCmd, cmd(cmdBind)}}},
		{"copy mode", []attr{{cfgParams, params}}},
		{"queue length", []attr{{cfgMaxLen, be32(maxLen)}}},
		{"fail-open", []attr{{cfgMask, be32(flagFailOpen)}, {cfgFlags, be32(flagFailOpen)}}},
	}
	for _, s := range steps {
		if err := q.request(msgConfig, s.attrs); err != nil {
			return fmt.Errorf("nfqueue: %s %d: %w", s.what, q.num, err)
		}
	}
	return nil
}

// request sends one config message and waits for the kernel's answer.
func (q *Queue) request(typ uint16, attrs []attr) error {
	q.mu.Lock()
	q.seq++
	seq := uint32(q.seq)
	q.mu.Unlock()
	msg := q.message(typ, unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq, attrs)
	if err := unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(q.fd, buf, 0)
		if err != nil {
			return fmt.Errorf("no answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("answer: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Seq != seq || m.Header.Type != unix.NLMSG_ERROR {
				continue
			}
			if len(m.Data) < 4 {
				return errors.New("short answer")
			}
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return syscall.Errno(-code)
			}
			return nil
		}
	}
}

// Run gives every queued packet its verdict until ctx ends, then accepts
// every packet still held and unbinds the queue. The caller removes its
// iptables rule first, so that nothing is queued to an unbound queue.
func (q *Queue) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { q.release(ctx) })
	err := q.read(ctx)
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.poke()
	wg.Wait()
	if uerr := q.request(msgConfig, []attr{{cfgCmd, []byte{cmdUnbind, 0, 0, unix.AF_INET}}}); uerr != nil && err == nil {
		err = fmt.Errorf("nfqueue: unbind queue %d: %w", q.num, uerr)
	}
	return err
}

// Close closes the socket; call it after Run returned.
func (q *Queue) Close() error { return unix.Close(q.fd) }

// Stats is what the queue did so far.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// read receives queued packets until ctx ends and holds each one.
func (q *Queue) read(ctx context.Context) error {
	buf := make([]byte, 1<<16)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(q.fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			q.mu.Lock()
			q.stats.Overruns++
			q.mu.Unlock()
			continue
		case err != nil:
			return fmt.Errorf("nfqueue: read queue %d: %w", q.num, err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("nfqueue: queue %d: %w", q.num, err)
		}
		now := time.Now()
		for _, m := range msgs {
			if m.Header.Type != subsysQueue<<8|msgPacket {
				continue
			}
			id, pair, ok := parsePacket(m.Data)
			if !ok {
				continue
			}
			q.hold(id, pair, now)
		}
	}
	return nil
}

// parsePacket reads a packet message's id and its source and destination
// addresses (zero for a packet too short to hold them).
func parsePacket(data []byte) (id uint32, pair [8]byte, ok bool) {
	const nfgenmsg = 4
	if len(data) < nfgenmsg {
		return 0, pair, false
	}
	for b := data[nfgenmsg:]; len(b) >= 4; {
		l := int(binary.NativeEndian.Uint16(b))
		t := binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask
		if l < 4 || l > len(b) {
			break
		}
		v := b[4:l]
		switch {
		case t == attrPacketHdr && len(v) >= 4:
			id, ok = binary.BigEndian.Uint32(v), true
		case t == attrPayload && len(v) >= ipHeader && v[0]>>4 == 4:
			copy(pair[:], v[12:20])
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return id, pair, ok
}

// hold schedules a packet's acceptance.
func (q *Queue) hold(id uint32, pair [8]byte, now time.Time) {
	q.mu.Lock()
	at := now.Add(time.Duration(q.rng.Int64N(int64(q.jitter) + 1)))
	if prev := q.last[pair]; at.Before(prev) {
		at = prev
	}
	q.last[pair] = at
	q.seq++
	heap.Push(&q.held, held{at: at, seq: q.seq, id: id, queued: now})
	first := q.held[0].seq == q.seq
	q.mu.Unlock()
	if first {
		q.poke()
	}
}

func (q *Queue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// release accepts held packets as their times come, in time order (ties in
// arrival order), and all of them at once when the queue is closing.
func (q *Queue) release(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		q.mu.Lock()
		now := time.Now()
		var due []held
		for len(q.held) > 0 && (q.closing || !q.held[0].at.After(now)) {
			due = append(due, heap.Pop(&q.held).(held))
		}
		var next time.Duration = -1
		if len(q.held) > 0 {
			next = q.held[0].at.Sub(now)
		}
		closing := q.closing
		q.mu.Unlock()
		for _, h := range due {
			q.accept(h, now)
		}
		if closing {
			return
		}
		if next >= 0 {
			t.Reset(next)
		}
		select {
		case <-t.C:
		case <-q.wake:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
	}
}

// accept gives one packet its verdict and counts its delay.
func (q *Queue) accept(h held, now time.Time) {
	q.verdict(h.id)
	d := now.Sub(h.queued)
	q.mu.Lock()
	q.stats.Packets++
	q.stats.TotalDelay += d
	q.stats.MaxDelay = max(q.stats.MaxDelay, d)
	q.mu.Unlock()
}

// sendVerdict accepts one packet in the kernel.
func (q *Queue) sendVerdict(id uint32) {
	vh := append(be32(nfAccept), be32(id)...)
	msg := q.message(msgVerdict, unix.NLM_F_REQUEST, 0, []attr{{attrVerdictHdr, vh}})
	// A failed verdict leaves the packet to the kernel, which drops it
	// when the queue unbinds; there is nothing better to do here.
	_ = unix.Sendto(q.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// attr is one netlink attribute.
type attr struct {
	typ  uint16
	data []byte
}

// message frames an nfnetlink_queue message for this queue.
func (q *Queue) message(typ, flags uint16, seq uint32, attrs []attr) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN, 64)
	// nfgenmsg: family, version, be16 resource id (the queue number).
	b = append(b, unix.AF_UNSPEC, unix.NFNETLINK_V0)
	b = binary.BigEndian.AppendUint16(b, q.num)
	for _, a := range attrs {
		b = binary.NativeEndian.AppendUint16(b, uint16(4+len(a.data)))
		b = binary.NativeEndian.AppendUint16(b, a.typ)
		b = append(b, a.data...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], subsysQueue<<8|typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	return b
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// held is a packet waiting for its release time.
type held struct {
	at, queued time.Time
	seq        uint64
	id         uint32
}

type holdHeap []held

func (h holdHeap) Len() int { return len(h) }
func (h holdHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h holdHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *holdHeap) Push(x any)   { *h = append(*h, x.(held)) }
func (h *holdHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
