package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// The relay carries requests a follower forwards to the leader over one
// long-lived connection per leader instead of one HTTP exchange each.
//
// A follower opens it with an HTTP Upgrade on the leader's own port (no
// extra listener), authenticated by a key both nodes derive from their token
// configuration. Then both sides exchange length-prefixed frames: a request
// (the caller's method, URI, headers and body), its answer (status, headers,
// body), or the cancellation of a request whose caller went away. Frames of
// many concurrent requests share each write and each read, which is the
// point: on a loaded cluster a forwarded request costs a fraction of a
// syscall on each side instead of a full HTTP round trip.
//
// Nothing about a request changes on the way: the leader runs it through the
// same router, authenticates the caller's own token and answers exactly what
// it would answer over HTTP, so forwarding semantics (never twice, no_leader
// retried, outcome_unknown when an answer is lost) are those of forward.go.
// A leader that does not speak the relay (an older version during a rolling
// upgrade) gets plain HTTP forwarding, as do large bodies (blobs).
const (
	relayPath     = "/internal/relay"
	relayProtocol = "spine-relay/1"
	// relayMaxBody is the largest request body sent over the relay; larger
	// ones (blob uploads) use a plain HTTP forward.
	relayMaxBody = 1 << 20
	// relayMaxFrame bounds a frame a peer may send (a blob download answer
	// is at most MaxBlobBytes plus framing).
	relayMaxFrame = 64 << 20
	// relayRetryUnsupported is how long a leader that refused the upgrade
	// is served by plain HTTP before the relay is tried again.
	relayRetryUnsupported = time.Minute

	frameRequest  byte = 1
	frameCancel   byte = 2
	frameResponse byte = 3
	frameHeader        = 4 + 1 + 8 // length, kind, request id
)

var (
	// errRelayNotSent: the request never left this node (no connection, or
	// the connection broke before its frame was written whole): sending it
	// again cannot apply it twice.
	errRelayNotSent = errors.New("relay: request not sent")
	// errRelayLost: the request was sent but its answer will not come.
	errRelayLost = errors.New("relay: connection lost before the answer")
	// errRelayUnsupported: use plain HTTP forwarding for this leader.
	errRelayUnsupported = errors.New("relay: not available for this leader")
)

