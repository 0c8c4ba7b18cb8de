package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/api"
)

// syncBuffer is a log output tests read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// aboveDebug is the log lines of out (JSON) above debug level.
func aboveDebug(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]interface{}
		if l == "" || json.Unmarshal([]byte(l), &m) != nil {
			continue
		}
		if lv, _ := m["@level"].(string); lv != "debug" && lv != "trace" {
			lines = append(lines, l)
		}
	}
	return lines
}

// rawServer serves e over TCP on loopback, as spine serve does; logs
// goes to a buffer the test reads.
func rawServer(t *testing.T, readTimeout time.Duration) (addr string, e *env, logs *syncBuffer) {
	t.Helper()
	logs = &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	e = newEnv(t, func(c *envConfig) { c.Config.Logger = logger; c.Queue.Logger = logger })
	srv := httptest.NewUnstartedServer(e.h)
	srv.Listener = e.srv.Listener(srv.Listener)
	srv.Config.ReadTimeout = readTimeout
	srv.Config.ErrorLog = logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), e, logs
}

// rawExchange sends raw on a new connection, then (with half) closes its
// sending side, and reads one answer.
func rawExchange(t *testing.T, addr, raw string, half bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	if half {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	// A deadline only so that a broken server fails the test rather than
	// hang it: nothing here depends on how long the answer takes.
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", raw, err)
	}
	return resp
}

// jsonError asserts an answer is the API's JSON error with status and
// code, and that its message names no address; it returns the message.
func jsonError(t *testing.T, what string, resp *http.Response, status int, code string, addrs ...string) string {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q: %s", what, ct, body)
	}
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Error.Code != code || eb.Error.Message == "" {
		t.Fatalf("%s: %v: %s (want code %s)", what, err, body, code)
	}
	for _, a := range append(addrs, "127.0.0.1", "read tcp", "i/o timeout") {
		if a != "" && strings.Contains(string(body), a) {
			t.Fatalf("%s: the answer names %q: %s", what, a, body)
		}
	}
	return eb.Error.Message
}

