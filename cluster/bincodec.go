package cluster

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// The binary raft protocol (bintransport.go). A connection opens with
// binMagic and binVersion; then each request is a frame
//
//	type byte | uvarint payload length | payload
//
// (an InstallSnapshot frame is followed by the snapshot's Size bytes) and
// each answer is a frame without the type byte, whose payload opens with
// the error string raft's handler returned ("" for none). Payloads are the
// fields of hashicorp/raft's request and response structs in declaration
// order: unsigned integers as uvarints, signed ones as zigzag varints,
// byte slices as a uvarint length and the bytes (an empty slice decodes as
// nil), booleans as one byte 0 or 1, a time as a zigzag varint of Unix
// seconds and a uvarint of nanoseconds (seconds+1, so that 0 is the zero
// time). A decoder that meets anything else (a truncated field, a varint
// not in its shortest form, a boolean other than 0 or 1, a count larger
// than the bytes left, bytes left over)
// fails the frame, and the connection is closed.
const (
	// binMagic is a byte hashicorp/raft's NetworkTransport never sends
	// first (its first byte is an rpc type, 0 to 4) and rejects as an
	// unknown rpc type, closing the connection.
	binMagic   byte = 0xB5
	binVersion byte = 1

	binAppendEntries        byte = 0
	binRequestVote          byte = 1
	binInstallSnapshot      byte = 2
	binTimeoutNow           byte = 3
	binRequestPreVote       byte = 4
	binMaxFrame                  = 1 << 30
	binFrameReadChunk            = 1 << 20
	binLogMinEncodedLen          = 6 // index, term, type, data len, ext len, time: a byte each at least
	binErrFrame                  = "raft binary transport: bad frame"
	binErrFrameTrailing          = "trailing bytes"
	binErrFrameTruncated         = "truncated"
	binErrFrameBool              = "boolean not 0 or 1"
	binErrFrameCount             = "count larger than the frame"
	binErrFrameNegativeSize      = "negative snapshot size"
	binErrFrameVarint            = "varint not in its shortest form"
)

var errBinFrame = errors.New(binErrFrame)

func frameErr(what string) error { return fmt.Errorf("%w: %s", errBinFrame, what) }

// binEnc appends fields to a byte slice.
type binEnc struct{ b []byte }

func (e *binEnc) u64(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *binEnc) i64(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *binEnc) bytes(v []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}
func (e *binEnc) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *binEnc) time(t time.Time) {
	if t.IsZero() {
		e.i64(0)
		e.u64(0)
		return
	}
	e.i64(t.Unix())
	e.u64(uint64(t.Nanosecond()) + 1)
}
func (e *binEnc) header(h raft.RPCHeader) {
	e.i64(int64(h.ProtocolVersion))
	e.bytes(h.ID)
	e.bytes(h.Addr)
}

// binDec reads fields from a frame's payload; the first error sticks and
// every later read returns zero. Byte slices alias the payload, which must
// therefore not be reused.
type binDec struct {
	b   []byte
	err error
}

func (d *binDec) fail(what string) {
	if d.err == nil {
		d.err = frameErr(what)
	}
	d.b = nil
}

func (d *binDec) u64() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(binErrFrameTruncated)
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		d.fail(binErrFrameVarint)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *binDec) i64() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(binErrFrameTruncated)
		return 0
	}
	if n > 1 && d.b[n-1] == 0 {
		d.fail(binErrFrameVarint)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *binDec) bytes() []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(binErrFrameTruncated)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *binDec) bool() bool {
	if len(d.b) == 0 {
		d.fail(binErrFrameTruncated)
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.fail(binErrFrameBool)
	}
	return v == 1
}

func (d *binDec) time() time.Time {
	s, ns := d.i64(), d.u64()
	if d.err != nil || ns == 0 {
		if s != 0 {
			d.fail("time with seconds and no nanoseconds")
		}
		return time.Time{}
	}
	if ns > 1e9 {
		d.fail("nanoseconds out of range")
		return time.Time{}
	}
	t := time.Unix(s, int64(ns-1))
	if t.IsZero() {
		d.fail("the zero time not written as zero")
	}
	return t
}

