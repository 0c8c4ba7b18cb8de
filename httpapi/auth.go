package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"net/http"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/queue"
)

// Roles a token can have.
const (
	RoleHead      = "head"
	RoleLeftClaw  = "left_claw"
	RoleRightClaw = "right_claw"
)

// Tokens maps each accepted bearer token to its role. Several tokens may
// share a role (rotation).
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum  [32]byte
	role string
}

// Add accepts token for role. Empty tokens are ignored.
func (t *Tokens) Add(role, token string) {
	token = strings.TrimSpace(token)
	if token == "" {
		return
	}
	t.entries = append(t.entries, tokenEntry{sum: sha256.Sum256([]byte(token)), role: role})
}

// check refuses a token configured for two roles: which role it carries
// would depend on configuration order.
func (t *Tokens) check() error {
	for i, a := range t.entries {
		for _, b := range t.entries[i+1:] {
			if a.sum == b.sum && a.role != b.role {
				return fmt.Errorf("httpapi: one token is configured for both %s and %s; give each role its own tokens", a.role, b.role)
			}
		}
	}
	return nil
}

// AddCSV accepts every token of a comma-separated list for role.
func (t *Tokens) AddCSV(role, csv string) {
	for _, tok := range strings.Split(csv, ",") {
		t.Add(role, tok)
	}
}

// Len is the number of accepted tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Role returns the role of token, or "" if no role has it. Every entry is
// compared, in constant time, so timing reveals nothing about which (or
// whether one) matched.
func (t *Tokens) Role(token string) string {
	sum := sha256.Sum256([]byte(token))
	role := ""
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			role = e.role
		}
	}
	return role
}

// Has reports whether some token of role is configured.
func (t *Tokens) Has(role string) bool {
	for _, e := range t.entries {
		if e.role == role {
			return true
		}
	}
	return false
}

func isClaw(role string) bool { return role == RoleLeftClaw || role == RoleRightClaw }

// authenticate returns the caller the Authorization header's token makes:
// an environment token's role (the bootstrap), else a named token's, from
// this node's applied state (queue.Service.TokenCaller: a revoked token is
// refused as soon as this node applied the revoke, an expired one by this
// node's clock), or, for one this follower has not applied yet, the
// leader's (namedCaller).
func (s *Server) authenticate(r *http.Request) (queue.Caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return queue.Caller{}, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "missing Authorization: Bearer <token> header")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return queue.Caller{}, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "Authorization header must be 'Bearer <token>'")
	}
	return s.callerOf(r, strings.TrimSpace(tok))
}

// callerOf is the caller a bearer token makes.
func (s *Server) callerOf(r *http.Request, tok string) (queue.Caller, error) {
	if role := s.cfg.Tokens.Role(tok); role != "" {
		return queue.RoleCaller(role), nil
	}
	c, err := s.namedCaller(r, tok)
	if err != nil {
		return queue.Caller{}, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%s", strings.TrimPrefix(err.Error(), queue.ErrTokenRefused.Error()+": "))
	}
	return c, nil
}

// allow says which roles may call a route.
type allow uint8

const (
	allowHead allow = 1 << iota
	allowClaws
	allowPublic
	// allowGlobal marks a route about the whole cluster, not streams and
	// their jobs: no stream-scoped token calls it (queue.Caller.MayCall).
	allowGlobal
	allowAll = allowHead | allowClaws
)

// permits says whether caller c may call a route of this allow, by the
// route's method (write: anything but GET): queue.Caller.MayCall decides.
func (a allow) permits(c queue.Caller, method string) bool {
	return c.MayCall(a&allowHead != 0, a&allowClaws != 0, method != http.MethodGet && method != http.MethodHead, a&allowGlobal != 0)
}

// permitsRoute is permits for a route named "METHOD /path" (an MCP
// tool's).
func (s *Server) permitsRoute(c queue.Caller, route string) bool {
	method, _, _ := strings.Cut(route, " ")
	return s.allowed[route].permits(c, method)
}

func forbidden(c queue.Caller, what string) error {
	if c.Scoped() {
		return errorf(http.StatusForbidden, api.CodeForbidden, "token %s (role %s, scoped to streams %s) may not %s",
			c.Token, c.Role, strings.Join(c.Streams, ", "), what)
	}
	if c.ReadOnly() {
		return errorf(http.StatusForbidden, api.CodeForbidden, "token %s is read-only (role %s): it may not %s", c.Token, c.Role, what)
	}
	return errorf(http.StatusForbidden, api.CodeForbidden, "role %s may not %s", c.Role, what)
}
