package queue

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// Named tokens: head creates a credential for each agent, with a role,
// optional stream scopes, an optional bound worker id, an optional expiry
// and a note. The secret is drawn here, on the node that takes the create,
// before anything is proposed; the entry carries its sha256 alone, and the
// secret is answered once. Authentication looks the hash up in this node's
// applied state (TokenCaller): a revoke is in force on a node as soon as
// it applied the entry, and the long-lived calls a token holds (long
// polls, event streams, MCP sessions) end then too (Hold).

// TokenSecretPrefix starts every named token's secret, so one is easy to
// recognise (and to tell from an environment token) in a configuration.
const TokenSecretPrefix = "spt_"

// TokenInput is a token create's request.
type TokenInput struct {
	Name     string
	Role     string
	Streams  []string
	WorkerID string
	// ExpiresAt (unix nanoseconds; 0: never) must be in the future.
	ExpiresAt int64
	Note      string
}

// TokenHash is the hex sha256 of a secret, as the state stores it.
func TokenHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// newSecret draws a token's secret: 32 random bytes.
func newSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return TokenSecretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// checkTokenInput refuses a token create that is not valid, in the API's
// terms.
func (s *Service) checkTokenInput(in *TokenInput) error {
	switch {
	case !ValidName(in.Name):
		return invalid("name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	case !fsm.IsTokenRole(in.Role):
		return invalid("role must be one of %s, %s, %s or %s", fsm.HeadRole, fsm.RoleLeftClaw, fsm.RoleRightClaw, fsm.OperatorRole)
	case len(in.Note) > fsm.MaxTokenNote:
		return invalid("note may be at most %d bytes", fsm.MaxTokenNote)
	case len(in.Streams) > fsm.MaxTokenStreams:
		return invalid("streams may name at most %d streams", fsm.MaxTokenStreams)
	case in.ExpiresAt != 0 && in.ExpiresAt <= s.now():
		return invalid("expiresAt must be in the future")
	case in.WorkerID != "" && !fsm.IsClaw(in.Role):
		return invalid("workerId binds a worker's token: only a %s or %s token may carry one", fsm.RoleLeftClaw, fsm.RoleRightClaw)
	}
	for _, st := range in.Streams {
		if !ValidName(st) {
			return invalid("streams: %q is not a stream name (1-128 characters of letters, digits, '_', '.', ':' or '-')", st)
		}
	}
	in.Streams = slices.Compact(slices.Sorted(slices.Values(in.Streams)))
	return CheckWorkerID("workerId", in.WorkerID, false)
}

// CreateToken creates a named token and returns its secret, which is
// never stored and never answered again.
func (s *Service) CreateToken(ctx context.Context, in TokenInput, actor fsm.Actor) (string, *fsm.Token, uint64, error) {
	if err := s.checkTokenInput(&in); err != nil {
		return "", nil, 0, err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return "", nil, 0, ErrUpgradeInProgress
	}
	if len(s.state.Peek().Tokens()) >= fsm.MaxTokens {
		return "", nil, 0, tokenLimit()
	}
	secret, err := newSecret()
	if err != nil {
		return "", nil, 0, err
	}
	res, idx, err := s.Propose(ctx, fsm.CmdTokenCreate, &fsm.TokenCreateCommand{Now: s.now(), Name: in.Name, Hash: TokenHash(secret),
		Role: in.Role, Streams: in.Streams, WorkerID: in.WorkerID, ExpiresAt: in.ExpiresAt, Note: in.Note, Actor: actor})
	if err != nil {
		return "", nil, idx, tokenRefusal(err, in.Name)
	}
	return secret, res.Token, idx, nil
}

// RevokeToken deletes a named token: every node refuses it once it
// applied the entry, and ends the long-lived calls it holds.
func (s *Service) RevokeToken(ctx context.Context, name string, actor fsm.Actor) (*fsm.Token, uint64, error) {
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdTokenRevoke, &fsm.TokenRevokeCommand{Now: s.now(), Name: name, Actor: actor})
	if err != nil {
		return nil, idx, tokenRefusal(err, name)
	}
	return res.Token, idx, nil
}

// tokenRefusal says a token command's refusal in the API's terms.
func tokenRefusal(err error, name string) error {
	var ref *Refusal
	if !errors.As(err, &ref) {
		return err
	}
	switch {
	case errors.Is(err, fsm.ErrNotFound):
		return tokenNotFound(name)
	case errors.Is(err, fsm.ErrExists):
		return fmt.Errorf("a token named %s (or with that secret) exists; revoke it or choose another name: %w", name, fsm.ErrExists)
	case errors.Is(err, fsm.ErrNotAllowed):
		return tokenLimit()
	}
	return err
}

func tokenNotFound(name string) error {
	return fmt.Errorf("no token named %s: %w", name, fsm.ErrNotFound)
}

func tokenLimit() error {
	return &ForbiddenError{Message: fmt.Sprintf("the cluster holds %d named tokens, the most it may; revoke one first", fsm.MaxTokens)}
}

// Tokens lists the named tokens, by name (never a secret).
func (s *Service) Tokens() []*fsm.Token { return s.state.Read().Tokens() }

// Token returns the named token name.
func (s *Service) Token(name string) (*fsm.Token, error) {
	if tk := s.state.Peek().TokenNamed(name); tk != nil {
		return tk, nil
	}
	return nil, tokenNotFound(name)
}

// ErrTokenRefused is a named token this node does not accept: unknown,
// revoked or expired.
var ErrTokenRefused = errors.New("token refused")

