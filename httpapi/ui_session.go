package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/queue"
)

// The web UI's login session: a cookie every node can check without
// shared state. It names a role, an expiry and a random nonce, signed with
// HMAC-SHA256 keyed by the digest of the token that logged in, so it is
// valid on every node configured with that token, survives any node's
// death, and dies with the token (rotating a token out logs its sessions
// out). Forms carry a CSRF token derived the same way from the session's
// nonce, checked on every POST besides the cookie's SameSite=Strict.

const (
	sessionCookie = "spine_session"
	sessionTTL    = 12 * time.Hour
)

// uiSession is a checked session.
type uiSession struct {
	role  string
	nonce string
	key   [32]byte // the digest of the token it was made with
	// caller is the session's: its role's, or its named token's (a
	// session of a named token names it, and ends with it).
	caller queue.Caller
}

func sessionMAC(key [32]byte, kind, msg string) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte("spine-ui-" + kind + "\x00" + msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns the cookie value of a session of the token's role
// (its digest key), valid until exp.
func newSession(role string, key [32]byte, exp time.Time, token string) (string, error) {
	var n [16]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", err
	}
	payload := role + "|" + strconv.FormatInt(exp.Unix(), 10) + "|" + base64.RawURLEncoding.EncodeToString(n[:])
	if token != "" {
		payload += "|" + token
	}
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + sessionMAC(key, "session", payload), nil
}

// session checks r's session cookie against the configured tokens.
func (s *Server) session(r *http.Request, now time.Time) (*uiSession, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, fmt.Errorf("not logged in")
	}
	enc, mac, ok := strings.Cut(ck.Value, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		return nil, fmt.Errorf("malformed session")
	}
	payload := string(raw)
	parts := strings.Split(payload, "|")
	if len(parts) != 3 && len(parts) != 4 {
		return nil, fmt.Errorf("malformed session")
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() >= exp {
		return nil, fmt.Errorf("session expired")
	}
	if len(parts) == 4 {
		// A named token's session: valid while the token is, on the node's
		// applied state (revoked or expired, it ends).
		tk := s.queue.Local().TokenNamed(parts[3])
		var key [32]byte
		if tk == nil || tk.Role != parts[0] || hex.DecodedLen(len(tk.Hash)) != len(key) {
			return nil, fmt.Errorf("session not valid (its token was revoked)")
		}
		if _, err := hex.Decode(key[:], []byte(tk.Hash)); err != nil || !hmac.Equal([]byte(mac), []byte(sessionMAC(key, "session", payload))) {
			return nil, fmt.Errorf("session not valid (its token was revoked)")
		}
		if tk.ExpiresAt != 0 && s.queue.Now() >= tk.ExpiresAt {
			return nil, fmt.Errorf("session not valid (its token expired)")
		}
		c := queue.CallerOf(tk)
		return &uiSession{role: c.ViewRole(), nonce: parts[2], key: key, caller: c}, nil
	}
	for _, e := range s.cfg.Tokens.entries {
		if e.role == parts[0] && hmac.Equal([]byte(mac), []byte(sessionMAC(e.sum, "session", payload))) {
			return &uiSession{role: e.role, nonce: parts[2], key: e.sum, caller: queue.RoleCaller(e.role)}, nil
		}
	}
	return nil, fmt.Errorf("session not valid (its token was rotated out?)")
}

// csrf is the token forms of this session carry.
func (u *uiSession) csrf() string { return sessionMAC(u.key, "csrf", u.nonce) }

// checkCSRF reports whether a form's token is this session's.
func (u *uiSession) checkCSRF(token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(u.csrf()))
}

// tokenKey returns the role and digest of a configured token.
func (t *Tokens) tokenKey(token string) (string, [32]byte) {
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	role := t.Role(strings.TrimSpace(token))
	return role, sum
}

// uiNext returns where the login form sends the browser once it has logged
// in: next if it is a plain path under /ui/ on this node, else /ui/. A
// browser resolves "/\evil.com" or "//evil.com" to another host, and the
// redirect cleans "/ui/../" away, so next is refused unless it is a clean
// path after decoding: no scheme or host, no backslash, no empty segment,
// no control character, and still under /ui/ once cleaned. Its query is
// kept; a fragment is dropped.
func uiNext(next string) string {
	const home = "/ui/"
	if next == "" || len(next) > 2048 || strings.ContainsAny(next, "\\") {
		return home
	}
	for _, c := range next {
		if c < 0x20 || c == 0x7f {
			return home
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" || !strings.HasPrefix(next, "/") {
		return home
	}
	p := u.Path
	if strings.ContainsAny(p, "\\") || strings.Contains(p, "//") {
		return home
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f {
			return home
		}
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p || !strings.HasPrefix(clean, home) {
		return home
	}
	return (&url.URL{Path: clean, RawQuery: u.RawQuery}).String()
}