func (d *binDec) header() raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(d.i64()), ID: d.bytes(), Addr: d.bytes()}
}

// end fails the frame if bytes are left over.
func (d *binDec) end() error {
	if d.err == nil && len(d.b) > 0 {
		d.fail(binErrFrameTrailing)
	}
	return d.err
}

// encodeRequest appends the payload of a request (one of raft's request
// pointer types) and returns its frame type.
func encodeRequest(e *binEnc, req interface{}) (byte, error) {
	switch r := req.(type) {
	case *raft.AppendEntriesRequest:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Leader)
		e.u64(r.PrevLogEntry)
		e.u64(r.PrevLogTerm)
		e.u64(uint64(len(r.Entries)))
		for _, l := range r.Entries {
			e.u64(l.Index)
			e.u64(l.Term)
			e.b = append(e.b, byte(l.Type))
			e.bytes(l.Data)
			e.bytes(l.Extensions)
			e.time(l.AppendedAt)
		}
		e.u64(r.LeaderCommitIndex)
		return binAppendEntries, nil
	case *raft.RequestVoteRequest:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Candidate)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
		e.bool(r.LeadershipTransfer)
		return binRequestVote, nil
	case *raft.RequestPreVoteRequest:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
		return binRequestPreVote, nil
	case *raft.InstallSnapshotRequest:
		e.header(r.RPCHeader)
		e.i64(int64(r.SnapshotVersion))
		e.u64(r.Term)
		e.bytes(r.Leader)
		e.u64(r.LastLogIndex)
		e.u64(r.LastLogTerm)
		e.bytes(r.Peers)
		e.bytes(r.Configuration)
		e.u64(r.ConfigurationIndex)
		e.i64(r.Size)
		return binInstallSnapshot, nil
	case *raft.TimeoutNowRequest:
		e.header(r.RPCHeader)
		return binTimeoutNow, nil
	}
	return 0, fmt.Errorf("raft binary transport: cannot encode %T", req)
}

// decodeRequest decodes the payload of a request frame of type typ.
func decodeRequest(typ byte, payload []byte) (interface{}, error) {
	d := &binDec{b: payload}
	var out interface{}
	switch typ {
	case binAppendEntries:
		r := &raft.AppendEntriesRequest{RPCHeader: d.header(), Term: d.u64(), Leader: d.bytes(), PrevLogEntry: d.u64(), PrevLogTerm: d.u64()}
		n := d.u64()
		if n > uint64(len(d.b))/binLogMinEncodedLen {
			d.fail(binErrFrameCount)
		}
		if n > 0 && d.err == nil {
			logs := make([]raft.Log, n)
			r.Entries = make([]*raft.Log, n)
			for i := range logs {
				l := &logs[i]
				l.Index, l.Term = d.u64(), d.u64()
				if len(d.b) == 0 {
					d.fail(binErrFrameTruncated)
					break
				}
				l.Type, d.b = raft.LogType(d.b[0]), d.b[1:]
				l.Data, l.Extensions, l.AppendedAt = d.bytes(), d.bytes(), d.time()
				r.Entries[i] = l
			}
		}
		r.LeaderCommitIndex = d.u64()
		out = r
	case binRequestVote:
		out = &raft.RequestVoteRequest{RPCHeader: d.header(), Term: d.u64(), Candidate: d.bytes(),
			LastLogIndex: d.u64(), LastLogTerm: d.u64(), LeadershipTransfer: d.bool()}
	case binRequestPreVote:
		out = &raft.RequestPreVoteRequest{RPCHeader: d.header(), Term: d.u64(), LastLogIndex: d.u64(), LastLogTerm: d.u64()}
	case binInstallSnapshot:
		r := &raft.InstallSnapshotRequest{RPCHeader: d.header(), SnapshotVersion: raft.SnapshotVersion(d.i64()),
			Term: d.u64(), Leader: d.bytes(), LastLogIndex: d.u64(), LastLogTerm: d.u64(), Peers: d.bytes(),
			Configuration: d.bytes(), ConfigurationIndex: d.u64(), Size: d.i64()}
		if r.Size < 0 {
			d.fail(binErrFrameNegativeSize)
		}
		out = r
	case binTimeoutNow:
		out = &raft.TimeoutNowRequest{RPCHeader: d.header()}
	default:
		return nil, frameErr(fmt.Sprintf("unknown rpc type %d", typ))
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return out, nil
}

// encodeResponse appends the payload of an answer: the handler's error
// ("" for none) and the response (one of raft's response pointer types;
// nil encodes as the zero response of reqType).
func encodeResponse(e *binEnc, reqType byte, rpcErr error, resp interface{}) error {
	msg := ""
	if rpcErr != nil {
		msg = rpcErr.Error()
	}
	e.bytes([]byte(msg))
	if resp == nil {
		switch reqType {
		case binAppendEntries:
			resp = &raft.AppendEntriesResponse{}
		case binRequestVote:
			resp = &raft.RequestVoteResponse{}
		case binRequestPreVote:
			resp = &raft.RequestPreVoteResponse{}
		case binInstallSnapshot:
			resp = &raft.InstallSnapshotResponse{}
		case binTimeoutNow:
			resp = &raft.TimeoutNowResponse{}
		}
	}
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.u64(r.LastLog)
		e.bool(r.Success)
		e.bool(r.NoRetryBackoff)
	case *raft.RequestVoteResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bytes(r.Peers)
		e.bool(r.Granted)
	case *raft.RequestPreVoteResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bool(r.Granted)
	case *raft.InstallSnapshotResponse:
		e.header(r.RPCHeader)
		e.u64(r.Term)
		e.bool(r.Success)
	case *raft.TimeoutNowResponse:
		e.header(r.RPCHeader)
	default:
		return fmt.Errorf("raft binary transport: cannot encode %T", resp)
	}
	return nil
}

