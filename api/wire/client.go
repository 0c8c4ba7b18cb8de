package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Client is the calling side of one connection.
type Client struct {
	*Conn
	// sendMu makes numbering a request and queueing its frame one step, so
	// ids go out in increasing order (what a go-away's last id relies on).
	sendMu    sync.Mutex
	pendingMu sync.Mutex // guards nextID and pending (Conn.mu guards the write side)
	nextID    uint64
	pending   map[uint64]chan answer
}

type answer struct {
	payload []byte // the answer frame's payload
	err     error
}

// Dial opens a connection to the node at base URL addr with an Upgrade to
// protocol on path, authenticated by the bearer credential key. Errors wrap
// ErrNotSent (no connection) or ErrUnsupported (the upgrade was refused:
// use plain HTTP).
func Dial(ctx context.Context, addr, path, protocol, key string) (*Client, error) {
	return DialTLS(ctx, addr, path, protocol, key, nil)
}

// DialTLS is Dial that also reaches https addresses, with tc (nil: https
// is unsupported, and plain HTTP takes over). A failed TLS handshake is
// ErrNotSent: nothing was sent.
func DialTLS(ctx context.Context, addr, path, protocol, key string, tc *tls.Config) (*Client, error) {
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || !(u.Scheme == "http" || u.Scheme == "https" && tc != nil) {
		return nil, ErrUnsupported // TLS without a configuration, or odd addresses: plain HTTP
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	nd := &net.Dialer{KeepAlive: 15 * time.Second}
	var conn net.Conn
	if u.Scheme == "https" {
		conn, err = (&tls.Dialer{NetDialer: nd, Config: tc}).DialContext(dctx, "tcp", u.Host)
	} else {
		conn, err = nd.DialContext(dctx, "tcp", u.Host)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSent, err)
	}
	// Past the dial, any failure of the upgrade means "not here" (an older
	// node, another token configuration, a proxy): plain HTTP takes over.
	// The upgrade carries no request, so nothing was applied either way.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + key +
		"\r\nConnection: Upgrade\r\nUpgrade: " + protocol + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		resp.Body.Close()
		conn.Close()
		return nil, &upgradeError{status: resp.StatusCode, text: resp.Status}
	}
	_ = conn.SetDeadline(time.Time{})
	c := &Client{Conn: NewConn(conn, br), pending: map[uint64]chan answer{}}
	go c.readLoop()
	return c, nil
}

// upgradeError is an upgrade answered with another status than 101.
type upgradeError struct {
	status int
	text   string
}

func (e *upgradeError) Error() string { return "wire: upgrade answered " + e.text }
func (e *upgradeError) Unwrap() error { return ErrUnsupported }

func (c *Client) readLoop() {
	for {
		kind, id, payload, err := ReadFrame(c.br, MaxFrame)
		if err == nil && kind == FrameGoAway {
			c.goAway(id)
			continue
		}
		if err == nil && kind != FrameResponse {
			err = fmt.Errorf("wire: unexpected frame kind %d", kind)
		}
		if err != nil {
			c.Fail(err)
			c.pendingMu.Lock()
			for id, ch := range c.pending {
				ch <- answer{err: ErrLost}
				delete(c.pending, id)
			}
			c.pendingMu.Unlock()
			return
		}
		c.pendingMu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.pendingMu.Unlock()
		if ch != nil {
			ch <- answer{payload: payload} // decoded by the caller, on its goroutine
		}
	}
}

// goAway takes no new requests and fails those the server never read
// (numbered after last) as not sent; earlier ones still get their answers.
func (c *Client) goAway(last uint64) {
	c.sendMu.Lock()
	c.Conn.mu.Lock()
	if c.Conn.refused == nil {
		c.Conn.refused = errors.New("wire: the server is shutting down")
	}
	c.Conn.mu.Unlock()
	c.sendMu.Unlock()
	c.pendingMu.Lock()
	for id, ch := range c.pending {
		if id > last {
			ch <- answer{err: ErrNotSent}
			delete(c.pending, id)
		}
	}
	c.pendingMu.Unlock()
}

// RoundTrip sends a request frame's payload (AppendRequest) and waits for
// its answer. Errors wrap ErrNotSent when the request certainly did not
// leave this process; ErrLost when it did and its answer will not come.
// When ctx ends first, the server is told to cancel the request.
func (c *Client) RoundTrip(ctx context.Context, payload []byte) (*http.Response, error) {
	p, err := c.roundTrip(ctx, func(b []byte) []byte { return append(b, payload...) })
	if err != nil {
		return nil, err
	}
	return DecodeResponse(p)
}

// RoundTripAnswer is RoundTrip for a request whose payload appendPayload
// appends (straight into the connection's write buffer, under its lock:
// it must be quick and must not fail), and whose answer is returned as
// received.
func (c *Client) RoundTripAnswer(ctx context.Context, appendPayload func([]byte) []byte) (Answer, error) {
	p, err := c.roundTrip(ctx, appendPayload)
	if err != nil {
		return Answer{}, err
	}
	return ParseAnswer(p)
}

