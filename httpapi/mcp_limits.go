package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
)

// What /mcp answers that is not the SDK's: the bound on sessions, and
// errors in the API's terms. The SDK answers a transport error (an unknown
// session, a wrong Content-Type) in plain text and a malformed message in
// the terms of its Go types; here the first get the API's JSON error and
// the second a JSON-RPC error that says what is wrong with the message.

// mcpSessionHeader carries an MCP session's id.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpSessions counts the MCP sessions of this node, open or being opened,
// per token and in all.
type mcpSessions struct {
	mu       sync.Mutex
	perToken map[string]int
	total    int
}

// mcpSlot is one session's place: taken when a request may start a
// session, kept while the session it started is open.
type mcpSlot struct{ user string }

// reserve takes a place for a session of user, or refuses with 429 when
// the token or the node has as many as the limits allow.
func (ss *mcpSessions) reserve(user string, lim MCPLimits) (*mcpSlot, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if n := ss.perToken[user]; n >= lim.PerToken {
		return nil, errorf(http.StatusTooManyRequests, api.CodeTooManySessions,
			"this token has %d MCP sessions open on this node, the most it may: end the ones you no longer use (DELETE /mcp with their %s), "+
				"or reuse one; a session no request used for %v ends by itself", n, mcpSessionHeader, lim.Idle)
	}
	if ss.total >= lim.Total {
		return nil, errorf(http.StatusTooManyRequests, api.CodeTooManySessions,
			"this node has %d MCP sessions open, the most it keeps: try again later or connect to another node's /mcp; "+
				"a session no request used for %v ends by itself", ss.total, lim.Idle)
	}
	ss.perToken[user]++
	ss.total++
	return &mcpSlot{user: user}, nil
}

// release gives a place back.
func (ss *mcpSessions) release(slot *mcpSlot) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.perToken[slot.user]--; ss.perToken[slot.user] <= 0 {
		delete(ss.perToken, slot.user)
	}
	ss.total--
}

// settle keeps slot while the session the request started on srv is open,
// and gives it back at once if it started none (the request was refused, or
// was no initialize: the SDK then closes the session before answering).
func (ss *mcpSessions) settle(slot *mcpSlot, srv *mcp.Server) {
	if srv != nil {
		for sess := range srv.Sessions() {
			go func() {
				// Wait returns once the session is closed: by DELETE, by the
				// idle timeout, or by its failed initialization.
				_ = sess.Wait()
				ss.release(slot)
			}()
			return
		}
	}
	ss.release(slot)
}

// count is how many sessions are open, or being opened, on this node.
func (ss *mcpSessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.total
}

// of is how many sessions user has open, or being opened, on this node.
func (ss *mcpSessions) of(user string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.perToken[user]
}

// isJSON reports whether a Content-Type is JSON's, the only one an MCP
// message is sent with.
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	ID      json.RawMessage
	Code    int
	Message string
}

// JSON-RPC's error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcInvalidParams  = -32602
)

func writeRPCError(w http.ResponseWriter, status int, e *rpcError) {
	id := e.ID
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	writeJSON(w, status, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message}})
}

// rpcParams are the parameters of the methods an MCP client calls: a
// request whose params do not fit is refused before the SDK decodes them.
var rpcParams = map[string]func() any{
	"initialize":                func() any { return new(mcp.InitializeParams) },
	"notifications/initialized": func() any { return new(mcp.InitializedParams) },
	"notifications/cancelled":   func() any { return new(mcp.CancelledParams) },
	"tools/call":                func() any { return new(mcp.CallToolParamsRaw) },
	"tools/list":                func() any { return new(mcp.ListToolsParams) },
	"resources/list":            func() any { return new(mcp.ListResourcesParams) },
	"resources/templates/list":  func() any { return new(mcp.ListResourceTemplatesParams) },
	"resources/read":            func() any { return new(mcp.ReadResourceParams) },
	"prompts/list":              func() any { return new(mcp.ListPromptsParams) },
	"logging/setLevel":          func() any { return new(mcp.SetLoggingLevelParams) },
}

// checkRPC returns why body is not a JSON-RPC message (or batch of them)
// that the MCP server can read, nil if it is one.
func checkRPC(body []byte) *rpcError {
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return &rpcError{Code: rpcParseError, Message: "the body is empty: POST /mcp takes a JSON-RPC message"}
	}
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return &rpcError{Code: rpcParseError, Message: fmt.Sprintf("the body is not valid JSON (%v): POST /mcp takes a JSON-RPC message", err)}
	}
	if b[0] == '[' {
		var batch []json.RawMessage
		_ = json.Unmarshal(b, &batch)
		if len(batch) == 0 {
			return &rpcError{Code: rpcInvalidRequest, Message: "an empty batch: POST /mcp takes a JSON-RPC message"}
		}
		for _, m := range batch {
			if e := checkMessage(m); e != nil {
				return e
			}
		}
		return nil
	}
	return checkMessage(b)
}

