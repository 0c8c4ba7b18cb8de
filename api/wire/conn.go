package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"time"
)

// Conn writes frames from many goroutines with as few syscalls as possible:
// senders append to a buffer, one writer goroutine swaps it out and writes
// it whole, so frames queued during a write go out together in the next one.
// A long answer's chunks are queued as they are, after the buffer so far,
// and written with it in one vectored write (sendChunked).
type Conn struct {
	conn net.Conn
	br   *bufio.Reader

	mu sync.Mutex
	// out is what is queued before buf: segments written as they are, in
	// order (a long answer's chunks, sendChunked, and the buffer before
	// them).
	out     []segment
	buf     []byte
	queued  uint64 // bytes ever queued (out and buf)
	written uint64 // bytes ever written to conn
	// handed counts the bytes ever handed to a write of conn, counted
	// before the write starts: a frame ending at or before it may have
	// reached the peer even while written lags behind.
	handed  uint64
	err     error // set once the connection failed
	refused error // set once no new request may be sent (go-away received)
	// closeFlushed: close the connection once everything queued is written.
	closeFlushed bool
	kick         chan struct{}
	closedCh     chan struct{}
	written1     *sync.Cond // on mu: broadcast when written grows or the connection fails
}

// NewConn starts writing frames to conn; br reads from it (it may hold
// bytes already read past the upgrade).
func NewConn(conn net.Conn, br *bufio.Reader) *Conn {
	c := &Conn{conn: conn, br: br, kick: make(chan struct{}, 1), closedCh: make(chan struct{})}
	c.written1 = sync.NewCond(&c.mu)
	go c.writeLoop()
	return c
}

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// Send queues a frame and returns the stream offset at which it ends: it
// certainly never left this process unless Sent(end).
func (c *Conn) Send(kind byte, id uint64, payload []byte) (end uint64, err error) {
	return c.enqueue(func(b []byte) []byte { return AppendFrame(b, kind, id, payload) })
}

// sendChunked is Send for the payload head followed by chunks, which the
// connection takes over: they are written as they are, not copied into
// its buffer, and go back to the pool once written.
func (c *Conn) sendChunked(kind byte, id uint64, head []byte, chunks [][]byte) (end uint64, err error) {
	n := len(head)
	for _, b := range chunks {
		n += len(b)
	}
	end, err = c.queue(func() int {
		before := len(c.buf)
		c.buf = AppendFrame(c.buf, kind, id, head)
		binary.BigEndian.PutUint32(c.buf[before:before+4], uint32(1+8+n))
		c.out = append(c.out, segment{b: c.buf})
		for _, b := range chunks {
			c.out = append(c.out, segment{b: b, chunk: true})
		}
		c.buf = nil
		return frameHeader + n
	})
	if err != nil {
		freeChunks(chunks)
	}
	return end, err
}

// A segment is a part of what a connection writes; chunk: one of a
// Chunks', freed once written.
type segment struct {
	b     []byte
	chunk bool
}

// sendAppend is Send for a payload appendPayload appends to the
// connection's buffer (under its lock).
func (c *Conn) sendAppend(kind byte, id uint64, appendPayload func([]byte) []byte) (end uint64, err error) {
	return c.enqueue(func(b []byte) []byte {
		before := len(b)
		b = appendPayload(AppendFrame(b, kind, id, nil))
		binary.BigEndian.PutUint32(b[before:before+4], uint32(len(b)-before-4))
		return b
	})
}

// enqueue appends a frame to the connection's buffer with frame (under
// its lock), wakes the writer and returns the stream offset at which the
// frame ends.
func (c *Conn) enqueue(frame func([]byte) []byte) (end uint64, err error) {
	return c.queue(func() int {
		before := len(c.buf)
		c.buf = frame(c.buf)
		return len(c.buf) - before
	})
}

// queue runs add under the connection's lock, unless it failed: add
// queues bytes and says how many. It wakes the writer and returns the
// stream offset at which they end.
func (c *Conn) queue(add func() int) (end uint64, err error) {
	c.mu.Lock()
	if c.err != nil {
		err = c.err
		c.mu.Unlock()
		return 0, err
	}
	c.queued += uint64(add())
	end = c.queued
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return end, nil
}

