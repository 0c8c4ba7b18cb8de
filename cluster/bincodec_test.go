package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func fullHeader(id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte("127.0.0.1:7000")}
}

// binRequests is every request type with every field set.
func binRequests() []interface{} {
	at := time.Unix(1_790_000_000, 123_456_789)
	return []interface{}{
		&raft.AppendEntriesRequest{
			RPCHeader: fullHeader("n1"), Term: 7, Leader: []byte("127.0.0.1:7000"),
			PrevLogEntry: 1 << 40, PrevLogTerm: 6, LeaderCommitIndex: 1<<40 - 3,
			Entries: []*raft.Log{
				{Index: 1<<40 + 1, Term: 7, Type: raft.LogCommand, Data: []byte("job one"), Extensions: []byte{0xff, 0}, AppendedAt: at},
				{Index: 1<<40 + 2, Term: 7, Type: raft.LogConfiguration, Data: bytes.Repeat([]byte{1, 2, 3}, 200), AppendedAt: at.Add(-time.Hour)},
				{Index: 1<<40 + 3, Term: 7, Type: raft.LogNoop},                                  // no data, zero time
				{Index: 1<<40 + 4, Term: 7, Type: raft.LogBarrier, AppendedAt: time.Unix(-5, 0)}, // before 1970
			},
		},
		&raft.AppendEntriesRequest{RPCHeader: fullHeader("n1"), Term: 7, Leader: []byte("x")}, // a heartbeat
		&raft.RequestVoteRequest{RPCHeader: fullHeader("n2"), Term: 9, Candidate: []byte("127.0.0.1:7001"),
			LastLogIndex: 99, LastLogTerm: 8, LeadershipTransfer: true},
		&raft.RequestPreVoteRequest{RPCHeader: fullHeader("n2"), Term: 10, LastLogIndex: 99, LastLogTerm: 8},
		&raft.InstallSnapshotRequest{RPCHeader: fullHeader("n1"), SnapshotVersion: raft.SnapshotVersionMax,
			Term: 7, Leader: []byte("l"), LastLogIndex: 500, LastLogTerm: 6, Peers: []byte("peers"),
			Configuration: []byte("configuration"), ConfigurationIndex: 3, Size: 1 << 33},
		&raft.TimeoutNowRequest{RPCHeader: fullHeader("n1")},
	}
}

// binResponses is every response type with every field set.
func binResponses() []interface{} {
	return []interface{}{
		&raft.AppendEntriesResponse{RPCHeader: fullHeader("n3"), Term: 7, LastLog: 1 << 41, Success: true, NoRetryBackoff: true},
		&raft.RequestVoteResponse{RPCHeader: fullHeader("n3"), Term: 9, Peers: []byte("p"), Granted: true},
		&raft.RequestPreVoteResponse{RPCHeader: fullHeader("n3"), Term: 10, Granted: true},
		&raft.InstallSnapshotResponse{RPCHeader: fullHeader("n3"), Term: 7, Success: true},
		&raft.TimeoutNowResponse{RPCHeader: fullHeader("n3")},
	}
}