// A body cut short, one with a broken chunked encoding and one that
// stalls past the server's read timeout are the caller's fault: 400, or
// 408 for the timeout, in the API's JSON, naming no address, logged at
// debug level only, and nothing is created.
func TestBrokenBodiesAreTheCallersFault(t *testing.T) {
	addr, e, logs := rawServer(t, 0)
	head := "POST /jobs HTTP/1.1\r\nHost: n1\r\nAuthorization: Bearer " + headTok + "\r\nContent-Type: application/json\r\n"
	msg := jsonError(t, "truncated", rawExchange(t, addr, head+"Content-Length: 100\r\n\r\n{\"payload\":1", true),
		http.StatusBadRequest, api.CodeInvalidRequest)
	if !strings.Contains(msg, "ended after 12 of the 100 bytes its Content-Length announced") {
		t.Errorf("truncated: %q", msg)
	}
	msg = jsonError(t, "bad chunked", rawExchange(t, addr, head+"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", false),
		http.StatusBadRequest, api.CodeInvalidRequest)
	if !strings.Contains(msg, "chunked encoding is malformed") {
		t.Errorf("bad chunked: %q", msg)
	}
	jsonError(t, "chunked cut short", rawExchange(t, addr, head+"Transfer-Encoding: chunked\r\n\r\n10\r\n{\"pay", true),
		http.StatusBadRequest, api.CodeInvalidRequest)

	// Stalled: the body never comes, the connection stays open.
	addr2, e2, logs2 := rawServer(t, 100*time.Millisecond)
	conn, err := net.Dial("tcp", addr2)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	local := conn.LocalAddr().String()
	if _, err := io.WriteString(conn, head+"Content-Length: 100\r\n\r\n{\"payload\":"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg = jsonError(t, "stalled", resp, http.StatusRequestTimeout, api.CodeRequestTimeout, addr2, local)
	if !strings.Contains(msg, "read timeout") {
		t.Errorf("stalled: %q", msg)
	}

	for _, x := range []struct {
		e    *env
		logs *syncBuffer
	}{{e, logs}, {e2, logs2}} {
		if r := x.e.do("GET", "/jobs", headTok, nil); strings.Contains(string(r.Body), `"id"`) {
			t.Errorf("a broken body created a job: %s", r.Body)
		}
		if lines := aboveDebug(x.logs.String()); len(lines) > 0 {
			t.Errorf("logged above debug:\n%s", strings.Join(lines, "\n"))
		}
	}
}

// What Go's HTTP server refuses before any handler runs (a bad %-escape
// in the path, a malformed request line or Content-Length, a missing
// Host, an unknown Transfer-Encoding) is answered in the API's JSON too,
// and what net/http's router would answer itself (*, CONNECT, a path
// that is not clean) as well.
func TestUnparsableRequestsAnswerJSON(t *testing.T) {
	addr, e, logs := rawServer(t, 0)
	for _, c := range []struct {
		raw    string
		status int
		code   string
	}{
		{"GET /jobs/%zz HTTP/1.1\r\nHost: n1\r\n\r\n", 400, api.CodeInvalidRequest},
		{"GET /jobs/%zz HTTP/1.1\r\nHost: n1\r\nAuthorization: Bearer " + headTok + "\r\n\r\n", 400, api.CodeInvalidRequest},
		{"POST /jobs HTTP/1.1\r\nHost: n1\r\nContent-Length: abc\r\n\r\n", 400, api.CodeInvalidRequest},
		{"GET jobs HTTP/1.1\r\nHost: n1\r\n\r\n", 400, api.CodeInvalidRequest},
		{"GET /jobs HTTP/1.1\r\n\r\n", 400, api.CodeInvalidRequest},
		{"POST /jobs HTTP/1.1\r\nHost: n1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, api.CodeNotImplemented},
		{"GET * HTTP/1.1\r\nHost: n1\r\n\r\n", 400, api.CodeInvalidRequest},
		{"CONNECT n1:1 HTTP/1.1\r\nHost: n1\r\n\r\n", 405, api.CodeMethodNotAllowed},
		{"POST /v1/tasks//start HTTP/1.1\r\nHost: n1\r\nContent-Length: 2\r\n\r\n{}", 404, api.CodeNotFound},
		{"GET /./jobs HTTP/1.1\r\nHost: n1\r\n\r\n", 404, api.CodeNotFound},
	} {
		resp := rawExchange(t, addr, c.raw, false)
		jsonError(t, c.raw, resp, c.status, c.code)
		if resp.Header.Get(api.HeaderNode) != "n1" {
			t.Errorf("%q: no %s header", c.raw, api.HeaderNode)
		}
	}
	// Headers past net/http's own limit (1 MiB + 4 KiB by default).
	big := "GET /jobs HTTP/1.1\r\nHost: n1\r\nX-Big: " + strings.Repeat("x", 2<<20) + "\r\n\r\n"
	jsonError(t, "huge headers", rawExchange(t, addr, big, false), http.StatusRequestHeaderFieldsTooLarge, api.CodeHeadersTooLarge)

	// An answer that looks like one of Go's refusals is never rewritten:
	// only a refusal written at once after a request is.
	refusal := "HTTP/1.1 400 Bad Request" + goRefusalHeaders + "400 Bad Request"
	e.srv.cfg.SkillMD = []byte(strings.Repeat("#", 5000) + refusal)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for range 2 { // keep-alive: twice on one connection
		if _, err := io.WriteString(conn, "GET /skill.md HTTP/1.1\r\nHost: n1\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !bytes.Equal(body, e.srv.cfg.SkillMD) {
			t.Fatalf("skill.md: %d, %d bytes", resp.StatusCode, len(body))
		}
	}
	if lines := aboveDebug(logs.String()); len(lines) > 0 {
		t.Errorf("logged above debug:\n%s", strings.Join(lines, "\n"))
	}
}
