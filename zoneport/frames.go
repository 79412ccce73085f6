package zoneport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
)

// The zone port's traffic is mostly the same few messages again and again on
// long-lived connections: Raft heartbeats byte for byte the last one, their
// answers, probes of /healthz, reports whose HTTP headers and JSON keys never
// change. Sent as they are, a heartbeat and its answer cost some 360 bytes
// and made most of a small zone's traffic — more than a whole SuperEdge zone
// sends. So every write on an authenticated zone-port connection travels as a
// frame that names a recent frame of the same connection and direction and
// sends only what differs from it. Both ends keep the same few recent frames
// and update them by the same rule, so the reader rebuilds every byte. The
// frames run inside TLS: what they save is what the uplink carries. A general
// compressor would do as well but costs hundreds of KiB of state per
// connection; this costs at most frameSlots × frameSlotLen bytes each way.
//
// A frame is
//
//	uvarint n    length of the frame's bytes, 1..maxFrameLen
//	byte    ref  0: literal, n bytes follow;
//	             1..frameSlots: made from that kept frame by edits:
//	edit*        uvarint c, uvarint l, varint d, then l bytes: copy c bytes
//	             of the kept frame from the cursor (which starts at 0), then
//	             the l bytes, then move the cursor l+d further — d = 0 for a
//	             substitution of the same length. Edits run until n bytes are
//	             made; each makes at least one.
//
// Frames of at most frameSlotLen bytes are kept, except one identical to the
// frame it names; a kept frame replaces the least recently used slot. Longer
// frames are always literal and never kept.
const (
	frameSlots   = 4
	frameSlotLen = 1024
	// maxFrameLen bounds one frame; longer writes are cut into several.
	maxFrameLen = 64 << 10
	// minEqualRun is the shortest run of equal bytes worth an edit of its
	// own; shorter ones go along in the literal around them.
	minEqualRun = 4
)

// errBadFrame means a peer sent a frame that no honest writer makes.
var errBadFrame = errors.New("malformed zone-port frame")

// frameSet is one direction's recent frames. The writer and the reader of a
// direction each hold one and change it by the same rule.
type frameSet struct {
	slots [frameSlots][]byte
	used  [frameSlots]uint64 // when each slot was last named or filled; 0 = empty
	clock uint64
}

// keep records frame f, made from slot ref (0 for a literal).
func (s *frameSet) keep(ref int, f []byte) {
	s.clock++
	if ref > 0 {
		s.used[ref-1] = s.clock
		if string(s.slots[ref-1]) == string(f) {
			return
		}
	}
	victim := 0
	for i := range s.used {
		if s.used[i] < s.used[victim] {
			victim = i
		}
	}
	s.slots[victim] = append(s.slots[victim][:0], f...)
	s.used[victim] = s.clock
}

// framedConn carries the zone port's traffic as frames. Reads and writes keep
// their own state, so one reader and one writer may run at once, as on any
// net.Conn.
type framedConn struct {
	net.Conn
	// onBad counts a malformed frame from the peer.
	onBad func()

	wmu  sync.Mutex
	wset frameSet
	wbuf []byte
	tmp  []byte

	rmu   sync.Mutex
	rset  frameSet
	rbuf  []byte // a kept frame being handed out
	rleft int    // bytes of an unkept (long literal) frame still to read
	rerr  error
	// pend holds the bytes of a frame read before a read failed (a
	// deadline, as net/http sets to stop its background read), so the
	// frame is parsed again from its start on the next Read.
	pend  []byte
	frame []byte // memory for kept frames, reused once handed out
}

func newFramedConn(c net.Conn, onBad func()) *framedConn {
	return &framedConn{Conn: c, onBad: onBad}
}

// Write sends p as one or more frames.
func (c *framedConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	done := 0
	for done < len(p) {
		chunk := p[done:min(len(p), done+maxFrameLen)]
		if err := c.writeFrame(chunk); err != nil {
			return done, err
		}
		done += len(chunk)
	}
	return done, nil
}

