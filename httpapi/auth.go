package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"net/http"
	"strings"

	"github.com/spine-queue/spine/api"
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

// authenticate returns the caller's role from the Authorization header.
func (s *Server) authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", errorf(http.StatusUnauthorized, api.CodeUnauthorized, "missing Authorization: Bearer <token> header")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", errorf(http.StatusUnauthorized, api.CodeUnauthorized, "Authorization header must be 'Bearer <token>'")
	}
	role := s.cfg.Tokens.Role(strings.TrimSpace(tok))
	if role == "" {
		return "", errorf(http.StatusUnauthorized, api.CodeUnauthorized, "invalid token")
	}
	return role, nil
}

// allow says which roles may call a route.
type allow uint8

const (
	allowHead allow = 1 << iota
	allowClaws
	allowPublic
	allowAll = allowHead | allowClaws
)

func (a allow) permits(role string) bool {
	switch {
	case role == RoleHead:
		return a&allowHead != 0
	case isClaw(role):
		return a&allowClaws != 0
	}
	return false
}

func forbidden(role, what string) error {
	return errorf(http.StatusForbidden, api.CodeForbidden, "role %s may not %s", role, what)
}