// relayKey is the bearer credential of a relay upgrade: a digest of the
// node's whole token configuration, so only a node configured with the same
// tokens can open one (and no token travels in it).
func relayKey(t *Tokens) string {
	sums := make([]string, 0, len(t.entries))
	for _, e := range t.entries {
		sums = append(sums, e.role+":"+hex.EncodeToString(e.sum[:]))
	}
	sort.Strings(sums)
	h := sha256.New()
	io.WriteString(h, "spine relay key v1\n")
	for _, s := range sums {
		io.WriteString(h, s+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ---- framing ----

func appendFrame(b []byte, kind byte, id uint64, payload []byte) []byte {
	var hdr [frameHeader]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(1+8+len(payload)))
	hdr[4] = kind
	binary.BigEndian.PutUint64(hdr[5:], id)
	return append(append(b, hdr[:]...), payload...)
}

func readFrame(r *bufio.Reader) (kind byte, id uint64, payload []byte, err error) {
	var hdr [frameHeader]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < 9 || n-9 > relayMaxFrame {
		return 0, 0, nil, fmt.Errorf("relay: bad frame length %d", n)
	}
	payload = make([]byte, n-9)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return hdr[4], binary.BigEndian.Uint64(hdr[5:]), payload, nil
}

func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

func appendHeader(b []byte, h http.Header) []byte {
	n := 0
	for k, vs := range h {
		if !hopHeaders[k] {
			n += len(vs)
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		if hopHeaders[k] {
			continue
		}
		for _, v := range vs {
			b = appendField(appendField(b, []byte(k)), []byte(v))
		}
	}
	return b
}

// fields reads what appendField and friends wrote.
type fields struct {
	b   []byte
	err error
}

func (f *fields) uvarint() uint64 {
	if f.err != nil {
		return 0
	}
	v, n := binary.Uvarint(f.b)
	if n <= 0 {
		f.err = errors.New("relay: malformed frame")
		return 0
	}
	f.b = f.b[n:]
	return v
}

func (f *fields) bytes() []byte {
	n := f.uvarint()
	if f.err != nil {
		return nil
	}
	if n > uint64(len(f.b)) {
		f.err = errors.New("relay: malformed frame")
		return nil
	}
	v := f.b[:n:n]
	f.b = f.b[n:]
	return v
}

func (f *fields) header() http.Header {
	n := f.uvarint()
	if n > uint64(len(f.b)) {
		f.err = errors.New("relay: malformed frame")
	}
	if f.err != nil {
		return nil
	}
	h := make(http.Header, n)
	for i := uint64(0); i < n && f.err == nil; i++ {
		k := string(f.bytes())
		h[k] = append(h[k], string(f.bytes()))
	}
	return h
}

// ---- one connection, either side ----

// relayConn writes frames from many goroutines with as few syscalls as
// possible: senders append to a buffer, one writer goroutine swaps it out and
// writes it whole, so frames queued during a write go out together in the
// next one.
type relayConn struct {
	conn net.Conn
	br   *bufio.Reader

	mu       sync.Mutex
	buf      []byte
	queued   uint64 // bytes ever appended to buf
	written  uint64 // bytes ever written to conn
	err      error  // set once the connection failed
	kick     chan struct{}
	closedCh chan struct{}
}

func newRelayConn(conn net.Conn, br *bufio.Reader) *relayConn {
	c := &relayConn{conn: conn, br: br, kick: make(chan struct{}, 1), closedCh: make(chan struct{})}
	go c.writeLoop()
	return c
}

// send queues a frame and returns the stream offset at which it ends: it was
// delivered whole to the kernel iff written reaches that offset.
func (c *relayConn) send(kind byte, id uint64, payload []byte) (end uint64, err error) {
	c.mu.Lock()
	if c.err != nil {
		err = c.err
		c.mu.Unlock()
		return 0, err
	}
	before := len(c.buf)
	c.buf = appendFrame(c.buf, kind, id, payload)
	c.queued += uint64(len(c.buf) - before)
	end = c.queued
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	return end, nil
}

func (c *relayConn) writeLoop() {
	var spare []byte
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
		if len(b) == 0 {
			c.mu.Unlock()
			continue
		}
		c.buf, spare = spare[:0], nil
		c.mu.Unlock()
		n, err := c.conn.Write(b)
		c.mu.Lock()
		c.written += uint64(n)
		c.mu.Unlock()
		if err != nil {
			c.fail(err)
			return
		}
		if cap(b) <= 1<<20 {
			spare = b
		}
	}
}

// fail closes the connection once; it reports whether this call did.
func (c *relayConn) fail(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return false
	}
	c.err = err
	close(c.closedCh)
	c.conn.Close()
	return true
}

// alive reports whether the connection has not failed.
func (c *relayConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

// delivered reports whether the stream up to end reached the kernel.
func (c *relayConn) delivered(end uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written >= end
}

// ---- leader side ----

// handleRelay upgrades a follower's connection and serves relayed requests
// on it until either side closes it.
func (s *Server) handleRelay(w http.ResponseWriter, r *http.Request) {
	s.setLeaderHeaders(w)
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.relayKey)) != 1 {
		s.writeError(w, errorf(http.StatusUnauthorized, codeUnauthorized, "relay key does not match this node's token configuration"))
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), relayProtocol) {
		s.writeError(w, badRequest("relay needs Upgrade: %s", relayProtocol))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.writeError(w, err)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+relayProtocol+"\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	rc := newRelayConn(conn, brw.Reader)
	if !s.trackRelay(rc, true) {
		rc.fail(errors.New("server closing"))
		return
	}
	go s.serveRelay(rc)
}

func (s *Server) serveRelay(rc *relayConn) {
	defer s.trackRelay(rc, false)
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	var mu sync.Mutex
	cancels := map[uint64]context.CancelFunc{}
	remote := rc.conn.RemoteAddr().String()
	for {
		kind, id, payload, err := readFrame(rc.br)
		if err != nil {
			rc.fail(err)
			return
		}
		switch kind {
		case frameCancel:
			mu.Lock()
			if cancel := cancels[id]; cancel != nil {
				cancel()
			}
			mu.Unlock()
		case frameRequest:
			req, err := decodeRelayRequest(payload)
			if err != nil {
				s.logger.Warn("relay: dropping a peer that sent a bad frame", "peer", remote, "error", err)
				rc.fail(err)
				return
			}
			rctx, cancel := context.WithCancel(ctx)
			mu.Lock()
			cancels[id] = cancel
			mu.Unlock()
			req = req.WithContext(rctx)
			req.RemoteAddr = remote
			go func() {
				rec := newRelayRecorder()
				s.router.ServeHTTP(rec, req)
				mu.Lock()
				delete(cancels, id)
				mu.Unlock()
				cancel()
				_, _ = rc.send(frameResponse, id, rec.encode())
				rec.free() // send copied the frame
			}()
		default:
			rc.fail(fmt.Errorf("relay: unexpected frame kind %d", kind))
			return
		}
	}
}

