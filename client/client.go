package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/api/wire"
)

// Response headers every node sets (see package api).
const (
	HeaderNode   = api.HeaderNode   // id of the node that served the request
	HeaderLeader = api.HeaderLeader // leader id as that node knows it
	HeaderIndex  = api.HeaderIndex  // Raft index of the write, or of the state a read saw
)

// RetryPolicy bounds the retries of one call. Zero fields take the defaults
// of [DefaultRetryPolicy].
type RetryPolicy struct {
	// MaxAttempts is the most tries of one call, the first included
	// (1 disables retries).
	MaxAttempts int
	// BaseDelay is the backoff ceiling of the first retry; it doubles with
	// every retry up to MaxDelay. The actual wait is uniform in [0, ceiling)
	// ("full jitter"), or the server's Retry-After if that is longer.
	BaseDelay time.Duration
	// MaxDelay caps the backoff ceiling.
	MaxDelay time.Duration
	// MaxElapsed bounds the time spent on one call, waits included; no retry
	// starts after it.
	MaxElapsed time.Duration
}

// DefaultRetryPolicy rides out a leader election (a few seconds).
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts: 10,
	BaseDelay:   100 * time.Millisecond,
	MaxDelay:    3 * time.Second,
	MaxElapsed:  30 * time.Second,
}

// DefaultTimeout is the per-request timeout unless [WithTimeout] says otherwise.
const DefaultTimeout = 15 * time.Second

// Option configures a [Client].
type Option func(*Client)

// WithToken sets the bearer token sent with every request.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient replaces the HTTP client (its Timeout should be zero: the
// client sets a per-request deadline itself).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithTimeout sets the timeout of each single request (each try). A long-poll
// claim gets at least its wait plus this timeout.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetry sets the retry policy.
func WithRetry(p RetryPolicy) Option { return func(c *Client) { c.retry = p } }

// WithLogger sets where retries and leader changes are logged (default: nowhere).
func WithLogger(l *slog.Logger) Option { return func(c *Client) { c.log = l } }

// WithTLSConfig sets the TLS configuration for https addresses (default:
// Go's, which trusts the system's roots). It has no effect with
// [WithHTTPClient], whose transport decides.
func WithTLSConfig(tc *tls.Config) Option { return func(c *Client) { c.tls = tc } }

