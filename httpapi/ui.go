package httpapi

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The web UI (docs/ui.md): server-rendered pages under /ui/, embedded in
// the binary with their script and style, on every node. A page reads the
// state of the node that serves it; a form posts to that node, which
// forwards it to the leader like any write. Pages refresh their main part
// live from the event feed (GET /ui/events), and the cluster page on a
// timer as well (raft's indexes move without events).

//go:embed ui
var uiFiles embed.FS

// uiPages are the pages, each a template file defining "main".
var uiPages = []string{"login", "dashboard", "tasks", "task", "cluster", "error", "sessions", "streams", "enqueue", "tokens", "schedules"}

func (s *Server) uiTemplates() error {
	funcs := template.FuncMap{
		"when":     uiWhen,
		"dur":      uiDur,
		"short":    uiShort,
		"stale":    func(j *fsm.Job) bool { return queue.Stale(j, s.queue.Now()) },
		"autofail": func(j *fsm.Job) bool { return j.Error != nil && j.Error.Code == fsm.AutoFailCode },
		"task":     func(j *fsm.Job) string { return string(j.TaskState()) },
		"took": func(j *fsm.Job) string {
			if j.FinishedAt == 0 || j.StartedAt == 0 {
				return "—"
			}
			return uiDur(j.FinishedAt - j.StartedAt)
		},
		"sub":  func(a, b int64) int64 { return a - b },
		"join": strings.Join,
		"rate": uiRate,
	}
	base, err := template.New("").Funcs(funcs).ParseFS(uiFiles, "ui/layout.html")
	if err != nil {
		return err
	}
	s.uiPages = map[string]*template.Template{}
	for _, p := range uiPages {
		t, err := template.Must(base.Clone()).ParseFS(uiFiles, "ui/"+p+".html")
		if err != nil {
			return err
		}
		s.uiPages[p] = t
	}
	return nil
}

func (s *Server) uiRoutes() {
	static, _ := fs.Sub(uiFiles, "ui/static")
	files := http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))
	s.router.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=300")
		files.ServeHTTP(w, r)
	}))
	s.router.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	s.router.HandleFunc("GET /ui/login", s.handleUILoginForm)
	s.router.HandleFunc("POST /ui/login", s.handleUILogin)
	s.uiRoute("POST /ui/logout", kindRead, allowAll, s.handleUILogout)
	s.uiRoute("GET /ui/{$}", kindRead, allowAll, s.uiDashboard)
	s.uiRoute("GET /ui/tasks", kindRead, allowAll, s.uiTasks)
	s.uiRoute("GET /ui/tasks/{id}", kindRead, allowAll, s.uiTask)
	s.uiRoute("GET /ui/cluster", kindRead, allowAll, s.uiCluster)
	s.uiRoute("POST /ui/tasks/{id}/redrive", kindWrite, allowHead, s.uiRedrive)
	s.uiRoute("POST /ui/tasks/{id}/requeue", kindWrite, allowHead, s.uiRequeue)
	s.uiDevqRoutes()
	s.uiTokenRoutes()
	s.uiScheduleRoutes()
	s.uiRoute("GET /ui/events", kindRead, allowAll, func(w http.ResponseWriter, r *http.Request, u *uiView) error {
		return s.handleEventStream(w, r, &call{caller: u.caller, role: u.caller.ViewRole()})
	})
}

// uiView is what every page renders with: who is looking, through which
// node, and the page's own data.
type uiView struct {
	Title, Nav string
	Role, Node string
	Leader     string // the leader's id, "" when there is none
	IsHead     bool
	CSRF       string
	Message    string // an error or notice at the top of the page
	Refresh    int    // ms: the page's main part also refreshes on this timer
	Data       any
	session    *uiSession
	caller     queue.Caller // the session's
	form       url.Values
	fragment   bool
}

type uiHandler func(w http.ResponseWriter, r *http.Request, u *uiView) error

