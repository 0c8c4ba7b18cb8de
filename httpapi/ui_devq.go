package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The developer queue's pages of the web UI (seed 004 §15): sessions,
// streams and the enqueue form. Reading them is anyone's; every form is
// head's, as the API's routes are.

func (s *Server) uiDevqRoutes() {
	s.uiRoute("GET /ui/sessions", kindRead, allowAll, s.uiSessions)
	s.uiRoute("POST /ui/sessions", kindWrite, allowHead, s.uiSessionCreate)
	s.uiRoute("POST /ui/sessions/{name}/end", kindWrite, allowHead, s.uiSessionEnd)
	s.uiRoute("GET /ui/streams", kindRead, allowAll, s.uiStreams)
	s.uiRoute("POST /ui/streams", kindWrite, allowHead, s.uiStreamCreate)
	s.uiRoute("POST /ui/streams/{name}/end", kindWrite, allowHead, s.uiStreamEnd)
	s.uiRoute("POST /ui/streams/{name}/pause", kindWrite, allowHead, s.uiStreamPause(true))
	s.uiRoute("POST /ui/streams/{name}/resume", kindWrite, allowHead, s.uiStreamPause(false))
	s.uiRoute("GET /ui/enqueue", kindRead, allowHead, s.uiEnqueueForm)
	s.uiRoute("POST /ui/enqueue", kindWrite, allowHead, s.uiEnqueue)
}

type sessionsData struct {
	Sessions []*fsm.Session
	Streams  map[string]int // session → its streams
}

func (s *Server) uiSessions(w http.ResponseWriter, r *http.Request, u *uiView) error {
	d := &sessionsData{Sessions: s.queue.Sessions(), Streams: map[string]int{}}
	for _, st := range s.queue.Streams("") {
		d.Streams[st.Session]++
	}
	u.Title, u.Nav, u.Data = "Sessions", "sessions", d
	return s.render(w, http.StatusOK, "sessions", u)
}

