// Package wire carries many concurrent HTTP requests and their answers over
// one long-lived TCP connection as length-prefixed frames.
//
// A connection starts as an HTTP Upgrade on a node's own port, so no extra
// listener is needed. Two protocols use it:
//
//   - spine-relay/1: a follower forwarding requests to its leader,
//     authenticated by a key derived from the nodes' token configuration.
//   - spine-mux/1: a client (a claw, a producer, the load generator) talking
//     to any node, authenticated by the client's own token; every request
//     still carries its own Authorization and is checked as over HTTP.
//
// After the upgrade both sides exchange frames: a request (method, URI,
// headers, body), its answer (status, headers, body), the cancellation of a
// request whose caller went away, or the server's notice that it is shutting
// down (go-away), which tells the client exactly which requests it never
// read, so they can be sent elsewhere without any risk of applying them twice. Frames of concurrent requests share each
// write and each read, which is the point: on a loaded connection a request
// costs a fraction of a syscall on each side instead of a whole HTTP
// exchange with its own read and write.
//
// A request means exactly what it means over HTTP: the server runs it
// through the same handler, and its answer is byte for byte the same.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Protocols and the paths they are served on.
const (
	RelayPath     = "/internal/relay"
	RelayProtocol = "spine-relay/1"
	MuxPath       = "/mux"
	MuxProtocol   = "spine-mux/1"
)

const (
	// MaxBody is the largest request body sent in a frame; larger ones (blob
	// uploads) go over plain HTTP.
	MaxBody = 1 << 20
	// MaxFrame bounds a frame a client accepts (a blob download's answer is
	// at most a node's blob limit plus framing).
	MaxFrame = 64 << 20
	// MaxRequestFrame bounds a request frame a server accepts: MaxBody plus
	// room for the method, URI and headers.
	MaxRequestFrame = MaxBody + 64<<10

	FrameRequest  byte = 1
	FrameCancel   byte = 2
	FrameResponse byte = 3
	// FrameGoAway: the server reads no more requests on this connection; its
	// id is the last request it read (a client numbers its requests in the
	// order it writes them, so every later one was never read). Requests up
	// to it are still answered, then the server closes the connection.
	FrameGoAway byte = 4
	frameHeader      = 4 + 1 + 8 // length, kind, request id
)

var (
	// ErrNotSent: the request never left this process (no connection, or
	// the connection broke before its frame was written whole), so sending
	// it again cannot apply it twice.
	ErrNotSent = errors.New("wire: request not sent")
	// ErrLost: the request was sent but its answer will not come.
	ErrLost = errors.New("wire: connection lost before the answer")
	// ErrUnsupported: the server does not speak the protocol (an older
	// version, another token configuration, a proxy, TLS): use plain HTTP.
	ErrUnsupported = errors.New("wire: protocol not available at this address")
)

// Carries reports whether a request with a body of n bytes goes in a
// frame: bodies over MaxBody go over plain HTTP (a frame is held whole in
// memory on both sides).
func Carries(n int64) bool { return n <= MaxBody }

// HopHeaders are connection-level headers that are never carried in a frame
// (nor copied by a node forwarding over plain HTTP).
var HopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
}

// AppendFrame appends one frame to b.
func AppendFrame(b []byte, kind byte, id uint64, payload []byte) []byte {
	var hdr [frameHeader]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(1+8+len(payload)))
	hdr[4] = kind
	binary.BigEndian.PutUint64(hdr[5:], id)
	return append(append(b, hdr[:]...), payload...)
}

// ReadFrame reads one frame whose payload is at most max bytes; a longer
// one is an error (the connection is then unusable).
func ReadFrame(r *bufio.Reader, max uint32) (kind byte, id uint64, payload []byte, err error) {
	var hdr [frameHeader]byte
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[0:4])
	if n < 9 || n-9 > max {
		return 0, 0, nil, fmt.Errorf("wire: bad frame length %d", n)
	}
	payload = make([]byte, n-9)
	if _, err = io.ReadFull(r, payload); err != nil {
		return 0, 0, nil, err
	}
	return hdr[4], binary.BigEndian.Uint64(hdr[5:]), payload, nil
}

