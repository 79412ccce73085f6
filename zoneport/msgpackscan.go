package zoneport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The scanner the RPC guard delimits one msgpack value with before anything
// decodes it: it bounds the value's bytes and items, and keeps (or skips)
// what it read, so that a hostile peer's RPC costs at most what the guard
// allows, whatever the codec would have done with it.

// Errors of msgpackScanner.
var (
	errMsgpackTooLarge     = errors.New("msgpack value larger than allowed")
	errMsgpackTooManyItems = errors.New("msgpack value has too many items")
	errMsgpackInvalid      = errors.New("invalid msgpack")
)

// msgpackSource is what the scanner reads from: a bufio.Reader or a
// bytes.Reader.
type msgpackSource interface {
	io.Reader
	io.ByteReader
}

// msgpackScanner reads exactly one msgpack value from r, byte by byte for
// heads and in chunks for payloads, without decoding it. It exists because the
// codec cannot be trusted with a hostile stream: it allocates some declared
// lengths in one piece before reading them (a time.Time sent as a str32 of
// 4 GiB makes it allocate 4 GiB), and its memory per decoded item is far more
// than the item's bytes. The scanner checks every declared length against the
// remaining byte budget before reading or allocating anything, and counts
// items, so a forged length fails at once and only well-delimited, bounded
// values ever reach the codec.
type msgpackScanner struct {
	r      msgpackSource
	keep   bool   // append the value's bytes to out
	out    []byte // the bytes read, when keep
	budget int64  // bytes the value may still take
	items  int    // items the value may still have
	head   [8]byte
}

// msgpack head kinds.
const (
	mpScalar  = iota // fixed size, no length field
	mpPayload        // length field, then that many bytes
	mpExt            // length field, type byte, then that many bytes
	mpArray          // length field (or fixarray), then that many values
	mpMap            // length field (or fixmap), then twice that many values
)

// msgpackHead classifies a msgpack head byte: its kind, the size of its
// length field (0 for fix types), and for fix types the fixed payload size or
// element count. ok is false for 0xc1, which msgpack never uses.
func msgpackHead(b byte) (kind, lenSize int, fixed int64, ok bool) {
	switch {
	case b <= 0x7f, b >= 0xe0: // positive and negative fixint
		return mpScalar, 0, 0, true
	case b <= 0x8f:
		return mpMap, 0, int64(b & 0x0f), true
	case b <= 0x9f:
		return mpArray, 0, int64(b & 0x0f), true
	case b <= 0xbf:
		return mpPayload, 0, int64(b & 0x1f), true
	}
	switch b {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return mpScalar, 0, 0, true
	case 0xc4, 0xd9: // bin8, str8
		return mpPayload, 1, 0, true
	case 0xc5, 0xda: // bin16, str16
		return mpPayload, 2, 0, true
	case 0xc6, 0xdb: // bin32, str32
		return mpPayload, 4, 0, true
	case 0xc7: // ext8
		return mpExt, 1, 0, true
	case 0xc8: // ext16
		return mpExt, 2, 0, true
	case 0xc9: // ext32
		return mpExt, 4, 0, true
	case 0xcc, 0xd0: // uint8, int8
		return mpScalar, 0, 1, true
	case 0xcd, 0xd1: // uint16, int16
		return mpScalar, 0, 2, true
	case 0xca, 0xce, 0xd2: // float32, uint32, int32
		return mpScalar, 0, 4, true
	case 0xcb, 0xcf, 0xd3: // float64, uint64, int64
		return mpScalar, 0, 8, true
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1, 2, 4, 8, 16: type byte and data
		return mpScalar, 0, 1 + int64(1)<<(b-0xd4), true
	case 0xdc: // array16
		return mpArray, 2, 0, true
	case 0xdd: // array32
		return mpArray, 4, 0, true
	case 0xde: // map16
		return mpMap, 2, 0, true
	case 0xdf: // map32
		return mpMap, 4, 0, true
	}
	return 0, 0, 0, false // 0xc1
}

// scan reads one value. Containers are not recursed into: pending counts the
// values still to read, so nesting costs no stack.
func (s *msgpackScanner) scan() error {
	pending := int64(1)
	for pending > 0 {
		pending--
		if s.items <= 0 {
			return fmt.Errorf("%w: more than %d", errMsgpackTooManyItems, guardMaxRPCItems)
		}
		s.items--
		if err := s.need(1); err != nil {
			return err
		}
		b, err := s.r.ReadByte()
		if err != nil {
			return eofUnexpected(err)
		}
		if s.keep {
			s.out = append(s.out, b)
		}
		kind, lenSize, n, ok := msgpackHead(b)
		if !ok {
			return fmt.Errorf("%w: byte 0x%02x", errMsgpackInvalid, b)
		}
		if lenSize > 0 {
			if err := s.need(int64(lenSize)); err != nil {
				return err
			}
			h := s.head[:lenSize]
			if _, err := io.ReadFull(s.r, h); err != nil {
				return eofUnexpected(err)
			}
			if s.keep {
				s.out = append(s.out, h...)
			}
			switch lenSize {
			case 1:
				n = int64(h[0])
			case 2:
				n = int64(binary.BigEndian.Uint16(h))
			case 4:
				n = int64(binary.BigEndian.Uint32(h))
			}
		}
		switch kind {
		case mpScalar, mpPayload:
			err = s.payload(n)
		case mpExt:
			err = s.payload(n + 1)
		case mpArray, mpMap:
			if kind == mpMap {
				n *= 2
			}
			// Every value takes at least a byte: a container that declares
			// more values than bytes or items remain cannot be valid, and is
			// refused before any of it is read.
			pending += n
			if pending > s.budget {
				return fmt.Errorf("%w: %d values declared with %d bytes left", errMsgpackTooLarge, pending, s.budget)
			}
			if pending > int64(s.items) {
				return fmt.Errorf("%w: %d values declared, at most %d", errMsgpackTooManyItems, pending, guardMaxRPCItems)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// need charges n bytes to the budget, failing before they are read.
func (s *msgpackScanner) need(n int64) error {
	if n > s.budget {
		return fmt.Errorf("%w: %d more bytes with %d left", errMsgpackTooLarge, n, s.budget)
	}
	s.budget -= n
	return nil
}

// payload reads n bytes, allocating only as they arrive.
func (s *msgpackScanner) payload(n int64) error {
	if err := s.need(n); err != nil {
		return err
	}
	if !s.keep {
		if _, err := io.CopyN(io.Discard, s.r, n); err != nil {
			return eofUnexpected(err)
		}
		return nil
	}
	for n > 0 {
		k := int(min(n, guardPayloadChunk))
		l := len(s.out)
		s.out = append(s.out, make([]byte, k)...)
		if _, err := io.ReadFull(s.r, s.out[l:]); err != nil {
			return eofUnexpected(err)
		}
		n -= int64(k)
	}
	return nil
}

// eofUnexpected reports a value cut short as io.ErrUnexpectedEOF: only the
// RPC type byte may meet a clean end of the connection.
func eofUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