// WithCACertFile trusts the CA certificates in the PEM file at path, and
// only them, for https addresses: a cluster whose nodes serve certificates
// from its own CA (spine tls). New fails if the file cannot be read or
// holds no certificate. It has no effect with [WithHTTPClient].
func WithCACertFile(path string) Option {
	return func(c *Client) {
		b, err := os.ReadFile(path)
		if err != nil {
			c.optErr = fmt.Errorf("client: CA certificate: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			c.optErr = fmt.Errorf("client: CA certificate: %s holds no PEM certificate", path)
			return
		}
		if c.tls == nil {
			c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		} else {
			c.tls = c.tls.Clone()
		}
		c.tls.RootCAs = pool
	}
}

// Client talks to a Spine cluster. It is safe for concurrent use.
type Client struct {
	addrs   []string
	token   string
	http    *http.Client
	timeout time.Duration
	retry   RetryPolicy
	log     *slog.Logger
	tls     *tls.Config // WithTLSConfig, WithCACertFile
	optErr  error       // an option that failed

	mu          sync.Mutex
	cur         int    // index into addrs of the seed in use
	leaderID    string // leader id as last reported
	leaderAddr  string // leader base URL, "" when unknown
	leaderStale bool   // leaderID changed and leaderAddr must be looked up

	// noNext: the cluster refused a complete's "next" as a field it does
	// not know (a build without it); completes go without it since.
	noNext atomic.Bool
}

// New returns a client of the nodes at addrs (base URLs such as
// "http://127.0.0.1:36725"; a missing scheme means http).
func New(addrs []string, opts ...Option) (*Client, error) {
	c := &Client{timeout: DefaultTimeout, retry: DefaultRetryPolicy}
	for _, a := range addrs {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		n, err := normalizeAddr(a)
		if err != nil {
			return nil, err
		}
		c.addrs = append(c.addrs, n)
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("client: no address given")
	}
	for _, o := range opts {
		o(c)
	}
	if c.optErr != nil {
		return nil, c.optErr
	}
	if c.http == nil {
		// A client is shared by many goroutines (producers, a Worker's
		// concurrency): their requests share one multiplexed connection per
		// node (spine-mux/1), whose frames share reads and writes. What it
		// does not carry (blobs, nodes that refuse it) goes over HTTP with
		// enough idle connections per node that they are reused instead of
		// re-dialled (net/http's default keeps 2).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 256
		tr.MaxIdleConnsPerHost = 64
		if c.tls != nil {
			tr.TLSClientConfig = c.tls.Clone()
		}
		mux := wire.NewTransportTLS(tr, tr.TLSClientConfig)
		// Blob and snapshot uploads and downloads stream over HTTP: a frame
		// is held whole in memory on both sides.
		mux.Bypass = func(r *http.Request) bool {
			return r.URL.Path == "/blobs" || strings.HasPrefix(r.URL.Path, "/blobs/") || r.URL.Path == "/v1/snapshot"
		}
		c.http = &http.Client{Transport: mux, CheckRedirect: keepAuthOnRedirect}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	d := DefaultRetryPolicy
	if c.retry.MaxAttempts <= 0 {
		c.retry.MaxAttempts = d.MaxAttempts
	}
	if c.retry.BaseDelay <= 0 {
		c.retry.BaseDelay = d.BaseDelay
	}
	if c.retry.MaxDelay <= 0 {
		c.retry.MaxDelay = d.MaxDelay
	}
	if c.retry.MaxElapsed <= 0 {
		c.retry.MaxElapsed = d.MaxElapsed
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

// Addrs returns the seed addresses, normalized.
func (c *Client) Addrs() []string { return append([]string(nil), c.addrs...) }

// Leader returns the leader's base URL as last learned, or "".
func (c *Client) Leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaderAddr
}

func normalizeAddr(a string) (string, error) {
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("client: bad address %q", a)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), nil
}

// keepAuthOnRedirect follows at most 5 redirects (307 from a follower to
// the leader) and keeps the credentials, which net/http drops when the port
// changes.
func keepAuthOnRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if a := via[0].Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	return nil
}

// retryMode says when a call may be repeated.
type retryMode int

const (
	// retrySafe: repeat on any network error and on 503.
	retrySafe retryMode = iota
	// retryUnsent: repeat only when the request certainly changed nothing
	// (connection refused, no_leader). For claims.
	retryUnsent
	// retryNever: one try, one address.
	retryNever
)

// request is one logical call; do may send it several times.
type request struct {
	method string
	path   string
	query  url.Values
	body   []byte // nil: no body
	// open, if set, gives the body instead, anew for each try (size
	// bytes): a body too large to hold in memory.
	open        func() (io.ReadCloser, error)
	size        int64
	contentType string
	header      http.Header
	write       bool          // prefer the leader
	mode        retryMode     //
	minTimeout  time.Duration // added to the per-try timeout (long polls)
	addr        string        // fixed base URL, else seeds/leader
}

// jsonRequest builds a request with v as its JSON body (nil v, or a nil
// pointer: no body, which the server reads as {}; it refuses a JSON null).
func jsonRequest(method, path string, v any) (*request, error) {
	r := &request{method: method, path: path}
	if rv := reflect.ValueOf(v); v != nil && !(rv.Kind() == reflect.Pointer && rv.IsNil()) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("client: encode %s %s: %w", method, path, err)
		}
		r.body, r.contentType = b, "application/json"
	}
	return r, nil
}

