package httpapi

import (
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// Named tokens (queue/tokens.go): head creates, lists and revokes them;
// any caller asks who it is.

func (s *Server) tokenRoutes() {
	s.route("POST", "/v1/tokens", kindWrite, allowHead|allowGlobal, s.handleTokenCreate)
	s.route("GET", "/v1/tokens", kindRead, allowHead|allowGlobal, s.handleTokenList)
	s.route("GET", "/v1/tokens/{name}", kindRead, allowHead|allowGlobal, s.handleTokenGet)
	s.route("DELETE", "/v1/tokens/{name}", kindWrite, allowHead|allowGlobal, s.handleTokenRevoke)
	s.route("GET", whoAmIPath, kindLocal, allowAll, s.handleWhoAmI)
}

func viewToken(tk *fsm.Token, now int64) api.Token {
	return api.Token{Name: tk.Name, Role: tk.Role, Streams: tk.Streams, WorkerID: tk.WorkerID, ExpiresAt: api.Time(tk.ExpiresAt),
		Expired: tk.ExpiresAt != 0 && now >= tk.ExpiresAt, Note: tk.Note, CreatedAt: api.Time(tk.CreatedAt), CreatedBy: tk.CreatedBy}
}

func (s *Server) handleTokenCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TokenCreateRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	created, idx, err := s.createToken(r, c.caller, &req)
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, created)
	return nil
}

// createToken is a token create (the route's and the MCP tool's).
func (s *Server) createToken(r *http.Request, caller queue.Caller, req *api.TokenCreateRequest) (*api.TokenCreated, uint64, error) {
	in := queue.TokenInput{Name: req.Name, Role: req.Role, Streams: req.Streams, WorkerID: req.WorkerID, Note: req.Note}
	switch {
	case req.ExpiresInSeconds < 0:
		return nil, 0, badRequest("expiresInSeconds must be positive")
	case req.ExpiresInSeconds > 0 && !req.ExpiresAt.IsZero():
		return nil, 0, badRequest("give expiresAt or expiresInSeconds, not both")
	case req.ExpiresInSeconds > 100*365*24*3600:
		return nil, 0, badRequest("expiresInSeconds may be at most 100 years")
	case req.ExpiresInSeconds > 0:
		in.ExpiresAt = s.queue.Now() + req.ExpiresInSeconds*int64(time.Second)
	case !req.ExpiresAt.IsZero() && (req.ExpiresAt.Year() >= 2200 || req.ExpiresAt.Unix() <= 0):
		return nil, 0, badRequest("expiresAt must be a time in the future, before the year 2200")
	case !req.ExpiresAt.IsZero():
		in.ExpiresAt = req.ExpiresAt.UnixNano()
	}
	secret, tk, idx, err := s.queue.CreateToken(r.Context(), in, caller.Actor(""))
	if err != nil {
		return nil, idx, err
	}
	return &api.TokenCreated{Token: viewToken(tk, s.queue.Now()), Secret: secret}, idx, nil
}

func (s *Server) handleTokenList(w http.ResponseWriter, r *http.Request, c *call) error {
	out := api.TokenList{Tokens: []api.Token{}, Max: fsm.MaxTokens}
	now := s.queue.Now()
	for _, tk := range s.queue.Tokens() {
		out.Tokens = append(out.Tokens, viewToken(tk, now))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleTokenGet(w http.ResponseWriter, r *http.Request, c *call) error {
	tk, err := s.queue.Token(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewToken(tk, s.queue.Now()))
	return nil
}

func (s *Server) handleTokenRevoke(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct{}
	if err := decode(c, &req); err != nil {
		return err
	}
	tk, idx, err := s.queue.RevokeToken(r.Context(), r.PathValue("name"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewToken(tk, s.queue.Now()))
	return nil
}

// whoAmIPath is who a caller's token makes it; its answer's X-Spine-Index
// is the state that accepted the token (a follower's lookup of a token it
// has not applied yet waits for it: tokenlookup.go).
const whoAmIPath = "/v1/whoami"

func (s *Server) handleWhoAmI(w http.ResponseWriter, r *http.Request, c *call) error {
	s.setIndex(w, s.cluster.AppliedIndex())
	writeJSON(w, http.StatusOK, whoAmI(c.caller))
	return nil
}

func whoAmI(c queue.Caller) api.WhoAmI {
	return api.WhoAmI{Role: c.Role, Token: c.Token, Streams: c.Streams, WorkerID: c.WorkerID, ExpiresAt: api.Time(c.ExpiresAt), ReadOnly: c.ReadOnly()}
}
