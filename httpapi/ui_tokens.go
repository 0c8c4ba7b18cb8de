package httpapi

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// The web UI's tokens page (head's; the read-only operator may look): the
// named tokens, a form that creates one and shows its secret once, and a
// revoke button for each.

func (s *Server) uiTokenRoutes() {
	s.uiRoute("GET /ui/tokens", kindRead, allowHead|allowGlobal, s.uiTokens)
	s.uiRoute("POST /ui/tokens", kindWrite, allowHead|allowGlobal, s.uiTokenCreate)
	s.uiRoute("POST /ui/tokens/{name}/revoke", kindWrite, allowHead|allowGlobal, s.uiTokenRevoke)
}

type tokensData struct {
	Tokens []*fsm.Token
	Now    int64
	Max    int
	// Created is the token just created, with its secret (shown once).
	Created *api.TokenCreated
}

func (s *Server) uiTokens(w http.ResponseWriter, r *http.Request, u *uiView) error {
	return s.renderTokens(w, u, nil)
}

func (s *Server) renderTokens(w http.ResponseWriter, u *uiView, created *api.TokenCreated) error {
	d := &tokensData{Tokens: s.queue.Tokens(), Now: s.queue.Now(), Max: fsm.MaxTokens, Created: created}
	u.Title, u.Nav, u.Data = "Tokens", "tokens", d
	return s.render(w, http.StatusOK, "tokens", u)
}

func (s *Server) uiTokenCreate(w http.ResponseWriter, r *http.Request, u *uiView) error {
	f := u.form
	req := &api.TokenCreateRequest{Name: strings.TrimSpace(f.Get("name")), Role: f.Get("role"),
		WorkerID: strings.TrimSpace(f.Get("worker_id")), Note: f.Get("note")}
	for _, st := range strings.Split(f.Get("streams"), ",") {
		if st = strings.TrimSpace(st); st != "" {
			req.Streams = append(req.Streams, st)
		}
	}
	if v := strings.TrimSpace(f.Get("expires_hours")); v != "" {
		h, err := strconv.ParseInt(v, 10, 64)
		if err != nil || h <= 0 || h > 100*365*24 {
			return badRequest("expires in: a whole number of hours, at least 1")
		}
		req.ExpiresInSeconds = h * 3600
	}
	created, _, err := s.createToken(r, u.caller, req)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return s.renderTokens(w, u, created)
}

func (s *Server) uiTokenRevoke(w http.ResponseWriter, r *http.Request, u *uiView) error {
	if _, _, err := s.queue.RevokeToken(r.Context(), r.PathValue("name"), u.caller.Actor("")); err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/tokens", http.StatusSeeOther)
	return nil
}
