package fsm

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Named tokens: a credential for each agent, which head creates and
// revokes. The state holds each token's name, role, scopes, bound worker
// id, expiry and note, and the hash (sha256, hex) of its secret; never the
// secret, which the node that takes the create draws before it proposes
// and answers once. A revoke deletes the token: every node refuses it as
// soon as it applies the entry. From LevelPolicies on.

// Command types of named tokens (50-52; 52 is reserved).
const (
	CmdTokenCreate CommandType = 50
	CmdTokenRevoke CommandType = 51
)

// OperatorRole is the read-only operator's role: it may read everything
// head may read and change nothing. Only a named token carries it.
const OperatorRole = "operator"

// IsTokenRole reports whether role is one a named token may carry.
func IsTokenRole(role string) bool { return role == HeadRole || IsClaw(role) || role == OperatorRole }

// MaxTokens bounds the named tokens a cluster holds.
const MaxTokens = 1000

// MaxTokenNote bounds a token's note, in bytes.
const MaxTokenNote = 1024

// MaxTokenStreams bounds a token's stream scopes.
const MaxTokenStreams = 64

// Token is one named token.
type Token struct {
	Name string
	// Hash is the hex sha256 of the secret.
	Hash string
	Role string
	// Streams, when set, are the only streams the token sees, claims from
	// and creates in.
	Streams []string
	// WorkerID, when set, is the only worker the token acts as.
	WorkerID string
	// ExpiresAt (unix nanoseconds), when set, is when the token stops
	// being accepted (checked against the authenticating node's clock).
	ExpiresAt int64
	Note      string
	CreatedAt int64
	CreatedBy string
	Index     uint64
}

func (tk *Token) fields(f *fields) {
	f.str(1, &tk.Name)
	f.str(2, &tk.Hash)
	f.istr(3, &tk.Role)
	f.strs(4, &tk.Streams)
	f.str(5, &tk.WorkerID)
	f.i64(6, &tk.ExpiresAt)
	f.str(7, &tk.Note)
	f.i64(8, &tk.CreatedAt)
	f.istr(9, &tk.CreatedBy)
	f.u64(10, &tk.Index)
}

// TokenCreateCommand adds a named token.
type TokenCreateCommand struct {
	Now       int64
	Name      string
	Hash      string
	Role      string
	Streams   []string
	WorkerID  string
	ExpiresAt int64
	Note      string
	Actor     Actor
}

// TokenRevokeCommand deletes a named token.
type TokenRevokeCommand struct {
	Now   int64
	Name  string
	Actor Actor
}

func init() {
	register(CmdTokenCreate, "token-create", func() command { return new(TokenCreateCommand) })
	register(CmdTokenRevoke, "token-revoke", func() command { return new(TokenRevokeCommand) })
}

func (c *TokenCreateCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.str(3, &c.Hash)
	f.istr(4, &c.Role)
	f.strs(5, &c.Streams)
	f.str(6, &c.WorkerID)
	f.i64(7, &c.ExpiresAt)
	f.str(8, &c.Note)
	f.actor(9, &c.Actor)
}

func (c *TokenRevokeCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.actor(3, &c.Actor)
}

func (c *TokenCreateCommand) apply(a *applier) *Result {
	switch {
	case a.t.level < LevelPolicies:
		return fail(fmt.Errorf("token create: %w: named tokens need level %d", ErrInvalid, LevelPolicies))
	case c.Name == "" || len(c.Hash) != 64 || !IsTokenRole(c.Role) || len(c.Note) > MaxTokenNote || len(c.Streams) > MaxTokenStreams:
		return fail(fmt.Errorf("token create: %w: a name, a sha256 hash and a token role are required", ErrInvalid))
	case a.t.tokens.get(c.Name) != nil:
		return fail(fmt.Errorf("token %s: %w", c.Name, ErrExists))
	case a.t.tokenHashes.get(c.Hash) != nil:
		return fail(fmt.Errorf("token create: %w: that secret is another token's", ErrExists))
	case a.t.tokens.len() >= MaxTokens:
		return fail(fmt.Errorf("token create: %w: the cluster holds %d named tokens, the most it may", ErrNotAllowed, MaxTokens))
	}
	tk := &Token{Name: c.Name, Hash: c.Hash, Role: c.Role, Streams: slices.Clone(c.Streams), WorkerID: c.WorkerID,
		ExpiresAt: c.ExpiresAt, Note: c.Note, CreatedAt: c.Now, CreatedBy: a.in.actor(c.Actor), Index: a.index}
	a.putToken(tk)
	return &Result{Token: tk}
}

func (c *TokenRevokeCommand) apply(a *applier) *Result {
	if a.t.level < LevelPolicies {
		return fail(fmt.Errorf("token revoke: %w: named tokens need level %d", ErrInvalid, LevelPolicies))
	}
	tk := a.t.tokens.get(c.Name)
	if tk == nil {
		return fail(fmt.Errorf("token %s: %w", c.Name, ErrNotFound))
	}
	deleteIn(a.writer, tTokens, a.t.tokens, tk.Name)
	deleteIn(a.writer, tTokens, a.t.tokenHashes, tk.Hash)
	a.tokensChanged = true
	return &Result{Token: tk}
}

