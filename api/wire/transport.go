package wire

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Transport is an http.RoundTripper that sends a client's requests over one
// spine-mux/1 connection per node, so the requests of all of a process's
// goroutines share reads and writes. What the protocol does not carry goes
// to Fallback unchanged: requests without a bearer token (the connection is
// authenticated by the first request's), https addresses (unless the
// Transport came from NewTransportTLS), bodies over
// MaxBody, requests Bypass names (whose answers may be too large to hold
// whole, such as downloads), and nodes that refuse the upgrade (older
// versions, proxies), which are tried again after a while.
//
// Errors keep HTTP's meaning for retries: one that wraps ErrNotSent proves
// the request never left this process.
type Transport struct {
	Fallback http.RoundTripper
	// Bypass, when set, sends the requests it names to Fallback.
	Bypass func(*http.Request) bool
	pool   Pool
}

// NewTransport returns a Transport that falls back to fallback.
func NewTransport(fallback http.RoundTripper) *Transport {
	return &Transport{Fallback: fallback, pool: Pool{Path: MuxPath, Protocol: MuxProtocol}}
}

// NewTransportTLS is NewTransport that also carries https requests,
// dialing with tc (nil: Go's defaults, which trust the system's roots).
func NewTransportTLS(fallback http.RoundTripper, tc *tls.Config) *Transport {
	if tc == nil {
		tc = &tls.Config{}
	}
	return &Transport{Fallback: fallback, pool: Pool{Path: MuxPath, Protocol: MuxProtocol, TLS: tc}}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	auth := req.Header.Get("Authorization")
	key, bearer := strings.CutPrefix(auth, "Bearer ")
	unknownLength := req.ContentLength < 0 && req.Body != nil && req.Body != http.NoBody
	plain, secure := req.URL.Scheme == "http", req.URL.Scheme == "https" && t.pool.TLS != nil
	if !bearer || !(plain || secure) || unknownLength || !Carries(req.ContentLength) ||
		(t.Bypass != nil && t.Bypass(req)) {
		return t.Fallback.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	ctx := req.Context()
	c, err := t.pool.Get(ctx, req.URL.Scheme+"://"+req.URL.Host, key)
	if errors.Is(err, ErrUnsupported) {
		r2 := req.Clone(ctx)
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		return t.Fallback.RoundTrip(r2)
	}
	if err != nil {
		return nil, err
	}
	resp, err := c.RoundTrip(ctx, AppendRequest(nil, req.Method, req.URL.RequestURI(), req.Header, body))
	if err != nil {
		return nil, err
	}
	resp.Request = req
	return resp, nil
}

// CloseIdleConnections closes the connections with no request in flight,
// the fallback's too.
func (t *Transport) CloseIdleConnections() {
	t.pool.CloseIdle()
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