func (c *Conn) writeLoop() {
	var spare []byte
	var outSpare []segment
	for {
		select {
		case <-c.kick:
		case <-c.closedCh:
			return
		}
		// Yield once before taking the buffer: the goroutines woken by the
		// same event (a leader's apply answers a batch of relayed requests
		// at once) then queue their frames into this write instead of each
		// costing one. Over a lifecycle phase this took the leader from 3.7
		// to 2.9 socket writes per job, and followers' reads with it.
		runtime.Gosched()
		c.mu.Lock()
		b := c.buf
		if len(b) == 0 && len(c.out) == 0 {
			done := c.closeFlushed
			c.mu.Unlock()
			if done {
				c.lingerClose()
				return
			}
			continue
		}
		out := c.out
		c.out, outSpare = outSpare[:0], nil
		c.buf, spare = spare[:0], nil
		size := len(b)
		for _, s := range out {
			size += len(s.b)
		}
		c.handed += uint64(size)
		c.mu.Unlock()
		var n int
		var err error
		if len(out) == 0 {
			n, err = c.conn.Write(b)
		} else {
			n, err = c.writeSegments(out, b)
			for _, s := range out {
				if !s.chunk && cap(s.b) > cap(b) {
					b = s.b // the buffer to reuse (below)
				}
			}
			clear(out)
			outSpare = out
		}
		c.mu.Lock()
		c.written += uint64(n)
		c.written1.Broadcast()
		c.mu.Unlock()
		if err != nil {
			c.Fail(err)
			return
		}
		if cap(b) <= 1<<20 {
			spare = b
		}
		c.mu.Lock()
		done := c.closeFlushed && len(c.buf) == 0 && len(c.out) == 0
		c.mu.Unlock()
		if done {
			c.lingerClose()
			return
		}
	}
}

// writeSegments writes out's segments and then b in one vectored write
// where the connection has one, frees the chunks among them and returns
// the bytes written.
func (c *Conn) writeSegments(out []segment, b []byte) (int, error) {
	bufs := make(net.Buffers, 0, len(out)+1)
	for _, s := range out {
		bufs = append(bufs, s.b)
	}
	if len(b) > 0 {
		bufs = append(bufs, b)
	}
	n, err := bufs.WriteTo(c.conn)
	for _, s := range out {
		if s.chunk {
			freeChunk(s.b)
		}
	}
	return int(n), err
}

// lingerTimeout bounds how long a drained connection waits for its peer to
// close after the last frame.
const lingerTimeout = 2 * time.Second

// lingerClose ends a drained connection without a reset. Closing a socket
// whose receive queue still holds bytes (requests the peer sent after the
// server stopped reading) makes the kernel answer with a reset, and a reset
// discards what the peer had received but not yet read: the go-away and the
// last answers, leaving those requests in doubt. So the write side is shut
// first (the peer reads every frame, then end of stream, and closes), what
// the peer still sends is read and dropped until it does, and only then is
// the socket closed.
func (c *Conn) lingerClose() {
	if cw, ok := c.conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_ = c.conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.Copy(io.Discard, c.conn)
	}
	c.Fail(errFlushed)
}

var errFlushed = errors.New("wire: closed after its last frame")

// closeWhenFlushed closes the connection once every frame queued so far
// (and any queued meanwhile) is written.
func (c *Conn) closeWhenFlushed() {
	c.mu.Lock()
	c.closeFlushed = true
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Fail closes the connection once; it reports whether this call did.
func (c *Conn) Fail(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.err = err
	close(c.closedCh)
	c.conn.Close()
	c.written1.Broadcast()
	return true
}

// waitBacklog blocks while more than max bytes are queued but not yet
// written: the peer is not reading what it is sent. It returns at once
// once the connection failed.
func (c *Conn) waitBacklog(max uint64) {
	c.mu.Lock()
	for c.err == nil && c.queued-c.written > max {
		c.written1.Wait()
	}
	c.mu.Unlock()
}

// Alive reports whether the connection has not failed and takes new
// requests.
func (c *Conn) Alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && c.refused == nil
}

// setReadDeadline interrupts or bounds the reader.
func (c *Conn) setReadDeadline(t time.Time) { _ = c.conn.SetReadDeadline(t) }

// Sent reports whether the frame ending at end was handed to a write of
// the connection, so it may have reached the peer. False means it is still
// in this process's buffer (and never will be written once the connection
// has failed). Whether the write completed does not decide it: the peer
// may act on a frame before this process learns its write returned.
func (c *Conn) Sent(end uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.handed >= end
}