// call sends req and decodes a 2xx JSON answer into out (if non-nil). It
// reports whether an earlier try may have been applied (uncertain).
func (c *Client) call(ctx context.Context, req *request, out any) (status int, uncertain bool, err error) {
	resp, uncertain, err := c.do(ctx, req)
	if err != nil {
		return 0, uncertain, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, true, fmt.Errorf("client: %s %s: read answer: %w", req.method, req.path, err)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, uncertain, fmt.Errorf("client: %s %s: decode answer: %w", req.method, req.path, err)
		}
	}
	return resp.StatusCode, uncertain, nil
}

// do sends req, retrying as its mode allows, and returns the first 2xx
// response (body unread, closing it releases the try's context) or the last
// error. Non-2xx answers become *APIError.
func (c *Client) do(ctx context.Context, req *request) (*http.Response, bool, error) {
	start := time.Now()
	uncertain := false
	dialFails := 0
	var lastErr error
	for attempt := 1; ; attempt++ {
		base := c.pick(req)
		resp, err := c.try(ctx, req, base)
		if err == nil {
			return resp, uncertain, nil
		}
		if ctx.Err() != nil {
			return nil, uncertain, err
		}
		lastErr = err

		var retryAfter time.Duration
		var apiErr *APIError
		retry := false
		switch {
		case errors.As(err, &apiErr):
			if apiErr.Status != http.StatusServiceUnavailable {
				return nil, uncertain, err
			}
			retryAfter = parseRetryAfter(apiErr.header)
			if apiErr.Code == CodeNoLeader {
				c.forgetLeader()
				retry = req.mode != retryNever
			} else {
				// outcome_unknown (or a 503 without a code): the write may
				// have been applied.
				uncertain = true
				retry = req.mode == retrySafe
			}
			dialFails = 0
		default: // network error
			c.failed(base)
			if notSent(err) {
				retry = req.mode != retryNever
				dialFails++
			} else {
				uncertain = true
				retry = req.mode == retrySafe
				dialFails = 0
			}
		}
		if !retry || attempt >= c.retry.MaxAttempts {
			return nil, uncertain, lastErr
		}
		// Rotating through the other seeds after a refused connection needs
		// no wait; once every seed refused, back off.
		var wait time.Duration
		if dialFails == 0 || dialFails >= len(c.addrs) {
			wait = c.backoff(attempt)
			if dialFails > 0 {
				dialFails = 0
			}
		}
		wait = max(wait, retryAfter)
		if time.Since(start)+wait > c.retry.MaxElapsed {
			return nil, uncertain, lastErr
		}
		c.log.Debug("spine client: retrying", "method", req.method, "path", req.path,
			"attempt", attempt, "wait", wait, "err", err)
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, uncertain, lastErr
			case <-t.C:
			}
		}
	}
}

// try sends req once to base.
func (c *Client) try(ctx context.Context, req *request, base string) (*http.Response, error) {
	timeout := c.timeout + req.minTimeout
	tctx, cancel := context.WithTimeout(ctx, timeout)
	u := base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	if req.open != nil {
		rc, err := req.open()
		if err != nil {
			cancel()
			return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
		}
		defer rc.Close()
		body = rc
	}
	hr, err := http.NewRequestWithContext(tctx, req.method, u, body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
	}
	if req.open != nil {
		hr.ContentLength = req.size
	}
	for k, vs := range req.header {
		hr.Header[k] = vs
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	hr.Header.Set("Accept", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		cancel()
		return nil, err // a *url.Error: names the method and URL
	}
	c.observe(base, resp.Header)
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		cancel()
		e := newAPIError(resp.StatusCode, b)
		e.header = resp.Header
		return nil, e
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// notSent reports whether a transport error certainly happened before the
// request reached a server (so it changed nothing).
func notSent(err error) bool {
	if errors.Is(err, wire.ErrNotSent) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

func parseRetryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// backoff returns the full-jitter wait before retry number attempt (1-based).
func (c *Client) backoff(attempt int) time.Duration {
	ceil := c.retry.BaseDelay
	for i := 1; i < attempt && ceil < c.retry.MaxDelay; i++ {
		ceil *= 2
	}
	ceil = min(ceil, c.retry.MaxDelay)
	if ceil <= 0 {
		return 0
	}
	return rand.N(ceil)
}
