package wire

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
)

// Chunks hold what was written, in order, across chunk boundaries.
func TestChunksHoldWhatWasWritten(t *testing.T) {
	var c Chunks
	var want []byte
	for i, n := range []int{0, 1, ChunkSize - 1, 1, 5, 3 * ChunkSize, 7} {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		if k, err := c.Write(p); k != n || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		want = append(want, p...)
	}
	if c.Len() != len(want) {
		t.Fatalf("Len %d, want %d", c.Len(), len(want))
	}
	var got bytes.Buffer
	if n, err := c.WriteTo(&got); n != int64(len(want)) || err != nil || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("WriteTo wrote %d bytes (%v), equal %v", n, err, bytes.Equal(got.Bytes(), want))
	}
	if c.Len() != 0 || len(c.b) != 0 {
		t.Fatal("WriteTo left chunks behind")
	}
}

// A long answer goes to the peer as one frame, its chunks after the small
// frames queued before it and before those queued after it, and costs no
// buffer of its length: the chunks come back to the pool once written.
func TestLongAnswerIsWrittenFromItsChunks(t *testing.T) {
	const size, runs = 1 << 20, 8
	server, client := net.Pipe()
	defer client.Close()
	c := NewConn(server, bufio.NewReader(server))
	defer c.Fail(io.EOF)

	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	h := http.Header{"X-Spine-Index": {"9"}}
	long := AppendResponse(nil, http.StatusOK, h, body)
	wantLong, wantLen := sha256.Sum256(long), uint32(len(long))

	// The reader checks each frame without holding it.
	type frame struct {
		id  uint64
		sum [32]byte
		n   uint32
	}
	frames := make(chan frame, 3*runs)
	go func() {
		br := bufio.NewReader(client)
		buf := make([]byte, 32<<10)
		for {
			var hdr [frameHeader]byte
			if _, err := io.ReadFull(br, hdr[:]); err != nil {
				close(frames)
				return
			}
			n := binary.BigEndian.Uint32(hdr[:4]) - 9
			d := sha256.New()
			if _, err := io.CopyBuffer(d, io.LimitReader(br, int64(n)), buf); err != nil {
				close(frames)
				return
			}
			f := frame{id: binary.BigEndian.Uint64(hdr[5:]), n: n}
			copy(f.sum[:], d.Sum(nil))
			frames <- f
		}
	}()
	answer := func(id uint64) {
		rec := newRecorder()
		rec.Header()["X-Spine-Index"] = h["X-Spine-Index"]
		_, _ = rec.Write(body[:1000])
		_, _ = rec.Write(body[1000:])
		_, _ = c.Send(FrameResponse, id*3, []byte("before"))
		rec.send(c, id*3+1)
		_, _ = c.Send(FrameResponse, id*3+2, []byte("after"))
	}
	check := func() {
		for k := 0; k < 3; k++ {
			f, ok := <-frames
			if !ok {
				t.Fatal("connection closed")
			}
			if f.id%3 == 1 && (f.sum != wantLong || f.n != wantLen) {
				t.Fatalf("frame %d: the long answer arrived changed (%d bytes)", f.id, f.n)
			}
			if uint64(k) != f.id%3 {
				t.Fatalf("frame %d arrived as the %d. of its three", f.id, k+1)
			}
		}
	}
	answer(0) // warms the pool
	check()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 1; i <= runs; i++ {
		answer(uint64(i))
		check()
	}
	runtime.ReadMemStats(&after)
	// Under the race detector the pool drops a quarter of what it is
	// given; without it, nothing of the body's size is allocated at all.
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > size/2 {
		t.Errorf("%d bytes allocated per answer of %d bytes", per, size)
	}
}