// Every request and response decodes to what was encoded, every field and
// every log field (AppendedAt included) as it was.
func TestBinaryRPCRoundTrip(t *testing.T) {
	for _, req := range binRequests() {
		var e binEnc
		typ, err := encodeRequest(&e, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeRequest(typ, e.b)
		if err != nil {
			t.Fatalf("%T: %v", req, err)
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("%T round trip:\n got %+v\nwant %+v", req, got, req)
		}
	}
	types := []byte{binAppendEntries, binRequestVote, binRequestPreVote, binInstallSnapshot, binTimeoutNow}
	for i, resp := range binResponses() {
		for _, rpcErr := range []error{nil, errors.New("unknown peer")} {
			var e binEnc
			if err := encodeResponse(&e, types[i], rpcErr, resp); err != nil {
				t.Fatal(err)
			}
			got := reflect.New(reflect.TypeOf(resp).Elem()).Interface()
			gotErr, err := decodeResponse(e.b, got)
			if err != nil {
				t.Fatalf("%T: %v", resp, err)
			}
			if !reflect.DeepEqual(got, resp) {
				t.Errorf("%T round trip:\n got %+v\nwant %+v", resp, got, resp)
			}
			if (gotErr == nil) != (rpcErr == nil) || gotErr != nil && gotErr.Error() != rpcErr.Error() {
				t.Errorf("%T: error %v, want %v", resp, gotErr, rpcErr)
			}
		}
		// A handler's nil response is the zero response.
		var e binEnc
		if err := encodeResponse(&e, types[i], errors.New("shutdown"), nil); err != nil {
			t.Fatal(err)
		}
		zero := reflect.New(reflect.TypeOf(resp).Elem()).Interface()
		if _, err := decodeResponse(e.b, zero); err != nil {
			t.Fatalf("%T zero: %v", resp, err)
		}
	}
}

// Every frame cut short, and every frame with a byte too many, is refused
// with an error (never decoded into a request with fields missing).
func TestBinaryRPCRejectsTruncatedAndTrailing(t *testing.T) {
	for _, req := range binRequests() {
		var e binEnc
		typ, _ := encodeRequest(&e, req)
		for n := 0; n < len(e.b); n++ {
			if _, err := decodeRequest(typ, e.b[:n]); !errors.Is(err, errBinFrame) {
				t.Fatalf("%T cut to %d of %d bytes: err %v", req, n, len(e.b), err)
			}
		}
		if _, err := decodeRequest(typ, append(e.b, 0)); !errors.Is(err, errBinFrame) {
			t.Fatalf("%T with a trailing byte: err %v", req, err)
		}
	}
	var e binEnc
	encodeResponse(&e, binAppendEntries, nil, binResponses()[0])
	for n := 0; n < len(e.b); n++ {
		if _, err := decodeResponse(e.b[:n], &raft.AppendEntriesResponse{}); !errors.Is(err, errBinFrame) {
			t.Fatalf("response cut to %d bytes: err %v", n, err)
		}
	}
	// Frames on a stream: a length claimed but not sent.
	var buf bytes.Buffer
	writeFrame(&buf, -1, e.b)
	for n := 1; n < buf.Len(); n++ {
		if _, err := readFramePayload(bufio.NewReader(bytes.NewReader(buf.Bytes()[:n]))); err == nil {
			t.Fatalf("frame cut to %d bytes read", n)
		}
	}
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2} // 4 GiB claimed
	if _, err := readFramePayload(bufio.NewReader(bytes.NewReader(huge))); !errors.Is(err, errBinFrame) {
		t.Fatalf("4 GiB frame: %v", err)
	}
	big := []byte{0x80, 0x80, 0x80, 0x02, 1, 2} // 4 MiB claimed, 2 bytes sent
	if _, err := readFramePayload(bufio.NewReader(bytes.NewReader(big))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short 4 MiB frame: %v", err)
	}
}

// FuzzBinaryRPC: any bytes either fail to decode or decode to a request
// that encodes back to the same bytes (so no two frames mean one request,
// and nothing is silently dropped or invented).
func FuzzBinaryRPC(f *testing.F) {
	for _, req := range binRequests() {
		var e binEnc
		typ, _ := encodeRequest(&e, req)
		f.Add(append([]byte{typ}, e.b...))
	}
	f.Add([]byte{binAppendEntries, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{binInstallSnapshot})
	f.Add([]byte{9, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		req, err := decodeRequest(b[0], b[1:])
		if err != nil {
			if !errors.Is(err, errBinFrame) {
				t.Fatalf("error %v is not a frame error", err)
			}
			return
		}
		var e binEnc
		typ, err := encodeRequest(&e, req)
		if err != nil {
			t.Fatal(err)
		}
		if typ != b[0] || !bytes.Equal(e.b, b[1:]) {
			t.Fatalf("%x decodes to %+v, which encodes to %x %x", b, req, typ, e.b)
		}
		// The same bytes as a stream frame.
		var buf bytes.Buffer
		writeFrame(&buf, -1, b[1:])
		p, err := readFramePayload(bufio.NewReader(&buf))
		if err != nil || !bytes.Equal(p, b[1:]) {
			t.Fatalf("frame: %v", err)
		}
		// And as a response of each kind: refused or re-encodes equal.
		for _, resp := range binResponses() {
			got := reflect.New(reflect.TypeOf(resp).Elem()).Interface()
			if _, err := decodeResponse(b, got); err != nil && !errors.Is(err, errBinFrame) && !strings.Contains(err.Error(), "cannot") {
				t.Fatalf("response error %v", err)
			}
		}
	})
}