// decodeResponse decodes an answer's payload into resp (a pointer to the
// response type of the request sent) and returns the handler's error.
func decodeResponse(payload []byte, resp interface{}) (rpcErr error, err error) {
	d := &binDec{b: payload}
	msg := d.bytes()
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		*r = raft.AppendEntriesResponse{RPCHeader: d.header(), Term: d.u64(), LastLog: d.u64(), Success: d.bool(), NoRetryBackoff: d.bool()}
	case *raft.RequestVoteResponse:
		*r = raft.RequestVoteResponse{RPCHeader: d.header(), Term: d.u64(), Peers: d.bytes(), Granted: d.bool()}
	case *raft.RequestPreVoteResponse:
		*r = raft.RequestPreVoteResponse{RPCHeader: d.header(), Term: d.u64(), Granted: d.bool()}
	case *raft.InstallSnapshotResponse:
		*r = raft.InstallSnapshotResponse{RPCHeader: d.header(), Term: d.u64(), Success: d.bool()}
	case *raft.TimeoutNowResponse:
		*r = raft.TimeoutNowResponse{RPCHeader: d.header()}
	default:
		return nil, fmt.Errorf("raft binary transport: cannot decode into %T", resp)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if len(msg) > 0 {
		return errors.New(string(msg)), nil
	}
	return nil, nil
}

// writeFrame writes a frame: typ (unless typ < 0), the payload's length
// and the payload.
func writeFrame(w io.Writer, typ int, payload []byte) error {
	var hdr [1 + binary.MaxVarintLen64]byte
	n := 0
	if typ >= 0 {
		hdr[0] = byte(typ)
		n = 1
	}
	n += binary.PutUvarint(hdr[n:], uint64(len(payload)))
	if _, err := w.Write(hdr[:n]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// readFramePayload reads a payload length and the payload into a new
// slice. A length claimed but not sent costs no more memory than was
// sent: the slice grows as bytes arrive.
func readFramePayload(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if n > binMaxFrame {
		return nil, frameErr(fmt.Sprintf("frame of %d bytes", n))
	}
	rd := r
	if n <= binFrameReadChunk {
		b := make([]byte, n)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	b := make([]byte, 0, binFrameReadChunk)
	for uint64(len(b)) < n {
		k := min(n-uint64(len(b)), binFrameReadChunk)
		old := len(b)
		b = slices.Grow(b, int(k))[:old+int(k)]
		if _, err := io.ReadFull(rd, b[old:]); err != nil {
			return nil, unexpected(err)
		}
	}
	return b, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