func (s *Server) uiSessionCreate(w http.ResponseWriter, r *http.Request, u *uiView) error {
	name := strings.TrimSpace(u.form.Get("name"))
	_, _, err := s.queue.CreateSession(r.Context(), name, u.form.Get("description"), u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/sessions", http.StatusSeeOther)
	return nil
}

func (s *Server) uiSessionEnd(w http.ResponseWriter, r *http.Request, u *uiView) error {
	_, _, err := s.queue.EndSession(r.Context(), r.PathValue("name"), u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/sessions", http.StatusSeeOther)
	return nil
}

type streamsData struct {
	Streams  []*fsm.Stream
	Counts   map[string][2]int
	Sessions []*fsm.Session // active ones, for the create form
}

func (s *Server) uiStreams(w http.ResponseWriter, r *http.Request, u *uiView) error {
	d := &streamsData{Streams: s.queue.Streams(""), Counts: s.queue.StreamCounts(u.caller)}
	for _, ses := range s.queue.Sessions() {
		if ses.Status == fsm.StatusActive {
			d.Sessions = append(d.Sessions, ses)
		}
	}
	u.Title, u.Nav, u.Data = "Streams", "streams", d
	return s.render(w, http.StatusOK, "streams", u)
}

func (s *Server) uiStreamCreate(w http.ResponseWriter, r *http.Request, u *uiView) error {
	f := u.form
	_, _, err := s.queue.CreateStream(r.Context(), strings.TrimSpace(f.Get("name")), f.Get("session"), f.Get("instructions"),
		u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/streams", http.StatusSeeOther)
	return nil
}

func (s *Server) uiStreamEnd(w http.ResponseWriter, r *http.Request, u *uiView) error {
	_, _, err := s.queue.EndStream(r.Context(), r.PathValue("name"), u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/streams", http.StatusSeeOther)
	return nil
}

// uiStreamPause pauses or resumes a stream from the dashboard, and goes
// back to it.
func (s *Server) uiStreamPause(pause bool) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, u *uiView) error {
		_, _, err := s.queue.PauseStream(r.Context(), r.PathValue("name"), pause, u.form.Get("reason"), u.caller.Actor(""))
		if err != nil {
			return err
		}
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return nil
	}
}

// enqueueTool is a tool of the enqueue form, with the payload its form
// starts from.
type enqueueTool struct {
	*fsm.Tool
	Template string
	Timeout  int64 // in force: the tool's, else its class's
}

type enqueueData struct {
	Tools   []enqueueTool
	Streams []*fsm.Stream
	Scripts []fsm.Script
	// The form as posted, when it was refused.
	Tool, Stream, Payload, Timeout string
}

// toolTemplate is the payload a tool's tasks start from: a script and its
// arguments for a script class, a prompt and context files for an LLM
// class, else an empty object.
func toolTemplate(t *fsm.Tool) string {
	switch c := t.TaskClass; {
	case strings.HasSuffix(c, "_SCRIPT"):
		return "{\n  \"script_path\": \"\",\n  \"args\": []\n}"
	case strings.HasPrefix(c, "LLM_"):
		return "{\n  \"prompt\": \"\",\n  \"context_files\": []\n}"
	}
	return "{}"
}

func (s *Server) enqueueData(u *uiView) *enqueueData {
	d := &enqueueData{}
	if reg := s.queue.Registry(); reg != nil {
		for i := range reg.Tools {
			t := &reg.Tools[i]
			et := enqueueTool{Tool: t, Template: toolTemplate(t), Timeout: t.Timeout}
			if et.Timeout == 0 {
				et.Timeout, _ = reg.ClassTimeout(t.TaskClass)
			}
			d.Tools = append(d.Tools, et)
		}
		d.Scripts = reg.Scripts
	}
	for _, st := range s.queue.Streams("") {
		if st.Status == fsm.StatusActive {
			d.Streams = append(d.Streams, st)
		}
	}
	return d
}

func (s *Server) uiEnqueueForm(w http.ResponseWriter, r *http.Request, u *uiView) error {
	d := s.enqueueData(u)
	d.Stream = r.URL.Query().Get("stream")
	u.Title, u.Nav, u.Data = "Enqueue", "enqueue", d
	return s.render(w, http.StatusOK, "enqueue", u)
}

// uiEnqueue adds the task and shows it; a refused form comes back filled
// in, with the reason.
func (s *Server) uiEnqueue(w http.ResponseWriter, r *http.Request, u *uiView) error {
	f := u.form
	in := queue.EnqueueInput{Stream: f.Get("stream"), ToolName: f.Get("tool"), Payload: json.RawMessage(strings.TrimSpace(f.Get("payload"))),
		IdempotencyKey: f.Get("key"), Actor: u.caller.Actor("")}
	err := func() error {
		if len(in.Payload) == 0 {
			in.Payload = json.RawMessage(`{}`)
		}
		if !json.Valid(in.Payload) {
			return badRequest("the payload is not valid JSON")
		}
		if v := strings.TrimSpace(f.Get("timeout")); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return badRequest("the timeout must be a whole number of seconds")
			}
			in.Timeout = n
		}
		j, _, _, err := s.queue.Enqueue(r.Context(), in)
		if err != nil {
			return err
		}
		http.Redirect(w, r, "/ui/tasks/"+url.PathEscape(j.ID), http.StatusSeeOther)
		return nil
	}()
	if err == nil {
		return nil
	}
	ae := classify(err)
	if ae.Status >= 500 {
		return err
	}
	d := s.enqueueData(u)
	d.Tool, d.Stream, d.Payload, d.Timeout = in.ToolName, in.Stream, f.Get("payload"), f.Get("timeout")
	u.Title, u.Nav, u.Message, u.Data = "Enqueue", "enqueue", ae.Message, d
	return s.render(w, ae.Status, "enqueue", u)
}