// ErrTokenUnknown is a secret no named token in this node's applied state
// has (it is ErrTokenRefused too).
var ErrTokenUnknown = fmt.Errorf("%w: invalid token", ErrTokenRefused)

// TokenCaller is the caller a secret authenticates as, from this node's
// applied state: ErrTokenRefused for a secret no named token has, and
// for an expired one (by this node's clock).
func (s *Service) TokenCaller(secret string) (Caller, error) {
	tk := s.state.Peek().TokenByHash(TokenHash(secret))
	if tk == nil {
		return Caller{}, ErrTokenUnknown
	}
	if tk.ExpiresAt != 0 && s.now() >= tk.ExpiresAt {
		return Caller{}, fmt.Errorf("%w: token %s expired", ErrTokenRefused, tk.Name)
	}
	return CallerOf(tk), nil
}

// TokenCallerAfter is TokenCaller once this node has applied index (a
// follower catching up with a leader that accepted the secret); a wait
// that does not get there refuses the secret as unknown.
func (s *Service) TokenCallerAfter(ctx context.Context, secret string, index uint64) (Caller, error) {
	if err := s.cluster.WaitForApplied(ctx, index); err != nil {
		return Caller{}, ErrTokenUnknown
	}
	return s.TokenCaller(secret)
}

// CallerOf is the caller a named token makes.
func CallerOf(tk *fsm.Token) Caller {
	return Caller{Role: tk.Role, Token: tk.Name, Streams: tk.Streams, WorkerID: tk.WorkerID, ExpiresAt: tk.ExpiresAt, index: tk.Index}
}

// tokenCalls is the node's registry of open long-lived calls by token:
// each is cancelled when the applied state no longer has its token (a
// revoke), or the token expires.
type tokenCalls struct {
	mu      sync.Mutex
	calls   map[string]map[*heldCall]struct{}
	started bool
	// kick wakes the watcher when a call with an expiry is held (its
	// timer may need to fire sooner).
	kick chan struct{}
}

type heldCall struct {
	index     uint64 // the token's create entry: a name made again is another token
	expiresAt int64
	cancel    context.CancelCauseFunc
}

// ErrTokenRevoked ends a long-lived call whose token was revoked or expired.
var ErrTokenRevoked = errors.New("the token of this call was revoked or expired")

// Hold registers a long-lived call (a long poll, an event stream, an MCP
// session) of c: the context returned ends, with cause ErrTokenRevoked,
// once this node applied the revoke of c's token or it expires. release
// unregisters it. A caller of an environment token holds nothing.
func (s *Service) Hold(ctx context.Context, c Caller) (context.Context, func()) {
	if c.Token == "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	h := &heldCall{index: c.index, expiresAt: c.ExpiresAt, cancel: cancel}
	tc := &s.held
	tc.mu.Lock()
	if tc.calls == nil {
		tc.calls = map[string]map[*heldCall]struct{}{}
	}
	if tc.calls[c.Token] == nil {
		tc.calls[c.Token] = map[*heldCall]struct{}{}
	}
	tc.calls[c.Token][h] = struct{}{}
	if !tc.started {
		tc.started, tc.kick = true, make(chan struct{}, 1)
		go s.watchTokens(tc.kick)
	}
	if h.expiresAt != 0 {
		select {
		case tc.kick <- struct{}{}:
		default:
		}
	}
	tc.mu.Unlock()
	// A revoke applied between the authentication and the registration
	// ends the call at once (the watcher sees only later changes).
	if tk := s.state.Peek().TokenNamed(c.Token); tk == nil || tk.Index != c.index {
		cancel(ErrTokenRevoked)
	}
	return ctx, func() {
		tc.mu.Lock()
		if set := tc.calls[c.Token]; set != nil {
			delete(set, h)
			if len(set) == 0 {
				delete(tc.calls, c.Token)
			}
		}
		tc.mu.Unlock()
		cancel(nil)
	}
}

// watchTokens ends held calls as the applied tokens change, and at the
// earliest expiry among them.
func (s *Service) watchTokens(kick <-chan struct{}) {
	changes, _ := s.state.(interface{ TokensChanged() <-chan struct{} })
	for {
		var ch <-chan struct{}
		if changes != nil {
			ch = changes.TokensChanged()
		}
		wait := time.Duration(1<<62 - 1)
		if changes == nil {
			wait = 100 * time.Millisecond
		}
		if next := s.sweepHeld(); next != 0 {
			wait = min(wait, time.Duration(next-s.now()))
		}
		t := time.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ch:
		case <-kick:
		case <-t.C:
		case <-s.draining.Done():
			t.Stop()
			s.sweepHeld()
			return
		}
		t.Stop()
	}
}

// sweepHeld cancels the held calls whose token is gone or expired and
// returns the earliest expiry of the rest (0: none).
func (s *Service) sweepHeld() int64 {
	tc := &s.held
	tc.mu.Lock()
	defer tc.mu.Unlock()
	r := s.state.Peek()
	now := s.now()
	var next int64
	for name, set := range tc.calls {
		tk := r.TokenNamed(name)
		for h := range set {
			switch {
			case tk == nil || tk.Index != h.index:
				h.cancel(ErrTokenRevoked)
				delete(set, h)
			case h.expiresAt != 0 && now >= h.expiresAt:
				h.cancel(ErrTokenRevoked)
				delete(set, h)
			case h.expiresAt != 0 && (next == 0 || h.expiresAt < next):
				next = h.expiresAt
			}
		}
		if len(set) == 0 {
			delete(tc.calls, name)
		}
	}
	return next
}
