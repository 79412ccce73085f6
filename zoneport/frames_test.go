package zoneport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// bufConn is one direction of a connection: writes append to w, reads
// drain r.
type bufConn struct {
	net.Conn
	r io.Reader
	w bytes.Buffer
}

func (c *bufConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *bufConn) Write(p []byte) (int, error) { return c.w.Write(p) }

// frameWriter returns a framed writer and the buffer its frames land in.
func frameWriter() (*framedConn, *bufConn) {
	bc := &bufConn{}
	return newFramedConn(bc, nil), bc
}

// readAllFramed reads a framed stream back with reads of varying size.
func readAllFramed(t testing.TB, wire []byte, rng *rand.Rand) ([]byte, int, error) {
	t.Helper()
	bad := 0
	fc := newFramedConn(&bufConn{r: bytes.NewReader(wire)}, func() { bad++ })
	var out []byte
	for {
		buf := make([]byte, 1+rng.IntN(3000))
		n, err := fc.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, bad, nil
		}
		if err != nil {
			return out, bad, err
		}
	}
}

// zoneLikeWrites is traffic shaped like the zone port's: a few message kinds
// repeated with small changes (counters, timestamps, a longer number), some
// new ones, and a few writes long enough to be cut into frames.
func zoneLikeWrites(rng *rand.Rand, count int) [][]byte {
	kinds := [][]byte{
		[]byte("\x00\x89\xa4Addr\xb2127.1.2.1:9470\xa7Entries\xc0\xa2ID\xda\x00$92b2705e\xa4Term\x02"),
		[]byte("\xa0\x87\xa7LastLog\x13\xa7Success\xc3\xa4Term\x02"),
		[]byte("GET /healthz HTTP/1.1\r\nHost: node-2\r\n\r\n"),
		[]byte("HTTP/1.1 200 OK\r\nDate: Tue, 24 Nov 2026 20:19:30 GMT\r\nContent-Length: 3\r\n\r\nok\n"),
	}
	var out [][]byte
	for range count {
		var w []byte
		switch r := rng.IntN(20); {
		case r < 14:
			w = bytes.Clone(kinds[rng.IntN(len(kinds))])
			for range rng.IntN(4) {
				w[rng.IntN(len(w))] = byte(rng.IntN(256))
			}
			if rng.IntN(5) == 0 {
				at := rng.IntN(len(w))
				w = append(w[:at:at], append(bytes.Repeat([]byte{'9'}, 1+rng.IntN(3)), w[at:]...)...)
			}
			if rng.IntN(3) == 0 {
				kinds[rng.IntN(len(kinds))] = w
			}
		case r < 18:
			w = make([]byte, 1+rng.IntN(frameSlotLen+200))
			for i := range w {
				w[i] = byte(rng.IntN(256))
			}
		default:
			w = bytes.Repeat([]byte("entry"), rng.IntN(30000))
			if len(w) == 0 {
				w = []byte{0}
			}
		}
		out = append(out, w)
	}
	return out
}

func TestFramedConnRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		fw, wire := frameWriter()
		var want []byte
		for _, w := range zoneLikeWrites(rng, 300) {
			n, err := fw.Write(w)
			if err != nil || n != len(w) {
				t.Fatalf("seed %d: Write = %d, %v; want %d, nil", seed, n, err, len(w))
			}
			want = append(want, w...)
		}
		got, _, err := readAllFramed(t, wire.w.Bytes(), rng)
		if err != nil {
			t.Fatalf("seed %d: read back: %v", seed, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: read back %d bytes differing from the %d written", seed, len(got), len(want))
		}
	}
}