// checkMessage checks one JSON-RPC message.
func checkMessage(b json.RawMessage) *rpcError {
	if k := api.ValueKind(b); k != "an object" {
		return &rpcError{Code: rpcInvalidRequest, Message: fmt.Sprintf("a JSON-RPC message is a JSON object, not %s", k)}
	}
	var m struct {
		JSONRPC json.RawMessage `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(b, &m)
	var id json.RawMessage
	switch api.ValueKind(m.ID) {
	case "nothing", "null":
	case "a string", "a number":
		id = m.ID
	default:
		return &rpcError{Code: rpcInvalidRequest, Message: fmt.Sprintf(`"id" must be a string or a number, not %s`, api.ValueKind(m.ID))}
	}
	if string(bytes.TrimSpace(m.JSONRPC)) != `"2.0"` {
		return &rpcError{ID: id, Code: rpcInvalidRequest, Message: `a JSON-RPC message must have "jsonrpc": "2.0"`}
	}
	if len(m.Method) == 0 {
		return nil // a response to the server: the SDK reads it
	}
	var method string
	if json.Unmarshal(m.Method, &method) != nil {
		return &rpcError{ID: id, Code: rpcInvalidRequest, Message: fmt.Sprintf(`"method" must be a string, not %s`, api.ValueKind(m.Method))}
	}
	switch api.ValueKind(m.Params) {
	case "nothing", "null", "an object":
	default:
		return &rpcError{ID: id, Code: rpcInvalidParams, Message: fmt.Sprintf(`"params" of %s must be a JSON object, not %s`, method, api.ValueKind(m.Params))}
	}
	params := rpcParams[method]
	if params == nil || api.ValueKind(m.Params) != "an object" {
		return nil
	}
	if err := json.Unmarshal(m.Params, params()); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return &rpcError{ID: id, Code: rpcInvalidParams, Message: fmt.Sprintf(`"params.%s" of %s must be %s, not %s`,
				ute.Field, method, jsonKind(ute.Type), valueKind(ute.Value))}
		}
		return &rpcError{ID: id, Code: rpcInvalidParams, Message: fmt.Sprintf(`"params" of %s do not fit the method: check them against the MCP specification`, method)}
	}
	return nil
}

// valueKind words the Value of a json.UnmarshalTypeError ("number",
// "number 1e300", "string"...).
func valueKind(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "object":
		return "an object"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "number":
		return "a number"
	}
	return "that value"
}

// mcpErrorWriter turns the SDK's plain-text error answers into the API's
// JSON errors, in the API's terms.
type mcpErrorWriter struct {
	http.ResponseWriter
	s    *Server
	r    *http.Request
	idle time.Duration
	// status and text are a plain-text error answer held back.
	status int
	text   bytes.Buffer
	held   bool
}

func (w *mcpErrorWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held, w.status = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpErrorWriter) Write(b []byte) (int, error) {
	if w.held {
		return w.text.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes what the SDK wrote, unless it is an error held back.
func (w *mcpErrorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.held {
		f.Flush()
	}
}

func (w *mcpErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the error held back, as the API's JSON error.
func (w *mcpErrorWriter) finish() {
	if !w.held {
		return
	}
	h := w.Header()
	h.Del("Content-Type")
	h.Del("X-Content-Type-Options")
	w.s.writeError(w.ResponseWriter, w.sdkError(w.status, strings.TrimSpace(w.text.String())))
}

// sdkError is the API's error for a plain-text answer of the SDK.
func (w *mcpErrorWriter) sdkError(status int, text string) *apiError {
	r := w.r
	switch {
	case status == http.StatusNotFound:
		return errorf(status, api.CodeNotFound, "MCP session %q is not open on this node: it was ended (DELETE /mcp), no request used it for %v, "+
			"or the node restarted. Start a new session (initialize, without %s); a claw then calls held_jobs with its worker_id to take its leases over",
			r.Header.Get(mcpSessionHeader), w.idle, mcpSessionHeader)
	case status == http.StatusForbidden && strings.Contains(text, "user mismatch"):
		return errorf(status, api.CodeForbidden, "MCP session %q was opened with another token: every request of a session must carry the token that opened it",
			r.Header.Get(mcpSessionHeader))
	case status == http.StatusForbidden && strings.Contains(text, "Host"):
		return errorf(status, api.CodeForbidden, "the request came to a loopback address with Host %q, which is not a loopback name: "+
			"refused, as a browser tricked by DNS rebinding would send it; use the node's own address", r.Host)
	case status == http.StatusUnsupportedMediaType:
		return errorf(status, api.CodeUnsupportedMediaType, "POST %s takes a JSON-RPC message sent with Content-Type: application/json (got %q)",
			mcpPath, r.Header.Get("Content-Type"))
	case status == http.StatusRequestEntityTooLarge:
		return errorf(status, api.CodeTooLarge, "the MCP message is over the limit of %d bytes", w.s.cfg.MaxBodyBytes)
	case status == http.StatusMethodNotAllowed:
		return errorf(status, api.CodeMethodNotAllowed, "%s %s: POST sends MCP messages, DELETE ends a session", r.Method, mcpPath)
	case strings.Contains(text, "Accept must contain"):
		return errorf(status, api.CodeInvalidRequest, "an MCP client must accept both application/json and text/event-stream (Accept header; got %q)",
			r.Header.Get("Accept"))
	case strings.Contains(text, "Unsupported protocol version"):
		_, versions, _ := strings.Cut(text, "supported versions: ")
		return errorf(status, api.CodeInvalidRequest, "Mcp-Protocol-Version %q is not an MCP version this node speaks (it speaks %s)",
			r.Header.Get("Mcp-Protocol-Version"), strings.TrimSuffix(versions, ")"))
	case strings.Contains(text, "requires an Mcp-Session-Id"):
		return errorf(status, api.CodeInvalidRequest, "%s %s needs the %s header of the session it concerns", r.Method, mcpPath, mcpSessionHeader)
	case status >= 500 || strings.Contains(text, "no server available"):
		w.s.logger.Error("mcp: the SDK refused a request", "status", status, "answer", text)
		return errorf(http.StatusInternalServerError, api.CodeInternal, "the MCP session could not be started; see the node's log")
	}
	return errorf(status, api.CodeInvalidRequest, "%s", text)
}
