package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The streams: every lane jobs are in, with counts, age, an operator's
// pause and the defaults of the jobs created in it.
func (s *Server) streamRoutes() {
	s.route("GET", "/streams", kindRead, allowAll, s.handleStreamInfos)
	s.route("GET", "/streams/{name}", kindRead, allowAll, s.handleStreamInfo)
	s.route("POST", "/streams/{name}/pause", kindWrite, allowHead, s.handleStreamPause)
	s.route("POST", "/streams/{name}/resume", kindWrite, allowHead, s.handleStreamResume)
	s.route("PUT", "/streams/{name}/defaults", kindWrite, allowHead, s.handleStreamDefaultsSet)
	s.route("DELETE", "/streams/{name}/defaults", kindWrite, allowHead, s.handleStreamDefaultsClear)
}

func viewStreamInfo(si queue.StreamInfo, now time.Time) api.StreamInfo {
	v := api.StreamInfo{Name: si.Name, Queued: si.Counts[fsm.StateQueued], Running: si.Counts[fsm.StateRunning],
		Done: si.Counts[fsm.StateDone], Failed: si.Counts[fsm.StateFailed], Dead: si.Counts[fsm.StateDead],
		Cancelled: si.Counts[fsm.StateCancelled]}
	if si.OldestQueuedAt != 0 {
		v.OldestQueuedAt = api.Time(si.OldestQueuedAt)
		if age := now.Sub(v.OldestQueuedAt).Seconds(); age > 0 {
			v.OldestQueuedSeconds = age
		}
	}
	if p := si.Pause; p != nil {
		v.Paused = true
		v.Pause = &api.StreamPause{PausedAt: api.Time(p.PausedAt), PausedBy: p.Actor, Reason: p.Reason}
	}
	if d := si.Defaults; d != nil {
		v.Defaults = &api.StreamDefaults{ConcurrencyKey: d.ConcurrencyKey, ConcurrencyLimit: d.ConcurrencyLimit, RateLimit: viewRate(d.Rate),
			SetAt: api.Time(d.SetAt), SetBy: d.Actor}
		if d.ResultSchema != "" {
			v.Defaults.ResultSchema = json.RawMessage(d.ResultSchema)
		}
	}
	if c := si.Catalog; c != nil {
		v.Status, v.Instructions = c.Status, c.Instructions
	}
	v.RateLimited = si.RateLimited
	for _, u := range si.Unmatched {
		v.Unmatched = append(v.Unmatched, api.UnmatchedJobs{Requires: fsm.Labels(u.Requires), Jobs: u.Jobs})
	}
	return v
}

func (s *Server) handleStreamInfos(w http.ResponseWriter, r *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, s.streamInfos(c.caller))
	return nil
}

// streamInfos are the streams role sees (the route's and the MCP
// list_streams tool's).
func (s *Server) streamInfos(caller queue.Caller) api.StreamList {
	now := time.Now()
	out := api.StreamList{Streams: []api.StreamInfo{}}
	for _, si := range s.queue.StreamInfos(caller) {
		out.Streams = append(out.Streams, viewStreamInfo(si, now))
	}
	return out
}

func (s *Server) handleStreamInfo(w http.ResponseWriter, r *http.Request, c *call) error {
	v, err := s.streamInfo(c.caller, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// streamInfo is stream name as role sees it (the route's and the MCP
// tools').
func (s *Server) streamInfo(caller queue.Caller, name string) (*api.StreamInfo, error) {
	if !queue.ValidName(name) {
		return nil, errorf(http.StatusBadRequest, api.CodeInvalidRequest, "stream name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	if !caller.InScope(name) {
		return nil, errorf(http.StatusNotFound, api.CodeNotFound, "stream %s: not found", name)
	}
	v := viewStreamInfo(s.queue.StreamInfo(caller, name), time.Now())
	return &v, nil
}

func (s *Server) handleStreamPause(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.StreamPauseRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.pauseStream(w, r, c, true, req.Reason)
}

func (s *Server) handleStreamResume(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct{}
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.pauseStream(w, r, c, false, "")
}

// pauseStream pauses or resumes, and answers the stream as this node reads
// it after the command (a claim woken by a resume may already show in it).
func (s *Server) pauseStream(w http.ResponseWriter, r *http.Request, c *call, pause bool, reason string) error {
	name := r.PathValue("name")
	_, idx, err := s.queue.PauseStream(r.Context(), name, pause, reason, c.caller.Actor(""))
	return s.answerStream(w, name, idx, err)
}

// answerStream answers an operator's write of a stream: its error, or the
// stream as this node reads it after the command at idx.
func (s *Server) answerStream(w http.ResponseWriter, name string, idx uint64, err error) error {
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewStreamInfo(s.queue.StreamInfo(queue.RoleCaller(fsm.HeadRole), name), time.Now()))
	return nil
}

func (s *Server) handleStreamDefaultsSet(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.StreamDefaults
	if err := decode(c, &req); err != nil {
		return err
	}
	if !req.SetAt.IsZero() || req.SetBy != "" {
		return errorf(http.StatusBadRequest, api.CodeInvalidRequest, "setAt and setBy are the cluster's to fill in")
	}
	if req.ConcurrencyKey == "" && req.ConcurrencyLimit == 0 && !hasSchema(req.ResultSchema) && req.RateLimit == nil {
		return errorf(http.StatusBadRequest, api.CodeInvalidRequest, "give concurrencyKey, concurrencyLimit, resultSchema, rateLimit or several (DELETE clears the defaults)")
	}
	return s.setStreamDefaults(w, r, c, queue.DefaultsInput{ConcurrencyKey: req.ConcurrencyKey, ConcurrencyLimit: req.ConcurrencyLimit,
		ResultSchema: req.ResultSchema, Rate: rateInput(req.RateLimit)})
}

func (s *Server) handleStreamDefaultsClear(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct{}
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.setStreamDefaults(w, r, c, queue.DefaultsInput{})
}

// setStreamDefaults sets (or, with neither a key nor a limit, clears) a
// stream's job defaults, and answers the stream as this node reads it
// after the command.
func (s *Server) setStreamDefaults(w http.ResponseWriter, r *http.Request, c *call, in queue.DefaultsInput) error {
	name := r.PathValue("name")
	_, idx, err := s.queue.SetDefaults(r.Context(), name, in, c.caller.Actor(""))
	return s.answerStream(w, name, idx, err)
}
