package zoneport

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// raftWire is the msgpack handle hashicorp/raft's NetworkTransport encodes
// with (net_transport.go: TimeNotBuiltin).
func raftWire() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.TimeNotBuiltin = true
	return h
}

// EncodeRPC frames a Raft request as hashicorp/raft's NetworkTransport sends
// it: the type byte (RPCAppendEntries, ...), then the request. It is there
// for tools and tests that speak Raft over DialRaft, as a stolen member
// would.
func EncodeRPC(typ byte, req any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(typ)
	if err := codec.NewEncoder(&buf, raftWire()).Encode(req); err != nil {
		return nil, fmt.Errorf("encode raft rpc %d: %w", typ, err)
	}
	return buf.Bytes(), nil
}

// ReadRPCResponse reads one answer as raft's transport writes it, the error
// string and then the response, into resp. A connection the guard closed
// instead of answering is an error.
func ReadRPCResponse(r io.Reader, resp any) error {
	dec := codec.NewDecoder(r, raftWire())
	var rpcErr string
	if err := dec.Decode(&rpcErr); err != nil {
		return fmt.Errorf("no answer: %w", err)
	}
	if rpcErr != "" {
		return fmt.Errorf("raft error: %w", errors.New(rpcErr))
	}
	return dec.Decode(resp)
}