// uiRoute serves a page or form of the UI: the session cookie
// authenticates (a page without one sends the browser to the login form),
// the role is checked as the API checks it, and a write's form must carry
// the session's CSRF token; a write runs on the leader (forwarded there
// from a follower, cookie and all).
func (s *Server) uiRoute(pattern string, k kind, who allow, h uiHandler) {
	s.allowed[pattern] = who
	s.router.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.setLeaderHeaders(w)
		hdr := w.Header()
		hdr.Set("Cache-Control", "no-store")
		hdr.Set("X-Frame-Options", "DENY")
		hdr.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
		u := &uiView{Node: s.cluster.ID(), fragment: r.Header.Get("X-Spine-Fragment") != ""}
		sess, err := s.session(r, time.Now())
		if err != nil {
			if r.Method == http.MethodGet && !u.fragment && !strings.HasPrefix(r.URL.Path, "/ui/events") {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.uiFail(w, r, u, errorf(http.StatusUnauthorized, api.CodeUnauthorized, "%v: log in again", err))
			return
		}
		u.session, u.Role, u.IsHead, u.CSRF = sess, sess.caller.Role, sess.caller.Role == RoleHead, sess.csrf()
		u.caller = sess.caller
		if sess.caller.Token != "" {
			// The page's event stream ends with the token (queue.Service.Hold).
			ctx, release := s.queue.Hold(r.Context(), sess.caller)
			defer release()
			r = r.WithContext(ctx)
		}
		u.Leader, _ = s.cluster.Leader()
		method := r.Method
		if k != kindWrite {
			method = http.MethodGet // a form that changes nothing (log out)
		}
		if !who.permits(u.caller, method) {
			s.uiFail(w, r, u, forbidden(u.caller, r.Method+" "+routeTemplate(r)))
			return
		}
		if k != kindWrite {
			if r.Method == http.MethodPost {
				if err := r.ParseForm(); err != nil || !sess.checkCSRF(r.PostForm.Get("csrf")) {
					s.uiFail(w, r, u, errorf(http.StatusForbidden, api.CodeForbidden, "the form is stale or forged: reload the page"))
					return
				}
			}
			if err := h(w, r, u); err != nil {
				s.uiFail(w, r, u, err)
			}
			return
		}
		c := &call{caller: u.caller, role: u.caller.ViewRole()}
		err = s.serveWrite(w, r, c, func(w http.ResponseWriter, r *http.Request, c *call) error {
			form, err := url.ParseQuery(string(c.body))
			if err != nil || !sess.checkCSRF(form.Get("csrf")) {
				return errorf(http.StatusForbidden, api.CodeForbidden, "the form is stale or forged: reload the page")
			}
			u.form = form
			return h(w, r, u)
		}, false)
		if err != nil {
			s.uiFail(w, r, u, err)
		}
	})
}

// render writes page p, or only its main part for a live refresh.
func (s *Server) render(w http.ResponseWriter, status int, p string, u *uiView) error {
	var buf bytes.Buffer
	name := "layout"
	if u.fragment {
		name = "main"
	}
	if err := s.uiPages[p].ExecuteTemplate(&buf, name, u); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}

// uiFail answers an error as a page with the API's status and message.
func (s *Server) uiFail(w http.ResponseWriter, r *http.Request, u *uiView, err error) {
	if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
		return
	}
	ae := classify(err)
	if ae.Status >= 500 && ae.Code == api.CodeInternal {
		s.logger.Error("ui page failed", "path", r.URL.Path, "error", err)
	}
	u.Title, u.Message, u.Data = http.StatusText(ae.Status), ae.Message, ae
	if err := s.render(w, ae.Status, "error", u); err != nil {
		http.Error(w, ae.Message, ae.Status)
	}
}

func (s *Server) handleUILoginForm(w http.ResponseWriter, r *http.Request) {
	s.setLeaderHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	u := &uiView{Title: "Log in", Node: s.cluster.ID(), Data: uiNext(r.URL.Query().Get("next"))}
	if err := s.render(w, http.StatusOK, "login", u); err != nil {
		s.logger.Error("ui login page", "error", err)
	}
}

