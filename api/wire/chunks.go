package wire

import (
	"io"
	"sync"
)

// Chunks holds a long answer body in pooled chunks of ChunkSize bytes
// instead of one buffer grown to its length. A page of 1,000 finished
// jobs is over a megabyte: held in one buffer, it was allocated (and
// copied) at each step from handler to socket, and such an allocation
// takes fresh pages of its own (the collector moves nothing, so the free
// space between live objects does not fit it). A node serving a few of
// them at once grew by tens of megabytes. In chunks, the same body costs
// no allocation once the pool is warm, and a connection writes the chunks
// themselves (Conn.sendChunked). The zero value is empty and ready.
type Chunks struct {
	b [][]byte // full chunks, then the one being filled
	n int
}

// ChunkSize is the size of a chunk.
const ChunkSize = 32 << 10

var chunkPool = sync.Pool{New: func() any { return new([ChunkSize]byte) }}

// Write appends p.
func (c *Chunks) Write(p []byte) (int, error) {
	c.n += len(p)
	n := len(p)
	for len(p) > 0 {
		if k := len(c.b); k == 0 || len(c.b[k-1]) == ChunkSize {
			c.b = append(c.b, chunkPool.Get().(*[ChunkSize]byte)[:0])
		}
		last := &c.b[len(c.b)-1]
		m := copy((*last)[len(*last):ChunkSize], p)
		*last, p = (*last)[:len(*last)+m], p[m:]
	}
	return n, nil
}

// Len is the bytes written.
func (c *Chunks) Len() int { return c.n }

// WriteTo writes the bytes to w, chunk by chunk, and frees the chunks.
func (c *Chunks) WriteTo(w io.Writer) (int64, error) {
	var sum int64
	var err error
	for _, b := range c.b {
		if err == nil {
			var n int
			n, err = w.Write(b)
			sum += int64(n)
		}
	}
	c.Free()
	return sum, err
}

// Free returns the chunks to the pool and empties c.
func (c *Chunks) Free() {
	freeChunks(c.b)
	clear(c.b)
	c.b, c.n = c.b[:0], 0
}

// take hands the chunks over (to a connection, which frees them once
// written) and empties c.
func (c *Chunks) take() [][]byte {
	b := c.b
	c.b, c.n = nil, 0
	return b
}

// freeChunks returns chunks to the pool.
func freeChunks(bs [][]byte) {
	for _, b := range bs {
		freeChunk(b)
	}
}

// freeChunk returns one chunk to the pool.
func freeChunk(b []byte) { chunkPool.Put((*[ChunkSize]byte)(b[:ChunkSize])) }