// AppendField appends a length-prefixed byte string.
func AppendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// AppendHeader appends h, without its hop-by-hop headers.
func AppendHeader(b []byte, h http.Header) []byte {
	n := 0
	for k, vs := range h {
		if !HopHeaders[k] {
			n += len(vs)
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	for k, vs := range h {
		if HopHeaders[k] {
			continue
		}
		for _, v := range vs {
			b = AppendField(AppendField(b, []byte(k)), []byte(v))
		}
	}
	return b
}

// Fields reads what AppendField and AppendHeader wrote. The first malformed
// field sets Err; later reads return zero values.
type Fields struct {
	B   []byte
	Err error
}

var errMalformed = errors.New("wire: malformed frame")

// Uvarint reads an unsigned varint.
func (f *Fields) Uvarint() uint64 {
	if f.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(f.B)
	if n <= 0 {
		f.Err = errMalformed
		return 0
	}
	f.B = f.B[n:]
	return v
}

// Bytes reads a byte string; the result aliases the frame.
func (f *Fields) Bytes() []byte {
	n := f.Uvarint()
	if f.Err != nil {
		return nil
	}
	if n > uint64(len(f.B)) {
		f.Err = errMalformed
		return nil
	}
	v := f.B[:n:n]
	f.B = f.B[n:]
	return v
}

// Header reads a header set. One string holds every name and value and one
// slice backs every value list, so a header set costs three allocations
// rather than two per field (this was the largest count of objects a
// leader allocated per relayed request).
func (f *Fields) Header() http.Header {
	n := f.Uvarint()
	if n > uint64(len(f.B)) {
		f.Err = errMalformed
	}
	if f.Err != nil {
		return nil
	}
	type span struct{ k0, k1, v0, v1 int }
	var fixed [16]span
	spans := fixed[:0]
	base := f.B
	at := func() int { return len(base) - len(f.B) }
	for i := uint64(0); i < n && f.Err == nil; i++ {
		k := f.Bytes()
		k1 := at()
		v := f.Bytes()
		v1 := at()
		spans = append(spans, span{k1 - len(k), k1, v1 - len(v), v1})
	}
	if f.Err != nil {
		return nil
	}
	all := string(base[:at()])
	vals := make([]string, len(spans))
	h := make(http.Header, len(spans))
	for i, sp := range spans {
		k := all[sp.k0:sp.k1]
		vals[i] = all[sp.v0:sp.v1]
		if vs, dup := h[k]; dup {
			h[k] = append(vs, vals[i])
		} else {
			h[k] = vals[i : i+1 : i+1]
		}
	}
	return h
}

// AppendRequest appends a request frame's payload.
func AppendRequest(b []byte, method, uri string, h http.Header, body []byte) []byte {
	b = AppendField(b, []byte(method))
	b = AppendField(b, []byte(uri))
	b = AppendHeader(b, h)
	return AppendField(b, body)
}

// DecodeRequest parses a request frame's payload into a server request.
func DecodeRequest(p []byte) (*http.Request, error) {
	return DecodeRequestContext(context.Background(), p)
}

// DecodeRequestContext parses a request frame's payload into a server
// request with context ctx: one allocation of the request, where
// DecodeRequest and WithContext make two.
func DecodeRequestContext(ctx context.Context, p []byte) (*http.Request, error) {
	f := &Fields{B: p}
	method := methodString(f.Bytes())
	uri := string(f.Bytes())
	h := f.Header()
	body := f.Bytes()
	if f.Err != nil {
		return nil, f.Err
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return nil, err
	}
	rb := newBody(body)
	rb.frame = p
	r := http.Request{
		Method: method, URL: u, RequestURI: uri, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: rb, ContentLength: int64(len(body)),
		Host: u.Host,
	}
	return r.WithContext(ctx), nil
}

// methodString returns the common methods without allocating.
func methodString(b []byte) string {
	switch string(b) {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	}
	return string(b)
}

// frameBody is a decoded request's body: it is already in memory, and
// BodyBytes hands it over without a copy.
type frameBody struct {
	bytes.Reader
	b     []byte
	frame []byte // the whole request frame's payload (RequestFrame)
}

func newBody(b []byte) *frameBody {
	rb := &frameBody{b: b}
	rb.Reset(b)
	return rb
}

func (*frameBody) Close() error { return nil }

// BodyBytes returns the whole body of a request decoded from a frame, which
// is already in memory, without reading it (the reader is left as it was).
// ok is false for any other body, which must be read.
func BodyBytes(r io.Reader) (b []byte, ok bool) {
	if rb, ok := r.(*frameBody); ok {
		return rb.b, true
	}
	return nil, false
}

// AppendResponse appends an answer frame's payload.
func AppendResponse(b []byte, status int, h http.Header, body []byte) []byte {
	b = binary.AppendUvarint(b, uint64(status))
	b = AppendHeader(b, h)
	return AppendField(b, body)
}

// DecodeResponse parses an answer frame's payload.
func DecodeResponse(p []byte) (*http.Response, error) {
	a, err := ParseAnswer(p)
	if err != nil {
		return nil, err
	}
	return a.Response(), nil
}
