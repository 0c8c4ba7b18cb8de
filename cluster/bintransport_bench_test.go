package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// benchAppend is an AppendEntries of n entries of 400 bytes, as raft's
// leader sends them.
func benchAppend(n int) *raft.AppendEntriesRequest {
	req := &raft.AppendEntriesRequest{RPCHeader: fullHeader("n1"), Term: 4, Leader: []byte("127.0.0.1:7000"),
		PrevLogEntry: 1_000_000, PrevLogTerm: 4, LeaderCommitIndex: 999_990}
	now := time.Now()
	for i := 0; i < n; i++ {
		req.Entries = append(req.Entries, &raft.Log{Index: uint64(1_000_001 + i), Term: 4, Type: raft.LogCommand,
			Data: bytes.Repeat([]byte{byte(i)}, 400), AppendedAt: now})
	}
	return req
}

// BenchmarkRaftCodecAppendEntries: one AppendEntries encoded and decoded,
// by NetworkTransport's msgpack codec (configured as it configures it) and
// by the binary one.
//
//	go test -run '^$' -bench RaftCodecAppendEntries -benchmem ./cluster
func BenchmarkRaftCodecAppendEntries(b *testing.B) {
	for _, n := range []int{8, 64} {
		req := benchAppend(n)
		b.Run(fmt.Sprintf("msgpack/%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			enc := codec.NewEncoder(w, &codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}})
			r := bufio.NewReader(&buf)
			dec := codec.NewDecoder(r, &codec.MsgpackHandle{})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := enc.Encode(req); err != nil {
					b.Fatal(err)
				}
				w.Flush()
				var got raft.AppendEntriesRequest
				if err := dec.Decode(&got); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("binary/%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			r := bufio.NewReader(&buf)
			var e binEnc
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				e.b = e.b[:0]
				typ, _ := encodeRequest(&e, req)
				writeFrame(w, int(typ), e.b)
				w.Flush()
				t, _ := r.ReadByte()
				p, err := readFramePayload(r)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := decodeRequest(t, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRaftTransportAppendEntries: pipelined AppendEntries between two
// transports over loopback TCP, msgpack and binary; the allocations and
// CPU are both ends'.
//
//	go test -run '^$' -bench RaftTransportAppendEntries -benchmem ./cluster
func BenchmarkRaftTransportAppendEntries(b *testing.B) {
	for _, n := range []int{8, 64} {
		for _, binary := range []bool{false, true} {
			name := map[bool]string{false: "msgpack", true: "binary"}[binary]
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				a, f := newTestBinTransport(b, binary), newTestBinTransport(b, binary)
				go func() {
					resp := &raft.AppendEntriesResponse{Term: 4, LastLog: 1, Success: true}
					for rpc := range f.Consumer() {
						rpc.Respond(resp, nil)
					}
				}()
				p, err := a.AppendEntriesPipeline("f", f.LocalAddr())
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				req := benchAppend(n)
				done := make(chan error, 1)
				go func() {
					for i := 0; i < b.N; i++ {
						fu := <-p.Consumer()
						if err := fu.Error(); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := p.AppendEntries(req, new(raft.AppendEntriesResponse)); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