// TestFramedConnSendsOnlyWhatChanged pins the savings the zone's traffic
// relies on: a message sent again costs a few bytes, one with a counter
// changed a few more, and a message kind seen four writes ago is still
// remembered.
func TestFramedConnSendsOnlyWhatChanged(t *testing.T) {
	heartbeat := []byte("\x00\x89\xa4Addr\xb2127.1.2.1:9470\xa7Entries\xc0\xa2ID\xda\x00$92b2705e-5ff4-48b8-9f4d-eeb160bcc3c1\xa6Leader\xb2127.1.2.1:9470\xb1LeaderCommitIndex\x00\xacPrevLogEntry\x00\xabPrevLogTerm\x00\xafProtocolVersion\x03\xa4Term\x02")
	commit := bytes.Clone(heartbeat)
	for _, field := range []string{"LeaderCommitIndex", "PrevLogEntry", "PrevLogTerm"} {
		commit[bytes.Index(commit, []byte(field))+len(field)] = 0x13
	}
	other := []byte("HTTP/1.1 200 OK\r\nDate: Tue, 24 Nov 2026 20:19:30 GMT\r\nContent-Length: 3\r\n\r\nok\n")
	fw, wire := frameWriter()
	cost := func(b []byte) int {
		before := wire.w.Len()
		if _, err := fw.Write(b); err != nil {
			t.Fatal(err)
		}
		return wire.w.Len() - before
	}
	if got := cost(heartbeat); got != len(heartbeat)+3 {
		t.Errorf("first message costs %d bytes, want %d (literal)", got, len(heartbeat)+3)
	}
	if got := cost(heartbeat); got > 8 {
		t.Errorf("the same message again costs %d bytes, want at most 8", got)
	}
	if got := cost(commit); got > 24 {
		t.Errorf("a message with three bytes changed costs %d bytes, want at most 24", got)
	}
	for range 2 {
		cost(other)
		cost([]byte("POST /v1/reports HTTP/1.1\r\n"))
	}
	if got := cost(heartbeat); got > 8 {
		t.Errorf("a message seen five writes ago costs %d bytes, want at most 8 (it is still kept)", got)
	}
	got, _, err := readAllFramed(t, wire.w.Bytes(), rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Join([][]byte{heartbeat, heartbeat, commit, other, []byte("POST /v1/reports HTTP/1.1\r\n"), other,
		[]byte("POST /v1/reports HTTP/1.1\r\n"), heartbeat}, nil); !bytes.Equal(got, want) {
		t.Errorf("read back %q, want %q", got, want)
	}
}

func uv(x uint64) []byte { return binary.AppendUvarint(nil, x) }

func frameBytes(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestFramedConnRefusesMalformedFrames feeds what an authenticated but
// hostile peer could send: every malformed frame is refused with
// errBadFrame and counted, and the connection stays failed.
func TestFramedConnRefusesMalformedFrames(t *testing.T) {
	first := frameBytes(uv(5), []byte{0}, []byte("hello"))
	cases := map[string][]byte{
		"zero length":        frameBytes(uv(0), []byte{0}),
		"too long":           frameBytes(uv(maxFrameLen+1), []byte{0}),
		"varint too long":    bytes.Repeat([]byte{0xff}, 6),
		"names empty slot":   frameBytes(uv(3), []byte{1}, uv(3), uv(0), []byte{0}),
		"names slot past 4":  frameBytes(first, uv(3), []byte{5}, uv(3), uv(0), []byte{0}),
		"long frame edits":   frameBytes(uv(frameSlotLen+1), []byte{1}),
		"copies past slot":   frameBytes(first, uv(6), []byte{1}, uv(6), uv(0), []byte{0}),
		"makes too much":     frameBytes(first, uv(3), []byte{1}, uv(2), uv(2), []byte{0}, []byte("ab")),
		"empty edit":         frameBytes(first, uv(3), []byte{1}, uv(0), uv(0), []byte{2}),
		"cursor past end":    frameBytes(first, uv(3), []byte{1}, uv(1), uv(0), binary.AppendVarint(nil, 10)),
		"cursor before zero": frameBytes(first, uv(3), []byte{1}, uv(1), uv(0), binary.AppendVarint(nil, -2)),
	}
	for name, wire := range cases {
		t.Run(name, func(t *testing.T) {
			bad := 0
			fc := newFramedConn(&bufConn{r: bytes.NewReader(wire)}, func() { bad++ })
			var err error
			for err == nil {
				_, err = fc.Read(make([]byte, 64))
			}
			if !errors.Is(err, errBadFrame) {
				t.Fatalf("read error %v, want errBadFrame", err)
			}
			if bad != 1 {
				t.Errorf("bad frames counted %d times, want 1", bad)
			}
			if _, again := fc.Read(make([]byte, 64)); !errors.Is(again, errBadFrame) {
				t.Errorf("read after a malformed frame: %v, want errBadFrame again", again)
			}
		})
	}
}

// TestFramedConnCutFrame: a connection that ends inside a frame is a cut
// stream (io.ErrUnexpectedEOF), not a malformed one and not a clean close.
func TestFramedConnCutFrame(t *testing.T) {
	fw, wire := frameWriter()
	fw.Write([]byte("a message long enough"))
	whole := wire.w.Bytes()
	for cut := 1; cut < len(whole); cut++ {
		_, bad, err := readAllFramed(t, whole[:cut], rand.New(rand.NewPCG(3, 4)))
		if !errors.Is(err, io.ErrUnexpectedEOF) || bad != 0 {
			t.Fatalf("stream cut after %d of %d bytes: %v (bad %d), want io.ErrUnexpectedEOF", cut, len(whole), err, bad)
		}
	}
}

// FuzzFramedConnRead feeds a hostile peer's bytes to the reader: it must end
// in an error or EOF without panicking, and never hand out more than
// maxFrameLen bytes per frame header it read.
func FuzzFramedConnRead(f *testing.F) {
	fw, wire := frameWriter()
	for _, w := range zoneLikeWrites(rand.New(rand.NewPCG(5, 6)), 12) {
		if len(w) < 4096 {
			fw.Write(w)
		}
	}
	f.Add(wire.w.Bytes())
	f.Add(frameBytes(uv(5), []byte{0}, []byte("hello"), uv(5), []byte{1}, uv(5), uv(0), []byte{0}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fc := newFramedConn(&bufConn{r: bytes.NewReader(data)}, nil)
		total := 0
		for {
			n, err := fc.Read(make([]byte, 512))
			total += n
			if err != nil {
				break
			}
		}
		if total > (len(data)+1)*maxFrameLen {
			t.Fatalf("handed out %d bytes from %d", total, len(data))
		}
	})
}

// FuzzFramedConnRoundTrip writes the fuzzer's messages (split at 0xff) and
// reads them back: whatever the messages, the reader rebuilds them exactly.
func FuzzFramedConnRoundTrip(f *testing.F) {
	f.Add([]byte("GET /healthz\xffGET /healthz\xffGET /healthy\xffPOST\xffGET /healthz"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fw, wire := frameWriter()
		var want []byte
		for _, w := range bytes.Split(data, []byte{0xff}) {
			if len(w) == 0 {
				continue
			}
			fw.Write(w)
			want = append(want, w...)
		}
		got, _, err := readAllFramed(t, wire.w.Bytes(), rand.New(rand.NewPCG(uint64(len(data)), 7)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
	})
}

// stutterConn hands out at most a few bytes per read and fails every other
// read with a timeout, as a connection whose read deadline keeps expiring.
type stutterConn struct {
	net.Conn
	r     io.Reader
	calls int
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }
func (timeoutErr) Temporary() bool {
	return true
}

func (c *stutterConn) Read(p []byte) (int, error) {
	c.calls++
	if c.calls%2 == 0 {
		return 0, timeoutErr{}
	}
	return c.r.Read(p[:min(len(p), 1+c.calls%3)])
}

// TestFramedConnResumesAfterATimeout: net/http stops its background read
// with a deadline and reads the same connection again later. A frame cut by
// a failed read must be parsed again from its start, not lost.
func TestFramedConnResumesAfterATimeout(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	fw, wire := frameWriter()
	var want []byte
	for _, w := range zoneLikeWrites(rng, 200) {
		fw.Write(w)
		want = append(want, w...)
	}
	fc := newFramedConn(&stutterConn{r: bytes.NewReader(wire.w.Bytes())}, func() { t.Error("a frame counted as malformed") })
	var got []byte
	for {
		buf := make([]byte, 1+rng.IntN(2000))
		n, err := fc.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		var te timeoutErr
		if err != nil && !errors.As(err, &te) {
			t.Fatalf("after %d bytes: %v", len(got), err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes differing from the %d written", len(got), len(want))
	}
}

// TestFramedConnFrameLongerThanAnyBefore: a message made from a shorter kept
// one, with more new bytes than any frame before it held, is rebuilt in
// memory grown for it. (A fresh connection's first report after a few
// heartbeats is one.)
func TestFramedConnFrameLongerThanAnyBefore(t *testing.T) {
	short := []byte("POST /v1/reports HTTP/1.1\r\n")
	long := append(bytes.Clone(short), bytes.Repeat([]byte("signed report body "), 10)...)
	fw, wire := frameWriter()
	for _, w := range [][]byte{short, long} {
		if _, err := fw.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	got, bad, err := readAllFramed(t, wire.w.Bytes(), rand.New(rand.NewPCG(1, 1)))
	if err != nil || bad != 0 {
		t.Fatalf("read back: %v (bad frames %d)", err, bad)
	}
	if want := append(bytes.Clone(short), long...); !bytes.Equal(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
}