func decodeRelayRequest(p []byte) (*http.Request, error) {
	f := &fields{b: p}
	method := string(f.bytes())
	uri := string(f.bytes())
	h := f.header()
	body := f.bytes()
	if f.err != nil {
		return nil, f.err
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, err
	}
	req := &http.Request{
		Method: method, URL: u, RequestURI: uri, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Host: u.Host,
	}
	return req, nil
}

// relayRecorder is the ResponseWriter of a relayed request. Recorders are
// pooled: a relayed answer otherwise cost a growing body buffer, a header
// map and a frame, a fifth of what the leader allocated per request.
type relayRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	frame  []byte
}

var relayRecorders = sync.Pool{New: func() any { return &relayRecorder{header: http.Header{}} }}

// relayRecorderKeep is the largest body or frame buffer a recorder keeps
// for reuse (a blob download's stays out of the pool).
const relayRecorderKeep = 64 << 10

func newRelayRecorder() *relayRecorder { return relayRecorders.Get().(*relayRecorder) }

// free returns r to the pool; nothing may use it, or what encode returned,
// afterwards.
func (r *relayRecorder) free() {
	if r.body.Cap() > relayRecorderKeep || cap(r.frame) > relayRecorderKeep {
		return
	}
	clear(r.header)
	r.status = 0
	r.body.Reset()
	r.frame = r.frame[:0]
	relayRecorders.Put(r)
}

func (r *relayRecorder) Header() http.Header { return r.header }

func (r *relayRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *relayRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

// encode returns the answer's frame payload, valid until free.
func (r *relayRecorder) encode() []byte {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	b := binary.AppendUvarint(r.frame[:0], uint64(r.status))
	b = appendHeader(b, r.header)
	r.frame = appendField(b, r.body.Bytes())
	return r.frame
}

// trackRelay adds or removes a served connection; adding fails once Close
// has run.
func (s *Server) trackRelay(rc *relayConn, add bool) bool {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if !add {
		delete(s.relayServed, rc)
		return true
	}
	if s.relayClosed {
		return false
	}
	if s.relayServed == nil {
		s.relayServed = map[*relayConn]bool{}
	}
	s.relayServed[rc] = true
	return true
}

// ---- follower side ----

// relayPool holds this node's relay connection to the leader.
type relayPool struct {
	self string // this node's id, sent as X-Spine-Forwarded
	key  string

	mu          sync.Mutex
	closed      bool
	clients     map[string]*relayClient // by leader base URL
	dialing     map[string]*relayDial   // by leader base URL
	unsupported map[string]time.Time    // leader URL -> when to try again
}

type relayClient struct {
	*relayConn
	pendingMu sync.Mutex // guards nextID and pending (relayConn.mu guards the write side)
	nextID    uint64
	pending   map[uint64]chan relayAnswer
}

type relayAnswer struct {
	resp *http.Response
	err  error
}

// client returns a live relay to addr, dialing one if needed. The dial runs
// outside the pool's lock and at most one per address is in flight: callers
// that arrive meanwhile share its outcome, so a leader that times out costs
// them one dial's wait, not one each in turn.
func (p *relayPool) client(ctx context.Context, addr string) (*relayClient, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errRelayUnsupported
	}
	if c := p.clients[addr]; c != nil {
		if c.alive() {
			p.mu.Unlock()
			return c, nil
		}
		delete(p.clients, addr)
	}
	if until, ok := p.unsupported[addr]; ok && time.Now().Before(until) {
		p.mu.Unlock()
		return nil, errRelayUnsupported
	}
	d := p.dialing[addr]
	if d == nil {
		d = &relayDial{done: make(chan struct{})}
		if p.dialing == nil {
			p.dialing = map[string]*relayDial{}
		}
		p.dialing[addr] = d
		// Not the caller's context: the dial serves every caller waiting on
		// it, and dialRelay bounds it in time.
		go p.dial(context.WithoutCancel(ctx), addr, d)
	}
	p.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", errRelayNotSent, ctx.Err())
	}
}

