package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/mcpserver"
	"github.com/spine-queue/spine/queue"
)

// The node's MCP server (docs/mcp.md): /mcp speaks MCP's streamable HTTP
// transport, with a bearer token as on the API. Each MCP session gets a
// server of its own (package mcpserver) whose tools are those of the
// token's role and whose backend (mcpBackend) calls this node's queue as
// the token's role, the request that carries the call being authenticated
// here: a tool call runs the code of its API route, on the leader (a
// follower sends it there). The session keeps its claims' leases; it lives
// in this node's memory, so a client whose node dies connects to another
// node and finishes a job it holds there with the lease_token the claim
// showed.
//
// /mcp is not an API route (docs/openapi.yaml does not list it): like the
// web UI it is mounted beside them.

// mcpPath is where the MCP server is served.
const mcpPath = "/mcp"

// MCP sessions are bounded (docs/mcp.md): each holds its server, its
// backend and its leases in this node's memory, so a token may open only so
// many, the node only so many in all, and one no request used for a while
// ends by itself.
const (
	// DefaultMCPSessionsPerToken is how many MCP sessions one token may
	// have open on a node.
	DefaultMCPSessionsPerToken = 100
	// DefaultMCPSessions is how many MCP sessions a node keeps open in all.
	DefaultMCPSessions = 500
	// DefaultMCPSessionIdle ends an MCP session no request has used for
	// this long; its client starts a new one (MCP clients do on a 404).
	DefaultMCPSessionIdle = 10 * time.Minute
	// mcpRetryAfter is the Retry-After of a session refused for the limit.
	mcpRetryAfter = 60
)

// MCPLimits bound the MCP sessions of /mcp. Zero values take the defaults.
type MCPLimits struct {
	// PerToken caps the sessions one token has open on this node.
	PerToken int
	// Total caps the sessions open on this node.
	Total int
	// Idle ends a session no request used for this long.
	Idle time.Duration
}

// mcpEndpoint serves /mcp.
type mcpEndpoint struct {
	s       *Server
	sdk     http.Handler
	schemas *mcp.SchemaCache
	// versions answers the SDK's question, asked of every request, of which
	// protocol versions the server speaks; it serves no session.
	versions *mcp.Server
	limits   MCPLimits
	sessions mcpSessions
	// built counts the session servers built (each holds a session's
	// tools, backend and leases).
	built atomic.Int64
}

// mcpCaller is an authenticated request's caller; getServer builds its
// session's server once.
type mcpCaller struct {
	caller      queue.Caller
	role, token string
	// user is the token's digest: whose sessions these are.
	user string
	srv  *mcp.Server
	err  error
}

type mcpCallerKey struct{}

func (s *Server) mcpRoutes() {
	lim := s.cfg.MCP
	if lim.PerToken <= 0 {
		lim.PerToken = DefaultMCPSessionsPerToken
	}
	if lim.Total <= 0 {
		lim.Total = DefaultMCPSessions
	}
	if lim.Idle <= 0 {
		lim.Idle = DefaultMCPSessionIdle
	}
	m := &mcpEndpoint{s: s, schemas: mcp.NewSchemaCache(),
		versions: mcp.NewServer(&mcp.Implementation{Name: "spine"}, nil),
		limits:   lim, sessions: mcpSessions{perToken: map[string]int{}}}
	sdk := mcp.NewStreamableHTTPHandler(m.getServer, &mcp.StreamableHTTPOptions{
		// Answers are JSON, not event streams: a tool call is one request
		// and one answer, and the server sends nothing unprompted.
		JSONResponse:   true,
		SessionTimeout: lim.Idle,
	})
	// Every request of a session must carry the token that opened it (the
	// SDK compares the UserID of each request's TokenInfo with the first's).
	m.sdk = auth.RequireBearerToken(func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: tokenUser(token)}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(sdk)
	s.mcp = m
	s.router.Handle(mcpPath, m)
}

// tokenUser is the digest that stands for a token in the session registry.
func tokenUser(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
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
	who, err := s.authenticate(r)
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
	tok = strings.TrimSpace(tok)
	caller := &mcpCaller{caller: who, role: who.ViewRole(), token: tok, user: tokenUser(tok)}
	if r.Method == http.MethodPost && isJSON(r.Header.Get("Content-Type")) {
		// The body is read here, not by the SDK, to refuse what is not a
		// JSON-RPC message in JSON-RPC's terms (the SDK's answers name Go
		// types); the SDK reads it again from memory.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			s.writeError(w, err)
			return
		}
		if e := checkRPC(body); e != nil {
			writeRPCError(w, http.StatusBadRequest, e)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	// A POST without a session id starts a session: it takes a place among
	// the token's and the node's, given back when the session ends.
	var slot *mcpSlot
	if r.Method == http.MethodPost && r.Header.Get(mcpSessionHeader) == "" {
		var err error
		if slot, err = m.sessions.reserve(caller.user, m.limits); err != nil {
			w.Header().Set("Retry-After", strconv.Itoa(mcpRetryAfter))
			s.writeError(w, err)
			return
		}
	}
	ew := &mcpErrorWriter{ResponseWriter: w, s: s, r: r, idle: m.limits.Idle}
	m.sdk.ServeHTTP(ew, r.WithContext(context.WithValue(r.Context(), mcpCallerKey{}, caller)))
	ew.finish()
	if slot != nil {
		m.sessions.settle(slot, caller.srv)
		m.holdSession(caller)
	}
}

// holdSession ends the session a named token's request opened once the
// token is revoked or expires (queue.Service.Hold).
func (m *mcpEndpoint) holdSession(caller *mcpCaller) {
	if caller.caller.Token == "" || caller.srv == nil {
		return
	}
	for sess := range caller.srv.Sessions() {
		ctx, release := m.s.queue.Hold(context.Background(), caller.caller)
		go func() {
			_ = sess.Wait()
			release()
		}()
		go func() {
			<-ctx.Done()
			if errors.Is(context.Cause(ctx), queue.ErrTokenRevoked) {
				_ = sess.Close()
			}
		}()
		return
	}
}

// getServer is the SDK's: the server of a new session (a request without
// a session id), else one that only says which protocol versions the
// node speaks (the SDK asks it of every request; the session's own server
// answers the request).
func (m *mcpEndpoint) getServer(r *http.Request) *mcp.Server {
	if r.Header.Get(mcpSessionHeader) != "" {
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

// newServer builds a session's server: the tools of the caller's role, on
// this node's queue as the caller (mcpBackend).
func (m *mcpEndpoint) newServer(r *http.Request, caller *mcpCaller) (*mcp.Server, error) {
	m.built.Add(1)
	role := mcpserver.RoleClaw
	if caller.role == RoleHead {
		// (The read-only operator gets head's tools; each call of a tool
		// that writes is refused as the route would be.)
		role = mcpserver.RoleHead
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	// The session outlives the request that opened it: the backend keeps
	// a copy of its address and headers, without its body.
	req := r.Clone(context.Background())
	req.Body, req.ContentLength = http.NoBody, 0
	b := &mcpBackend{s: m.s, caller: caller.caller, role: caller.role, token: caller.token, self: scheme + r.Host, req: req}
	return mcpserver.New(mcpserver.Config{Backend: b, Role: role, SchemaCache: m.schemas, SessionIdle: m.limits.Idle})
}
