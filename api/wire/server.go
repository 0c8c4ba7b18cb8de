package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Accept completes the server side of an upgrade to protocol: it takes over
// w's connection and answers 101. The caller has checked the credentials.
func Accept(w http.ResponseWriter, r *http.Request, protocol string) (*Conn, error) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), protocol) {
		return nil, fmt.Errorf("wire: needs Upgrade: %s", protocol)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+protocol+"\r\n\r\n"); err != nil {
		conn.Close()
		return nil, err
	}
	return NewConn(conn, brw.Reader), nil
}

// Server serves the requests that arrive on connections.
type Server struct {
	Handler http.Handler
	// MaxFrame bounds a request frame (default MaxRequestFrame).
	MaxFrame uint32
	// MaxInFlight bounds the requests of one connection being served at
	// once; past it the connection is not read until one ends (0: no bound).
	MaxInFlight int
	// Prepare, if set, adjusts each request before it is served.
	Prepare func(*http.Request)
	// MaxBacklog bounds the answers queued for a connection but not yet
	// written (default 4 MiB): past it the connection's requests are not
	// read until its client reads, as an HTTP/1.1 server does not read the
	// next request of a client that does not read its answer.
	MaxBacklog uint64

	// work hands a request to an idle pooled goroutine (see spawn).
	workOnce sync.Once
	work     chan func()

	mu       sync.Mutex
	conns    map[*Conn]context.CancelFunc // served now, and how to cancel their requests
	draining bool                         // Shutdown began: read no more requests
	closed   bool                         // Close ran: serve nothing
	idle     chan struct{}                // closed when draining and conns is empty
}

// Conns counts the connections being served.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *Server) track(c *Conn, cancel context.CancelFunc) (ok, draining bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, false
	}
	if s.conns == nil {
		s.conns = map[*Conn]context.CancelFunc{}
	}
	s.conns[c] = cancel
	return true, s.draining
}

func (s *Server) untrack(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.draining && len(s.conns) == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

func (s *Server) isDraining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.draining
}

// Serve reads requests from c and answers each on its own goroutine until
// the connection fails, or until Shutdown drained it; it returns why.
func (s *Server) Serve(c *Conn) error {
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	ok, draining := s.track(c, cancelAll)
	if !ok {
		c.Fail(errors.New("wire: server closed"))
		return errors.New("wire: server closed")
	}
	defer s.untrack(c)
	if draining {
		c.setReadDeadline(time.Now())
	}
	max := s.MaxFrame
	if max == 0 {
		max = MaxRequestFrame
	}
	backlog := s.MaxBacklog
	if backlog == 0 {
		backlog = 4 << 20
	}
	var slots chan struct{}
	if s.MaxInFlight > 0 {
		slots = make(chan struct{}, s.MaxInFlight)
	}
	var mu sync.Mutex
	cancels := map[uint64]context.CancelFunc{}
	var inFlight sync.WaitGroup
	var last uint64 // the last request read
	remote := c.RemoteAddr().String()
	for {
		c.waitBacklog(backlog)
		kind, id, payload, err := ReadFrame(c.br, max)
		if err != nil {
			if !s.isDraining() || !c.Alive() {
				c.Fail(err)
				return err
			}
			// Shutdown interrupted the read: tell the client which requests
			// were read (a frame cut short by the interruption was not), answer
			// those, then close.
			_, _ = c.Send(FrameGoAway, last, nil)
			inFlight.Wait()
			c.closeWhenFlushed()
			return nil
		}
		switch kind {
		case FrameCancel:
			mu.Lock()
			if cancel := cancels[id]; cancel != nil {
				cancel()
			}
			mu.Unlock()
		case FrameRequest:
			rctx, cancel := context.WithCancel(ctx)
			req, err := DecodeRequestContext(rctx, payload)
			if err != nil {
				cancel()
				c.Fail(err)
				return fmt.Errorf("wire: bad request frame: %w", err)
			}
			last = id
			if slots != nil {
				slots <- struct{}{}
			}
			mu.Lock()
			cancels[id] = cancel
			mu.Unlock()
			req.RemoteAddr = remote
			if s.Prepare != nil {
				s.Prepare(req)
			}
			inFlight.Add(1)
			s.spawn(func() {
				defer inFlight.Done()
				rec := newRecorder()
				s.Handler.ServeHTTP(rec, req)
				mu.Lock()
				delete(cancels, id)
				mu.Unlock()
				cancel()
				rec.send(c, id)
				if slots != nil {
					<-slots
				}
			})
		default:
			err := fmt.Errorf("wire: unexpected frame kind %d", kind)
			c.Fail(err)
			return err
		}
	}
}

// workerIdle is how long a pooled goroutine waits for another request
// before it exits.
const workerIdle = 10 * time.Second