// handleUILogin checks the token and sets the session cookie. A wrong
// token gets the form again with a message and no cookie.
func (s *Server) handleUILogin(w http.ResponseWriter, r *http.Request) {
	s.setLeaderHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := uiNext(r.FormValue("next"))
	role, key := s.cfg.Tokens.tokenKey(r.FormValue("token"))
	name := ""
	if role == "" {
		// A named token (its key is its secret's digest too).
		if c, err := s.namedCaller(r, strings.TrimSpace(r.FormValue("token"))); err == nil {
			role, name = c.Role, c.Token
		}
	}
	if role == "" {
		u := &uiView{Title: "Log in", Node: s.cluster.ID(), Message: "That token is not accepted by this cluster.", Data: next}
		_ = s.render(w, http.StatusUnauthorized, "login", u)
		return
	}
	exp := time.Now().Add(sessionTTL)
	val, err := newSession(role, key, exp, name)
	if err != nil {
		http.Error(w, "no randomness for a session", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: val, Path: "/ui/", Expires: exp, MaxAge: int(sessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) handleUILogout(w http.ResponseWriter, r *http.Request, u *uiView) error {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	return nil
}

// dashboardData is the dashboard's: job counts, the queues by stream, the
// developer queue's active sessions and streams, the cluster in brief.
type dashboardData struct {
	State    *api.SystemState
	Streams  []string // for the filter
	Stream   string
	Queues   []*api.QueueDepth
	Sessions []*fsm.Session
	Active   []*fsm.Stream
	Counts   map[string][2]int // stream → queued, running tasks
	// Defaults are the streams' job defaults, by stream.
	Defaults map[string]*fsm.StreamDefaults
	// RateLimited counts, by stream, the queued jobs a rate holds back;
	// Rates are the rate keys in use.
	RateLimited map[string]int
	Rates       []queue.RateInfo
}

func (s *Server) uiDashboard(w http.ResponseWriter, r *http.Request, u *uiView) error {
	st, err := s.systemState(r.Context(), u.caller)
	if err != nil {
		return err
	}
	d := &dashboardData{State: st, Stream: r.URL.Query().Get("stream"), Counts: s.queue.StreamCounts(u.caller),
		Defaults: s.queue.StreamDefaults(), RateLimited: s.queue.RateWaiting(u.caller), Rates: s.queue.Rates(u.caller)}
	seen := map[string]bool{}
	for _, q := range st.Queues {
		seen[q.Stream] = true
		if d.Stream == "" || q.Stream == d.Stream {
			d.Queues = append(d.Queues, q)
		}
	}
	for _, ses := range s.queue.Sessions() {
		if ses.Status == fsm.StatusActive {
			d.Sessions = append(d.Sessions, ses)
		}
	}
	for _, str := range s.queue.Streams("") {
		seen[str.Name] = true
		if str.Status == fsm.StatusActive && (d.Stream == "" || str.Name == d.Stream) {
			d.Active = append(d.Active, str)
		}
	}
	for name := range seen {
		d.Streams = append(d.Streams, name)
	}
	sort.Strings(d.Streams)
	// Ages, and a leader's loss, come without events: refresh on a timer too.
	u.Title, u.Nav, u.Refresh, u.Data = "Dashboard", "dashboard", 5000, d
	return s.render(w, http.StatusOK, "dashboard", u)
}

// tasksData is a page of the task list.
type tasksData struct {
	Jobs          []*fsm.Job
	State, Stream string
	States        []fsm.State
	NextURL       string
}

const uiPageSize = 50

func (s *Server) uiTasks(w http.ResponseWriter, r *http.Request, u *uiView) error {
	q := r.URL.Query()
	f := fsm.ListFilter{State: fsm.State(q.Get("state")), Stream: q.Get("stream"), Limit: uiPageSize}
	if f.State != "" && !f.State.Valid() {
		return badRequest("state must be one of queued, running, done, failed, dead")
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("after must be a cursor from the previous page")
		}
		f.After = n
	}
	jobs, next, err := s.queue.List(u.caller, f)
	if err != nil {
		return err
	}
	d := &tasksData{Jobs: jobs, State: string(f.State), Stream: f.Stream,
		States: []fsm.State{fsm.StateQueued, fsm.StateRunning, fsm.StateDone, fsm.StateFailed, fsm.StateDead, fsm.StateCancelled}}
	if next != 0 {
		nq := url.Values{"after": {strconv.FormatUint(next, 10)}}
		if f.State != "" {
			nq.Set("state", string(f.State))
		}
		if f.Stream != "" {
			nq.Set("stream", f.Stream)
		}
		d.NextURL = "/ui/tasks?" + nq.Encode()
	}
	u.Title, u.Nav, u.Data = "Tasks", "tasks", d
	return s.render(w, http.StatusOK, "tasks", u)
}

// taskData is one task's page.
type taskData struct {
	Job          *fsm.Job
	Payload      string
	Result       string
	Summary      string
	Instructions string
	// ResultSchema is the job's result contract, indented ("" for none).
	ResultSchema string
}

func (s *Server) uiTask(w http.ResponseWriter, r *http.Request, u *uiView) error {
	j, err := s.queue.Job(u.caller, r.PathValue("id"))
	if err != nil {
		return err
	}
	d := &taskData{Job: j, Payload: uiJSON(j.Payload), Result: uiJSON(j.Result), ResultSchema: uiJSON([]byte(j.Extra().ResultSchema))}
	var res struct {
		Summary string `json:"summary"`
	}
	if json.Unmarshal(j.Result, &res) == nil {
		d.Summary = res.Summary
	}
	if st, err := s.queue.Stream(j.Stream); err == nil && st != nil {
		d.Instructions = st.Instructions
	}
	u.Title, u.Nav, u.Data = "Task "+uiShort(j.ID), "tasks", d
	return s.render(w, http.StatusOK, "task", u)
}

// clusterData is the cluster page's.
type clusterData struct {
	Status api.ClusterStatus
	State  *api.SystemState
	Dead   []*fsm.Job
	Next   uint64
}

func (s *Server) uiCluster(w http.ResponseWriter, r *http.Request, u *uiView) error {
	cs, err := s.cluster.Status(r.Context())
	if err != nil {
		return err
	}
	st, err := s.systemState(r.Context(), u.caller)
	if err != nil {
		return err
	}
	d := &clusterData{Status: viewStatus(cs), State: st}
	d.Status.Level = s.queue.Local().Level()
	if u.caller.ViewRole() == RoleHead { // the dead letters are head's (as GET /dlq)
		if d.Dead, d.Next, err = s.queue.ListDLQFor(u.caller, fsm.ListFilter{Limit: uiPageSize}); err != nil {
			return err
		}
	}
	u.Title, u.Nav, u.Refresh, u.Data = "Cluster", "cluster", 2000, d
	return s.render(w, http.StatusOK, "cluster", u)
}

// uiBack is where a form sends the browser after it is done: its "back"
// field when it is a UI page, else the default.
func uiBack(u *uiView, def string) string {
	if b := u.form.Get("back"); strings.HasPrefix(b, "/ui/") && !strings.HasPrefix(b, "//") {
		return b
	}
	return def
}

func (s *Server) uiRedrive(w http.ResponseWriter, r *http.Request, u *uiView) error {
	_, _, err := s.queue.Redrive(r.Context(), r.PathValue("id"), u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, uiBack(u, "/ui/tasks/"+url.PathEscape(r.PathValue("id"))), http.StatusSeeOther)
	return nil
}

func (s *Server) uiRequeue(w http.ResponseWriter, r *http.Request, u *uiView) error {
	j, _, err := s.queue.Requeue(r.Context(), r.PathValue("id"), "", u.caller.Actor(""))
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/tasks/"+url.PathEscape(j.ID), http.StatusSeeOther)
	return nil
}

// Template helpers.

func uiWhen(ns int64) string {
	if ns == 0 {
		return "—"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05")
}

func uiDur(ns int64) string {
	if ns <= 0 {
		return "—"
	}
	d := time.Duration(ns)
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func uiJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

func uiShort(id string) string {
	if len(id) > 13 {
		return id[:8] + "…"
	}
	return id
}