func (c *framedConn) writeFrame(f []byte) error {
	c.wbuf = binary.AppendUvarint(c.wbuf[:0], uint64(len(f)))
	if len(f) > frameSlotLen {
		c.wbuf = append(c.wbuf, 0)
		if _, err := c.Conn.Write(c.wbuf); err != nil {
			return err
		}
		_, err := c.Conn.Write(f)
		return err
	}
	hdr := len(c.wbuf)
	c.wbuf = append(c.wbuf, 0)
	c.wbuf = append(c.wbuf, f...)
	ref := 0
	for i, slot := range c.wset.slots {
		if c.wset.used[i] == 0 {
			continue
		}
		c.tmp = appendEdits(c.tmp[:0], slot, f)
		if len(c.tmp)+1 < len(c.wbuf)-hdr {
			c.wbuf = append(append(c.wbuf[:hdr], byte(i+1)), c.tmp...)
			ref = i + 1
		}
	}
	if _, err := c.Conn.Write(c.wbuf); err != nil {
		return err
	}
	c.wset.keep(ref, f)
	return nil
}

// appendEdits appends the edits that make f from old: the common start and
// end are copied; between them, when both are as long, equal runs are copied
// and the rest substituted, otherwise the middle is replaced whole.
func appendEdits(b, old, f []byte) []byte {
	a := commonPrefix(old, f)
	z := commonSuffix(old[a:], f[a:])
	if len(old) != len(f) {
		if a == 0 && z == len(f) {
			// f ends old: an edit must make a byte before the cursor
			// may move, so the first byte goes as a literal.
			z--
		}
		b = appendEdit(b, a, f[a:len(f)-z], len(old)-z-a-(len(f)-z-a))
		if z > 0 {
			b = appendEdit(b, z, nil, 0)
		}
		return b
	}
	copied, end := a, len(f)-z
	for i := a; i < end; {
		// f[i] differs from old[i]. The literal runs to the next run of
		// minEqualRun equal bytes, or to the common end.
		j := i
		for j < end {
			if f[j] != old[j] {
				j++
				continue
			}
			k := j
			for k < end && f[k] == old[k] {
				k++
			}
			if k-j >= minEqualRun || k == end {
				break
			}
			j = k
		}
		b = appendEdit(b, copied, f[i:j], 0)
		// The equal bytes after the literal go with the next edit's copy.
		for i = j; i < end && f[i] == old[i]; i++ {
		}
		copied = i - j
	}
	if tail := copied + z; tail > 0 {
		b = appendEdit(b, tail, nil, 0)
	}
	return b
}

func appendEdit(b []byte, copyLen int, lit []byte, skip int) []byte {
	b = binary.AppendUvarint(b, uint64(copyLen))
	b = binary.AppendUvarint(b, uint64(len(lit)))
	b = binary.AppendVarint(b, int64(skip))
	return append(b, lit...)
}

func commonPrefix(x, y []byte) int {
	n := min(len(x), len(y))
	i := 0
	for i < n && x[i] == y[i] {
		i++
	}
	return i
}

func commonSuffix(x, y []byte) int {
	n := min(len(x), len(y))
	i := 0
	for i < n && x[len(x)-1-i] == y[len(y)-1-i] {
		i++
	}
	return i
}

