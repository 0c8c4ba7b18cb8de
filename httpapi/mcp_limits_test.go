package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/api"
)

const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// mcpPost sends one MCP message to url's /mcp with token (and a session id
// when sid is set).
func mcpPost(t *testing.T, url, token, sid, body string, hdr ...string) resp {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{Code: res.StatusCode, Header: res.Header, Body: b}
}

// MCP sessions are bounded per token and per node: past the bound an
// initialize is 429 too_many_sessions with Retry-After, builds nothing
// (however often it is tried), and leaves the open sessions working;
// another token still gets one while the node has room; a session ended
// with DELETE gives its place back.
func TestMCPSessionLimits(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.MCP = MCPLimits{PerToken: 3, Total: 5, Idle: time.Hour} })
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	m := e.srv.mcp
	left := mcpSession(t, ts.URL, leftTok)
	mcpSession(t, ts.URL, leftTok)
	mcpSession(t, ts.URL, leftTok)

	r := mcpPost(t, ts.URL, leftTok, "", mcpInitialize)
	er := r.apiErr(t, http.StatusTooManyRequests, api.CodeTooManySessions)
	if r.Header.Get("Retry-After") == "" || !strings.Contains(er["message"].(string), "this token has 3 MCP sessions open") {
		t.Fatalf("429: Retry-After %q, %v", r.Header.Get("Retry-After"), er["message"])
	}
	built := m.built.Load()
	for range 50 {
		mcpPost(t, ts.URL, leftTok, "", mcpInitialize).apiErr(t, http.StatusTooManyRequests, api.CodeTooManySessions)
	}
	if got := m.built.Load(); got != built {
		t.Fatalf("50 refused initializes built %d session servers", got-built)
	}
	if n := m.sessions.count(); n != 3 {
		t.Fatalf("%d sessions open, want 3", n)
	}
	var streams map[string]any
	mcpCall(t, left, "list_streams", nil, &streams)

	// Another token has room until the node is full.
	mcpSession(t, ts.URL, rightTok)
	mcpSession(t, ts.URL, rightTok)
	er = mcpPost(t, ts.URL, headTok, "", mcpInitialize).apiErr(t, http.StatusTooManyRequests, api.CodeTooManySessions)
	if !strings.Contains(er["message"].(string), "this node has 5 MCP sessions open") {
		t.Fatalf("node full: %v", er["message"])
	}
	if h := e.do("GET", "/health", "", nil).json(t); h["mcp_sessions"] != float64(5) {
		t.Fatalf("/health mcp_sessions = %v, want 5", h["mcp_sessions"])
	}

	// Ending a session gives its place back.
	if err := left.Close(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the ended session's place", func() bool { return m.sessions.of(tokenUser(leftTok)) == 2 })
	mcpSession(t, ts.URL, headTok)
}

// A session no request used for the idle time ends by itself and gives its
// place back; a request in it then gets 404 not_found in the API's terms,
// saying how to start over.
func TestMCPIdleSessionEnds(t *testing.T) {
	e := newEnv(t, func(c *envConfig) { c.MCP = MCPLimits{PerToken: 1, Idle: 200 * time.Millisecond} })
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	r := mcpPost(t, ts.URL, leftTok, "", mcpInitialize)
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", r.Code, r.Body)
	}
	waitUntil(t, "the idle session to end", func() bool { return e.srv.mcp.sessions.count() == 0 })
	er := mcpPost(t, ts.URL, leftTok, sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`).apiErr(t, http.StatusNotFound, api.CodeNotFound)
	if msg := er["message"].(string); !strings.Contains(msg, sid) || !strings.Contains(msg, "held_jobs") {
		t.Fatalf("404: %s", msg)
	}
	if r := mcpPost(t, ts.URL, leftTok, "", mcpInitialize); r.Code != http.StatusOK {
		t.Fatalf("a new session after the idle one ended: %d %s", r.Code, r.Body)
	}
}

// What is wrong with a request to /mcp is said in the API's JSON error
// (transport: content type, session, Accept) or in a JSON-RPC error (the
// message itself), never in the terms of Go types; and none of them opens
// a session.
func TestMCPTransportErrorsInAPITerms(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewServer(e.h)
	defer ts.Close()
	goTerms := []string{"Go ", "struct", "map[", "interface {}", "jsonrpc2", "wireDecode", "mcp.", "*mcp"}
	check := func(what string, r resp) {
		t.Helper()
		for _, g := range goTerms {
			if strings.Contains(string(r.Body), g) {
				t.Errorf("%s: the answer speaks Go (%q): %s", what, g, r.Body)
			}
		}
	}
	r := mcpPost(t, ts.URL, leftTok, "", `{}`, "Content-Type", "text/plain")
	r.apiErr(t, http.StatusUnsupportedMediaType, api.CodeUnsupportedMediaType)
	check("text/plain", r)
	r = mcpPost(t, ts.URL, leftTok, "no-such-session", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	r.apiErr(t, http.StatusNotFound, api.CodeNotFound)
	check("unknown session", r)
	r = mcpPost(t, ts.URL, leftTok, "", mcpInitialize, "Accept", "text/html")
	r.apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	check("Accept", r)
	r = mcpPost(t, ts.URL, leftTok, "", mcpInitialize, "Mcp-Protocol-Version", "1999-01-01")
	r.apiErr(t, http.StatusBadRequest, api.CodeInvalidRequest)
	check("protocol version", r)

	for _, c := range []struct {
		body string
		code int
		says string
	}{
		{`{"jsonrpc":"2.0","id":1,`, -32700, "not valid JSON"},
		{``, -32700, "empty"},
		{`5`, -32600, "a JSON object, not a number"},
		{`[]`, -32600, "empty batch"},
		{`{"jsonrpc":"1.0","id":1,"method":"initialize"}`, -32600, `"jsonrpc": "2.0"`},
		{`{"jsonrpc":"2.0","id":{},"method":"initialize"}`, -32600, `"id" must be a string or a number`},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, -32600, `"method" must be a string`},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":"x"}`, -32602, `"params" of initialize must be a JSON object, not a string`},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":[]}}`, -32602, `"params.clientInfo" of initialize must be an object, not a list`},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}`, -32602, `"params.name" of tools/call must be a string`},
	} {
		r := mcpPost(t, ts.URL, leftTok, "", c.body)
		var rpc struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(r.Body, &rpc); err != nil || r.Code != http.StatusBadRequest || rpc.JSONRPC != "2.0" ||
			rpc.Error.Code != c.code || !strings.Contains(rpc.Error.Message, c.says) {
			t.Errorf("%s: %d %s, want 400 and JSON-RPC error %d saying %q", c.body, r.Code, r.Body, c.code, c.says)
		}
		check(c.body, r)
	}
	if n := e.srv.mcp.sessions.count(); n != 0 {
		t.Fatalf("refused requests left %d sessions open", n)
	}
}
