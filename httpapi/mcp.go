package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/mcpserver"
)

// The node's MCP server (docs/mcp.md): /mcp speaks MCP's streamable HTTP
// transport, with a bearer token as on the API. Each MCP session gets a
// server of its own (package mcpserver) whose tools are those of the
// token's role and whose client reaches this very node, in process, under
// the caller's token: every tool call is an API request that this node
// authenticates, forwards to the leader and answers as usual. The session
// keeps its claims' leases; it lives in this node's memory, so a client
// whose node dies connects to another node and finishes a job it holds
// there with the lease_token the claim showed.
//
// /mcp is not an API route (docs/openapi.yaml does not list it): like the
// web UI it is mounted beside them.

// mcpPath is where the MCP server is served.
const mcpPath = "/mcp"

// mcpSessionTimeout closes an MCP session that no request has used for this
// long; its client must start a new one (MCP clients do on a 404).
const mcpSessionTimeout = time.Hour

// mcpEndpoint serves /mcp.
type mcpEndpoint struct {
	s       *Server
	sdk     http.Handler
	schemas *mcp.SchemaCache
	// versions answers the SDK's question, asked of every request, of which
	// protocol versions the server speaks; it serves no session.
	versions *mcp.Server
	local    *http.Client
}

// mcpCaller is an authenticated request's caller; getServer builds its
// session's server once.
type mcpCaller struct {
	role, token string
	srv         *mcp.Server
	err         error
}

type mcpCallerKey struct{}

func (s *Server) mcpRoutes() {
	m := &mcpEndpoint{s: s, schemas: mcp.NewSchemaCache(),
		versions: mcp.NewServer(&mcp.Implementation{Name: "spine"}, nil),
		local:    &http.Client{Transport: localTransport{h: s.Handler()}}}
	sdk := mcp.NewStreamableHTTPHandler(m.getServer, &mcp.StreamableHTTPOptions{
		// Answers are JSON, not event streams: a tool call is one request
		// and one answer, and the server sends nothing unprompted.
		JSONResponse:   true,
		SessionTimeout: mcpSessionTimeout,
	})
	// Every request of a session must carry the token that opened it (the
	// SDK compares the UserID of each request's TokenInfo with the first's).
	m.sdk = auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		sum := sha256.Sum256([]byte(token))
		return &auth.TokenInfo{UserID: hex.EncodeToString(sum[:])}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	s.router.Handle(mcpPath, m)
}

func (m *mcpEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		method = "other"
	}
	m.s.metrics.instrument(method, mcpPath, m.serve)(w, r)
}

func (m *mcpEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	s := m.s
	s.setLeaderHeaders(w)
	role, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if r.Method == http.MethodGet {
		// MCP's optional stream of messages the server sends unprompted:
		// this server sends none (its tools and resources never change).
		w.Header().Set("Allow", "POST, DELETE")
		s.writeError(w, errorf(http.StatusMethodNotAllowed, api.CodeMethodNotAllowed,
			"GET %s: this MCP server sends no messages unprompted; POST requests, DELETE ends a session", mcpPath))
		return
	}
	_, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	caller := &mcpCaller{role: role, token: strings.TrimSpace(tok)}
	m.sdk.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mcpCallerKey{}, caller)))
}

// getServer is the SDK's: the server of a new session (a request without
// a session id), else one that only says which protocol versions the
// node speaks (the SDK asks it of every request; the session's own server
// answers the request).
func (m *mcpEndpoint) getServer(r *http.Request) *mcp.Server {
	if r.Header.Get("Mcp-Session-Id") != "" {
		return m.versions
	}
	caller, _ := r.Context().Value(mcpCallerKey{}).(*mcpCaller)
	if caller == nil {
		return nil // not authenticated by serve: no session
	}
	if caller.srv == nil && caller.err == nil {
		caller.srv, caller.err = m.newServer(r, caller)
		if caller.err != nil {
			m.s.logger.Error("mcp: cannot start a session", "error", caller.err)
		}
	}
	return caller.srv // nil: the SDK answers 400
}

// newServer builds a session's server: the tools of the caller's role, on a
// client of this node under the caller's token.
func (m *mcpEndpoint) newServer(r *http.Request, caller *mcpCaller) (*mcp.Server, error) {
	role := mcpserver.RoleClaw
	if caller.role == RoleHead {
		role = mcpserver.RoleHead
	}
	host := r.Host
	if host == "" {
		host = "localhost"
	}
	// The address only names this node in the client's messages: the
	// transport hands every request to this node's own handler.
	c, err := client.New([]string{"http://" + host}, client.WithToken(caller.token), client.WithHTTPClient(m.local))
	if err != nil {
		return nil, err
	}
	return mcpserver.New(mcpserver.Config{Client: c, Role: role, SchemaCache: m.schemas})
}

// localTransport serves a client's requests with this node's handler, in
// process: the node authenticates, forwards and answers each as it would
// over the network, without a connection to itself (and whatever TLS or
// address it would take to make one).
type localTransport struct{ h http.Handler }

func (t localTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.Host = req.URL.Host
	in.RemoteAddr = "mcp"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := &localResponse{header: http.Header{}}
	t.h.ServeHTTP(rec, in)
	if req.Body != nil {
		req.Body.Close()
	}
	code := rec.code
	if code == 0 {
		code = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: &localBody{Reader: bytes.NewReader(rec.body.Bytes())},
		ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// localResponse records a handler's answer.
type localResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *localResponse) Header() http.Header { return w.header }

func (w *localResponse) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *localResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// Flush does nothing: the answer is handed over whole.
func (w *localResponse) Flush() {}

type localBody struct{ *bytes.Reader }

func (localBody) Close() error { return nil }