func (c *Client) roundTrip(ctx context.Context, appendPayload func([]byte) []byte) ([]byte, error) {
	ch := make(chan answer, 1)
	c.sendMu.Lock()
	c.Conn.mu.Lock()
	refused := c.Conn.refused
	c.Conn.mu.Unlock()
	if refused != nil {
		c.sendMu.Unlock()
		return nil, fmt.Errorf("%w: %v", ErrNotSent, refused)
	}
	c.pendingMu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.pendingMu.Unlock()
	end, err := c.sendAppend(FrameRequest, id, appendPayload)
	c.sendMu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("%w: %v", ErrNotSent, err)
	}
	select {
	case ans := <-ch:
		if errors.Is(ans.err, ErrLost) && !c.Sent(end) {
			return nil, ErrNotSent
		}
		if errors.Is(ans.err, ErrNotSent) {
			return nil, fmt.Errorf("%w: the server shut down before reading it", ErrNotSent)
		}
		return ans.payload, ans.err
	case <-ctx.Done():
		c.forget(id)
		_, _ = c.Send(FrameCancel, id, nil)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id uint64) {
	c.pendingMu.Lock()
	delete(c.pending, id)
	c.pendingMu.Unlock()
}

// Close closes the connection; requests waiting on it fail with ErrLost.
func (c *Client) Close() { c.Fail(errors.New("wire: closed")) }

// Pool holds live connections by address and dials missing ones. A dial runs
// outside the pool's lock and at most one per address is in flight: callers
// that arrive meanwhile share its outcome, so an address that times out costs
// them one dial's wait, not one each in turn. An address that refused the
// upgrade is not tried again for RetryUnsupported.
type Pool struct {
	Path, Protocol string
	// Single keeps one connection at most: a new one closes the others (a
	// follower relays to one leader at a time).
	Single bool
	// RetryUnsupported is how long an address that refused the upgrade is
	// left alone (default one minute).
	RetryUnsupported time.Duration
	// TLS, when set, lets the pool dial https addresses with it (DialTLS).
	TLS *tls.Config

	mu          sync.Mutex
	closed      bool
	clients     map[string]*Client
	dialing     map[string]*dial
	unsupported map[string]time.Time
}

type dial struct {
	done chan struct{}
	c    *Client
	err  error
}

// Get returns a live connection to addr, dialing one with key if needed.
func (p *Pool) Get(ctx context.Context, addr, key string) (*Client, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrUnsupported
	}
	if c := p.clients[addr]; c != nil {
		if c.Alive() {
			p.mu.Unlock()
			return c, nil
		}
		delete(p.clients, addr)
	}
	if until, ok := p.unsupported[addr]; ok && time.Now().Before(until) {
		p.mu.Unlock()
		return nil, ErrUnsupported
	}
	d := p.dialing[addr]
	if d == nil {
		d = &dial{done: make(chan struct{})}
		if p.dialing == nil {
			p.dialing = map[string]*dial{}
		}
		p.dialing[addr] = d
		// Not the caller's context: the dial serves every caller waiting on
		// it, and Dial bounds it in time.
		go p.dial(context.WithoutCancel(ctx), addr, key, d)
	}
	p.mu.Unlock()
	select {
	case <-d.done:
		return d.c, d.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNotSent, ctx.Err())
	}
}

func (p *Pool) dial(ctx context.Context, addr, key string, d *dial) {
	defer close(d.done)
	c, err := DialTLS(ctx, addr, p.Path, p.Protocol, key, p.TLS)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.dialing, addr)
	var ue *upgradeError
	if errors.Is(err, ErrUnsupported) && !(errors.As(err, &ue) && retryable(ue.status)) {
		if p.unsupported == nil {
			p.unsupported = map[string]time.Time{}
		}
		wait := p.RetryUnsupported
		if wait <= 0 {
			wait = time.Minute
		}
		p.unsupported[addr] = time.Now().Add(wait)
	}
	if err != nil {
		d.err = err
		return
	}
	if p.closed {
		c.Fail(errors.New("wire: pool closed"))
		d.err = ErrUnsupported
		return
	}
	if p.clients == nil {
		p.clients = map[string]*Client{}
	}
	if p.Single {
		for a, old := range p.clients {
			old.Fail(errors.New("wire: replaced"))
			delete(p.clients, a)
		}
	}
	p.clients[addr] = c
	d.c = c
}

// retryable reports whether an upgrade refused with status says nothing
// about the protocol's support (a node shutting down or overloaded): the
// request goes over plain HTTP this time without marking the address.
func retryable(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests
}

// Stats counts the pool's live connections, dials in flight and addresses
// marked unsupported.
func (p *Pool) Stats() (clients, dialing, unsupported int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients), len(p.dialing), len(p.unsupported)
}

// Close closes every connection; later Gets answer ErrUnsupported.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for a, c := range p.clients {
		c.Fail(errors.New("wire: pool closed"))
		delete(p.clients, a)
	}
}

// CloseIdle closes the connections with no request in flight.
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.clients {
		c.pendingMu.Lock()
		idle := len(c.pending) == 0
		c.pendingMu.Unlock()
		if idle {
			c.Fail(errors.New("wire: closed while idle"))
			delete(p.clients, a)
		}
	}
}