// spawn runs f on an idle pooled goroutine, or on a new one if none is
// idle. A goroutine per request started with a small stack and grew it,
// copying, in nearly every request (JSON decoding recurses): that was 7% of
// a leader's CPU. Pooled goroutines keep their grown stacks, as net/http's
// per-connection goroutines do.
func (s *Server) spawn(f func()) {
	s.workOnce.Do(func() { s.work = make(chan func()) })
	select {
	case s.work <- f:
	default:
		go s.worker(f)
	}
}

func (s *Server) worker(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-s.work:
		case <-idle.C:
			return
		}
	}
}

// Shutdown stops reading requests on every connection, tells each client
// which of its requests were read (go-away), answers those and closes. When
// ctx ends first, the requests still running are cancelled and their
// connections closed (their callers learn the outcome is unknown).
// Connections served after Shutdown began are drained at once.
func (s *Server) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.draining = true
	idle := make(chan struct{})
	if len(s.conns) == 0 {
		close(idle)
	} else {
		s.idle = idle
	}
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.setReadDeadline(time.Now())
	}
	select {
	case <-idle:
	case <-ctx.Done():
		s.Close()
	}
}

// Close closes every connection at once, cancelling the requests they run,
// and refuses later ones.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = nil
	if s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
	for c, cancel := range conns {
		// The connection first, then its requests: a handler that returns
		// because it was cancelled must find no connection to answer on,
		// or its answer (whatever it wrote, or an empty 200) would read as
		// the request's outcome.
		c.Fail(errors.New("wire: server closed"))
		cancel()
	}
}

// recorder is the ResponseWriter of a request served from a frame.
// Recorders are pooled: an answer otherwise cost a growing body buffer, a
// header map and a frame, a fifth of what a leader allocated per relayed
// request.
//
// The body is written straight into the answer's frame, after its status
// and header fields: the header is encoded at the first Write, as a
// net/http server sends it then, and the body's length is put in front of
// the body when the answer is complete. What does not fit in recorderKeep
// goes on in pooled chunks (long), which the connection writes as they
// are: a long answer (a page of 1,000 jobs is over a megabyte) costs no
// buffer of its length.
type recorder struct {
	header http.Header
	status int
	frame  []byte
	bodyAt int    // where the body starts in frame; 0 before the first Write
	long   Chunks // the rest of the body
	passed bool   // frame is the answer (PassAnswer, or encoded)
}

var recorders = sync.Pool{New: func() any { return &recorder{header: http.Header{}} }}

// recorderKeep is the longest frame a recorder builds (the rest of a body
// goes into chunks) and keeps for reuse (a passed answer's may be longer,
// and stays out of the pool).
const recorderKeep = 64 << 10

func newRecorder() *recorder { return recorders.Get().(*recorder) }

// free returns r to the pool; nothing may use it, or what encode returned,
// afterwards.
func (r *recorder) free() {
	r.long.Free()
	if cap(r.frame) > recorderKeep {
		return
	}
	clear(r.header)
	r.status, r.bodyAt = 0, 0
	r.frame = r.frame[:0]
	r.passed = false
	recorders.Put(r)
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.bodyAt == 0 {
		if r.status == 0 {
			r.status = http.StatusOK
		}
		r.frame = AppendHeader(binary.AppendUvarint(r.frame[:0], uint64(r.status)), r.header)
		r.bodyAt = len(r.frame)
	}
	need := len(r.frame) + len(b) + binary.MaxVarintLen64 // with room for the body's length (encode)
	if r.long.Len() > 0 || need > recorderKeep {
		return r.long.Write(b)
	}
	if need > cap(r.frame) {
		// Double, as a bytes.Buffer does, up to what a recorder keeps.
		f := make([]byte, len(r.frame), min(max(need, 2*cap(r.frame)), recorderKeep))
		copy(f, r.frame)
		r.frame = f
	}
	r.frame = append(r.frame, b...)
	return len(b), nil
}

// send sends the answer as the frame of request id and frees r.
func (r *recorder) send(c *Conn, id uint64) {
	p := r.encode()
	if r.long.Len() == 0 {
		_, _ = c.Send(FrameResponse, id, p) // copies p
	} else {
		_, _ = c.sendChunked(FrameResponse, id, p, r.long.take())
	}
	r.free()
}

// encode returns the start of the answer's frame payload, valid until
// free: all of it, unless the body goes on in long.
func (r *recorder) encode() []byte {
	if r.passed {
		return r.frame
	}
	if r.bodyAt == 0 {
		if r.status == 0 {
			r.status = http.StatusOK
		}
		r.frame = AppendResponse(r.frame[:0], r.status, r.header, nil)
		return r.frame
	}
	// AppendField's layout, the body's length in front of it: move the
	// body's start up by the length's size, in place (the rest of it, in
	// long, follows the frame).
	end := len(r.frame)
	var n [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(n[:], uint64(end-r.bodyAt+r.long.Len()))
	r.frame = append(r.frame, n[:k]...)
	copy(r.frame[r.bodyAt+k:], r.frame[r.bodyAt:end])
	copy(r.frame[r.bodyAt:], n[:k])
	r.passed = true // frame is the answer now
	return r.frame
}