// Read returns the bytes of the peer's frames, in order. A malformed frame
// fails this and every later read: the stream cannot be resynchronised.
func (c *framedConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.rbuf) == 0 && c.rleft == 0 {
		if err := c.readFrame(); err != nil {
			if errors.Is(err, errBadFrame) {
				c.rerr = err
				if c.onBad != nil {
					c.onBad()
				}
			}
			return 0, err
		}
	}
	if c.rleft > 0 {
		n, err := c.Conn.Read(p[:min(len(p), c.rleft)])
		c.rleft -= n
		if err == io.EOF && c.rleft > 0 {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// readFrame reads the next frame's header and, for a frame that is kept,
// the whole frame: it came in one write. A read that fails midway (a
// deadline) loses nothing: the next call parses the frame again.
func (c *framedConn) readFrame() error {
	err := c.parseFrame(byteReader{&replayReader{c: c}})
	if err == nil || errors.Is(err, errBadFrame) {
		c.pend = c.pend[:0]
	}
	return err
}

func (c *framedConn) parseFrame(r byteReader) error {
	n, err := readUvarint(r)
	if err != nil {
		return frameReadErr(err, true)
	}
	if n == 0 || n > maxFrameLen {
		return fmt.Errorf("%w: length %d outside 1..%d", errBadFrame, n, maxFrameLen)
	}
	ref, err := r.ReadByte()
	if err != nil {
		return frameReadErr(err, false)
	}
	if n > frameSlotLen {
		if ref != 0 {
			return fmt.Errorf("%w: a %d-byte frame names slot %d", errBadFrame, n, ref)
		}
		c.rleft = int(n)
		return nil
	}
	if int(ref) > frameSlots || (ref > 0 && c.rset.used[ref-1] == 0) {
		return fmt.Errorf("%w: names slot %d, which is empty or past %d", errBadFrame, ref, frameSlots)
	}
	// Room for the whole frame first: edits append into f and slice its
	// literals in place.
	f := slices.Grow(c.frame[:0], int(n))
	if ref == 0 {
		f = f[:n]
		if _, err := io.ReadFull(r.Reader, f); err != nil {
			return frameReadErr(err, false)
		}
	} else if f, err = readEdits(r, c.rset.slots[ref-1], f, int(n)); err != nil {
		return err
	}
	c.rset.keep(int(ref), f)
	c.rbuf, c.frame = f, f
	return nil
}

// replayReader serves a frame's bytes read before a failed read again, then
// reads on, keeping every byte until the frame is parsed.
type replayReader struct {
	c   *framedConn
	pos int
}

func (r *replayReader) Read(p []byte) (int, error) {
	if r.pos < len(r.c.pend) {
		n := copy(p, r.c.pend[r.pos:])
		r.pos += n
		return n, nil
	}
	n, err := r.c.Conn.Read(p)
	r.c.pend = append(r.c.pend, p[:n]...)
	r.pos += n
	return n, err
}

// readEdits applies edits to old until f holds n bytes.
func readEdits(r byteReader, old, f []byte, n int) ([]byte, error) {
	cursor := 0
	for len(f) < n {
		cp, err := readUvarint(r)
		if err != nil {
			return nil, frameReadErr(err, false)
		}
		lit, err := readUvarint(r)
		if err != nil {
			return nil, frameReadErr(err, false)
		}
		skip, err := readVarint(r)
		if err != nil {
			return nil, frameReadErr(err, false)
		}
		room := uint64(n - len(f))
		if cp+lit == 0 || cp > room || lit > room-cp || cp > uint64(len(old)-cursor) {
			return nil, fmt.Errorf("%w: edit copies %d and adds %d bytes at %d of a %d-byte frame made from %d bytes",
				errBadFrame, cp, lit, len(f), n, len(old))
		}
		f = append(f, old[cursor:cursor+int(cp)]...)
		start := len(f)
		f = f[:start+int(lit)]
		if _, err := io.ReadFull(r.Reader, f[start:]); err != nil {
			return nil, frameReadErr(err, false)
		}
		next := int64(cursor) + int64(cp) + int64(lit) + skip
		if next < 0 || next > int64(len(old)) {
			// Past the end is harmless while nothing more is copied,
			// but an honest writer never moves there.
			return nil, fmt.Errorf("%w: edit moves the cursor to %d of %d", errBadFrame, next, len(old))
		}
		cursor = int(next)
	}
	return f, nil
}

// byteReader reads single bytes straight from the connection; frame headers
// are a few bytes, and the TLS connection below buffers the record.
type byteReader struct{ io.Reader }

func (r byteReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(r.Reader, b[:])
	return b[0], err
}

// readUvarint reads a uvarint of at most binary.MaxVarintLen32 bytes: no
// honest frame needs more.
func readUvarint(r byteReader) (uint64, error) {
	var x uint64
	for i := 0; i < binary.MaxVarintLen32; i++ {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: varint longer than %d bytes", errBadFrame, binary.MaxVarintLen32)
}

// readVarint reads a zigzag varint as binary.AppendVarint writes it.
func readVarint(r byteReader) (int64, error) {
	ux, err := readUvarint(r)
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, err
}

// frameReadErr maps a failed read inside a frame: only a frame boundary may
// end the stream cleanly, and an overlong varint is malformed.
func frameReadErr(err error, atBoundary bool) error {
	switch {
	case err == io.EOF && atBoundary:
		return io.EOF
	case err == io.EOF:
		return io.ErrUnexpectedEOF
	}
	return err
}
