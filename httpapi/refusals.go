package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/spine-queue/spine/api"
)

// Go's HTTP server answers a request it cannot parse (a bad %-escape in the
// path, a malformed request line or Content-Length, a missing Host, an
// unknown Transfer-Encoding, headers over its limit) itself, in plain text,
// before any handler runs, and offers no hook to answer otherwise. Listener
// rewrites those answers on the connection into the API's JSON errors.

// Listener wraps a plain-HTTP listener of the API so that the refusals
// Go's HTTP server writes on its own are the API's JSON errors, with the
// headers of every answer. (Over TLS they are encrypted on the connection
// and stay Go's.)
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &refusalListener{Listener: ln, headers: func() http.Header {
		h := http.Header{}
		s.leaderHeaders(h)
		return h
	}}
}

type refusalListener struct {
	net.Listener
	headers func() http.Header
}

func (l *refusalListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &refusalConn{Conn: c, headers: l.headers}, nil
}

// refusalConn rewrites a refusal of Go's HTTP server. Only the first write
// after the caller sent something may be one (the server refuses a
// request as soon as it has read it), so the body of an answer, however
// it is cut into writes, is never taken for one.
type refusalConn struct {
	net.Conn
	headers func() http.Header
	read    atomic.Bool // the caller sent bytes since the last write
}

func (c *refusalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.read.Store(true)
	}
	return n, err
}

func (c *refusalConn) Write(p []byte) (int, error) {
	if c.read.Swap(false) {
		if out := jsonRefusal(p, c.headers); out != nil {
			if _, err := c.Conn.Write(out); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// CloseWrite keeps the half-close the server uses after a refusal of
// oversized headers.
func (c *refusalConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// goRefusalHeaders are the header fields of every refusal net/http
// writes on its own, right after the status line.
const goRefusalHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// jsonRefusal is the API's answer in place of p when p is a whole refusal
// of net/http ("HTTP/1.1 400 Bad Request" + goRefusalHeaders + text), else
// nil.
func jsonRefusal(p []byte, headers func() http.Header) []byte {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 4 || rest[3] != ' ' {
		return nil
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil
	}
	line, text, ok := bytes.Cut(rest, []byte(goRefusalHeaders))
	if !ok || bytes.ContainsAny(line, "\r\n") || bytes.ContainsAny(text, "\r\n") {
		return nil
	}
	var code, msg string
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code, msg = api.CodeHeadersTooLarge, "the request's headers are over the server's limit"
	case http.StatusNotImplemented:
		code, msg = api.CodeNotImplemented, "the request's Transfer-Encoding is not supported: send the body with a Content-Length, or chunked"
	case http.StatusBadRequest:
		code, msg = api.CodeInvalidRequest, "the request could not be parsed: its request line, URL or a header is malformed (such as a %-escape that is not two hex digits: write a literal % as %25)"
		// "400 Bad Request: missing required Host header": HTTP's own words.
		if _, detail, ok := bytes.Cut(text, []byte(": ")); ok {
			msg = "the request could not be parsed: " + string(detail)
		}
	default:
		code, msg = api.CodeInvalidRequest, "the request could not be parsed"
	}
	body, err := json.Marshal(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}})
	if err != nil {
		return nil
	}
	body = append(body, '\n')
	var out bytes.Buffer
	fmt.Fprintf(&out, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	h := headers()
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "close")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_ = h.Write(&out)
	out.WriteString("\r\n")
	out.Write(body)
	return out.Bytes()
}