// relayDial is one dial in flight; done is closed when c and err are set.
type relayDial struct {
	done chan struct{}
	c    *relayClient
	err  error
}

func (p *relayPool) dial(ctx context.Context, addr string, d *relayDial) {
	defer close(d.done)
	c, err := dialRelay(ctx, addr, p.key)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.dialing, addr)
	if errors.Is(err, errRelayUnsupported) {
		if p.unsupported == nil {
			p.unsupported = map[string]time.Time{}
		}
		p.unsupported[addr] = time.Now().Add(relayRetryUnsupported)
	}
	if err != nil {
		d.err = err
		return
	}
	if p.closed {
		c.fail(errors.New("closing"))
		d.err = errRelayUnsupported
		return
	}
	if p.clients == nil {
		p.clients = map[string]*relayClient{}
	}
	// One leader at a time: drop relays to former leaders.
	for a, old := range p.clients {
		old.fail(errors.New("leader changed"))
		delete(p.clients, a)
	}
	p.clients[addr] = c
	d.c = c
}

func dialRelay(ctx context.Context, addr, key string) (*relayClient, error) {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, errRelayUnsupported // TLS or odd addresses: plain HTTP
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&net.Dialer{KeepAlive: 15 * time.Second}).DialContext(dctx, "tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRelayNotSent, err)
	}
	// Past the dial, any failure of the upgrade means "no relay here" (an
	// older leader, another token configuration, a proxy): plain HTTP
	// forwarding takes over for a while. The upgrade carries no request, so
	// nothing was applied either way.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	req := "GET " + relayPath + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + key +
		"\r\nConnection: Upgrade\r\nUpgrade: " + relayProtocol + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", errRelayUnsupported, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", errRelayUnsupported, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		conn.Close()
		return nil, fmt.Errorf("%w: upgrade answered %s", errRelayUnsupported, resp.Status)
	}
	_ = conn.SetDeadline(time.Time{})
	c := &relayClient{relayConn: newRelayConn(conn, br), pending: map[uint64]chan relayAnswer{}}
	go c.readLoop()
	return c, nil
}

func (c *relayClient) readLoop() {
	for {
		kind, id, payload, err := readFrame(c.br)
		if err == nil && kind != frameResponse {
			err = fmt.Errorf("relay: unexpected frame kind %d", kind)
		}
		if err != nil {
			c.fail(err)
			c.pendingMu.Lock()
			for id, ch := range c.pending {
				ch <- relayAnswer{err: errRelayLost}
				delete(c.pending, id)
			}
			c.pendingMu.Unlock()
			return
		}
		f := &fields{b: payload}
		status := f.uvarint()
		h := f.header()
		body := f.bytes()
		ans := relayAnswer{err: f.err}
		if f.err == nil {
			ans.resp = &http.Response{StatusCode: int(status), Status: fmt.Sprintf("%d %s", status, http.StatusText(int(status))),
				Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		}
		c.pendingMu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.pendingMu.Unlock()
		if ch != nil {
			ch <- ans
		}
	}
}

// do relays r (with body) and waits for the leader's answer.
func (c *relayClient) do(ctx context.Context, r *http.Request, body []byte, self string) (*http.Response, error) {
	h := r.Header.Clone()
	h.Set(forwardedHeader, self)
	p := appendField(nil, []byte(r.Method))
	p = appendField(p, []byte(r.URL.RequestURI()))
	p = appendHeader(p, h)
	p = appendField(p, body)

	ch := make(chan relayAnswer, 1)
	c.pendingMu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.pendingMu.Unlock()
	end, err := c.send(frameRequest, id, p)
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("%w: %v", errRelayNotSent, err)
	}
	select {
	case ans := <-ch:
		if errors.Is(ans.err, errRelayLost) && !c.delivered(end) {
			return nil, errRelayNotSent
		}
		return ans.resp, ans.err
	case <-ctx.Done():
		c.forget(id)
		_, _ = c.send(frameCancel, id, nil)
		return nil, ctx.Err()
	}
}

func (c *relayClient) forget(id uint64) {
	c.pendingMu.Lock()
	delete(c.pending, id)
	c.pendingMu.Unlock()
}

func (p *relayPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for a, c := range p.clients {
		c.fail(errors.New("closing"))
		delete(p.clients, a)
	}
}

// relayable reports whether a forwarded request goes over the relay.
func relayable(r *http.Request, body []byte) bool {
	return len(body) <= relayMaxBody && !strings.HasPrefix(r.URL.Path, "/blobs")
}