// putToken stores tk under its name and its hash.
func (w *writer) putToken(tk *Token) {
	putIn(w, tTokens, w.t.tokens, tk.Name, tk)
	putIn(w, tTokens, w.t.tokenHashes, tk.Hash, tk)
	w.tokensChanged = true
}

// TokenByHash returns the named token whose secret hashes to hash (hex),
// or nil, from the latest state this node applied.
func (r *Reader) TokenByHash(hash string) *Token {
	var tk *Token
	r.point(func(t *tables) { tk = t.tokenHashes.get(hash) })
	return tk
}

// TokenNamed returns the named token name, or nil.
func (r *Reader) TokenNamed(name string) *Token {
	var tk *Token
	r.point(func(t *tables) { tk = t.tokens.get(name) })
	return tk
}

// Tokens returns every named token, by name.
func (r *Reader) Tokens() []*Token {
	var out []*Token
	r.point(func(t *tables) {
		t.tokens.ascend(func(tk *Token) bool { out = append(out, tk); return true })
	})
	return out
}

// tokenWatch tells the service when the named tokens change: the channel
// TokensChanged returns is closed after an applied batch or a restore
// changed them.
type tokenWatch struct {
	mu sync.Mutex
	ch chan struct{}
}

// TokensChanged returns a channel closed the next time the applied named
// tokens change (a create, a revoke or a restore).
func (f *FSM) TokensChanged() <-chan struct{} {
	f.tokWatch.mu.Lock()
	defer f.tokWatch.mu.Unlock()
	if f.tokWatch.ch == nil {
		f.tokWatch.ch = make(chan struct{})
	}
	return f.tokWatch.ch
}

func (f *FSM) tokensFired() {
	f.tokWatch.mu.Lock()
	defer f.tokWatch.mu.Unlock()
	if f.tokWatch.ch != nil {
		close(f.tokWatch.ch)
		f.tokWatch.ch = nil
	}
}

// actorTokens holds, per command type, the index path of its Actor's
// Token field (nil: the command carries no actor), found once.
var (
	actorTokensOnce sync.Once
	actorTokens     [256][]int
)

// actorToken is the token name the command's actor carries, for the
// events it records (commands without an actor carry none).
func actorToken(t CommandType, cmd command) string {
	actorTokensOnce.Do(func() {
		at := reflect.TypeOf(Actor{})
		tok, _ := at.FieldByName("Token")
		for i, row := range commandTable {
			if row == nil {
				continue
			}
			if sf, ok := row.typ.FieldByName("Actor"); ok && sf.Type == at {
				actorTokens[i] = append(slices.Clone(sf.Index), tok.Index...)
			}
		}
	})
	idx := actorTokens[t]
	if idx == nil {
		return ""
	}
	v := reflect.ValueOf(cmd)
	if v.Kind() != reflect.Pointer || v.Elem().Type() != commandTable[t].typ {
		return ""
	}
	return v.Elem().FieldByIndex(idx).String()
}

// stampToken names the applying command's token on the events a change
// of a job added (old: the version it replaces, nil for a new job), in
// their actor (TokenSep).
func (a *applier) stampToken(old, j *Job) {
	if a.token == "" || a.t.level < LevelPolicies {
		return
	}
	from := 0
	if old != nil {
		from = old.NumEvents()
	}
	if c := j.creator.String(); from == 0 && c != "" && !strings.Contains(c, TokenSep) {
		j.creator = IdentOf(c + TokenSep + a.token)
	}
	h := j.events() // j is the apply's own, its trail open
	for i := max(from-j.virtualCreated(), 0); i < len(h); i++ {
		if ev := &h[i]; !strings.Contains(ev.Actor, TokenSep) {
			ev.Actor = a.in.str(ev.Actor + TokenSep + a.token)
		}
	}
}

// The positional forms (of builds before LevelTagged, which never write
// these commands; kept so every command has both forms).

func (c *TokenCreateCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.Name)
	e.str(c.Hash)
	e.str(c.Role)
	e.strs(c.Streams)
	e.str(c.WorkerID)
	e.varint(c.ExpiresAt)
	e.str(c.Note)
	e.actor(c.Actor)
}

func (c *TokenCreateCommand) decode(d *dec) {
	c.Now, c.Name, c.Hash, c.Role = d.varint(), d.str(), d.str(), d.istr()
	c.Streams, c.WorkerID, c.ExpiresAt, c.Note = d.strs(), d.str(), d.varint(), d.str()
	c.Actor = d.actor()
}

func (c *TokenRevokeCommand) encode(e *enc) { e.varint(c.Now); e.str(c.Name); e.actor(c.Actor) }
func (c *TokenRevokeCommand) decode(d *dec) { c.Now, c.Name, c.Actor = d.varint(), d.str(), d.actor() }
