package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The developer queue's routes (/api/*, docs/devqueue.md): decode, call
// the queue service, encode.

func (s *Server) devqRoutes() {
	s.route("GET", "/api/health", kindLocal, allowPublic, s.handleHealth)
	s.route("GET", "/api/status", kindRead, allowAll, s.handleDevStatus)
	s.route("GET", "/api/sessions", kindRead, allowAll, s.handleSessions)
	s.route("POST", "/api/sessions", kindWrite, allowHead, s.handleSessionCreate)
	s.route("POST", "/api/sessions/{name}/end", kindWrite, allowHead, s.handleSessionEnd)
	s.route("GET", "/api/streams", kindRead, allowAll, s.handleStreams)
	s.route("POST", "/api/streams", kindWrite, allowHead, s.handleStreamCreate)
	s.route("GET", "/api/streams/{name}", kindRead, allowAll, s.handleStream)
	s.route("POST", "/api/streams/{name}/end", kindWrite, allowHead, s.handleStreamEnd)
	s.route("GET", "/api/tasks", kindRead, allowAll, s.handleTasks)
	s.route("POST", "/api/tasks", kindWrite, allowHead, s.handleEnqueue)
	s.route("GET", "/api/tasks/{id}", kindRead, allowAll, s.handleTask)
	s.route("POST", "/api/tasks/{id}/requeue", kindWrite, allowHead, s.handleRequeue)
	s.route("POST", "/api/tasks/{id}/complete", kindWrite, allowAll, s.handleTaskComplete)
	s.route("POST", "/api/tasks/{id}/fail", kindWrite, allowAll, s.handleTaskFail)
	s.route("POST", "/api/tasks/{id}/heartbeat", kindWrite, allowAll, s.handleTaskHeartbeat)
	s.route("GET", "/api/peek", kindLongPoll, allowAll, s.handlePeek)
	s.route("POST", "/api/claim", kindLongPoll, allowAll, s.handleTaskClaim)
	s.route("GET", "/api/tools", kindRead, allowAll, s.handleTools)
	s.route("GET", "/api/scripts", kindRead, allowAll, s.handleScripts)
	s.route("GET", "/api/registry", kindRead, allowAll, s.handleRegistry)
	s.route("PUT", "/api/registry", kindWrite, allowHead|allowGlobal, s.handleRegistrySet)
	s.route("POST", "/api/purge", kindWrite, allowHead|allowGlobal, s.handlePurge)
}

// Handlers.

func (s *Server) handleDevStatus(w http.ResponseWriter, r *http.Request, c *call) error {
	id, _ := s.cluster.Leader()
	counts := s.queue.StreamCounts(c.caller)
	streams := s.queue.Streams("")
	out := api.DevStatus{NodeID: s.cluster.ID(), Leader: id, Sessions: []*api.Session{}, Streams: []*api.Stream{},
		Tasks: map[string]int{api.TaskQueued: 0, api.TaskRunning: 0, api.TaskSucceeded: 0, api.TaskFailed: 0}}
	for _, ses := range s.queue.Sessions() {
		if ses.Status == fsm.StatusActive {
			out.Sessions = append(out.Sessions, viewSession(ses, streams))
		}
	}
	for _, st := range streams {
		if st.Status == fsm.StatusActive {
			out.Streams = append(out.Streams, viewStream(st, counts))
		}
	}
	for state, n := range s.queue.TaskCounts() {
		out.Tasks[api.TaskStatus(api.JobStatus(state))] += n
	}
	if reg := s.queue.Registry(); reg != nil {
		out.Tools = len(reg.Tools)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request, c *call) error {
	streams := s.queue.Streams("")
	out := []*api.Session{}
	for _, ses := range s.queue.Sessions() {
		out = append(out, viewSession(ses, streams))
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"sessions": out})
	return nil
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.SessionCreateRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ses, idx, err := s.queue.CreateSession(r.Context(), req.Name, req.Description, c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewSession(ses, nil))
	return nil
}

func (s *Server) handleSessionEnd(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	ses, idx, err := s.queue.EndSession(r.Context(), r.PathValue("name"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSession(ses, s.queue.Streams(ses.Name)))
	return nil
}

func (s *Server) handleStreams(w http.ResponseWriter, r *http.Request, c *call) error {
	counts := s.queue.StreamCounts(c.caller)
	out := []*api.Stream{}
	for _, st := range s.queue.Streams(r.URL.Query().Get("session")) {
		out = append(out, viewStream(st, counts))
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"streams": out})
	return nil
}

func (s *Server) handleStream(w http.ResponseWriter, r *http.Request, c *call) error {
	st, err := s.queue.Stream(r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewStream(st, s.queue.StreamCounts(c.caller)))
	return nil
}

func (s *Server) handleStreamCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.StreamCreateRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	st, idx, err := s.queue.CreateStream(r.Context(), req.Name, req.Session, req.Instructions, c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewStream(st, nil))
	return nil
}

func (s *Server) handleStreamEnd(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	st, idx, err := s.queue.EndStream(r.Context(), r.PathValue("name"), c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewStream(st, s.queue.StreamCounts(c.caller)))
	return nil
}

func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	f := queue.TaskFilter{Status: strings.ToLower(q.Get("status"))}
	f.Stream = q.Get("stream")
	f.Limit = 100
	if v := q.Get("stale"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return badRequest("stale must be true or false")
		}
		f.Stale = b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be an integer from 1 to 1000")
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return badRequest("cursor must be the next_cursor of a previous page")
		}
		f.After = n
	}
	jobs, next, err := s.queue.Tasks(c.caller, f)
	if err != nil {
		return err
	}
	now := s.queue.Now()
	out := api.TaskList{Tasks: make([]*api.Task, 0, len(jobs))}
	for _, j := range jobs {
		out.Tasks = append(out.Tasks, viewTask(j, nil, now))
	}
	if next != 0 {
		out.NextCursor = api.NullableString(strconv.FormatUint(next, 10))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.EnqueueRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	key := req.IdempotencyKey
	if h := r.Header.Get(api.HeaderIdempotencyKey); h != "" {
		if key != "" && key != h {
			return badRequest("Idempotency-Key header and idempotency_key field differ")
		}
		key = h
	}
	j, created, idx, err := s.queue.Enqueue(r.Context(), queue.EnqueueInput{Stream: req.Stream, ToolName: req.ToolName,
		Payload: req.Payload, Timeout: req.Timeout, IdempotencyKey: key, Actor: c.caller.Actor("")})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, viewTask(j, nil, s.queue.Now()))
	return nil
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request, c *call) error {
	j, st, err := s.queue.Task(c.caller, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTask(j, st, s.queue.Now()))
	return nil
}

func (s *Server) handleRequeue(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.RequeueRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	j, idx, err := s.queue.Requeue(r.Context(), r.PathValue("id"), req.Stream, c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, viewTask(j, nil, s.queue.Now()))
	return nil
}

// taskRef is the lease a task call names: the task of the route and,
// when given, the claim's token and attempt.
func taskRef(r *http.Request, token, attempt string) fsm.LeaseRef {
	return fsm.LeaseRef{JobID: r.PathValue("id"), AttemptID: attempt, Token: token}
}

func (s *Server) handleTaskComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskCompleteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	res, idx, err := s.queue.Complete(r.Context(), queue.CompleteInput{Ref: taskRef(r, req.LeaseToken, req.AttemptID),
		Actor: c.caller.Actor(""), Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTask(res.Job, nil, s.queue.Now()))
	return nil
}

func (s *Server) handleTaskFail(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskFailRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Error) == "" {
		return badRequest("error is required: say what went wrong")
	}
	res, idx, err := s.queue.Fail(r.Context(), queue.FailInput{Ref: taskRef(r, req.LeaseToken, req.AttemptID),
		Actor: c.caller.Actor(""), Error: fsm.JobError{Message: req.Error}, Stdout: req.Stdout, Stderr: req.Stderr})
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTask(res.Job, nil, s.queue.Now()))
	return nil
}

func (s *Server) handleTaskHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskHeartbeatRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	res, idx, err := s.queue.Heartbeat(r.Context(), s.heartbeatInput(c, taskRef(r, req.LeaseToken, req.AttemptID), c.caller.Actor("")))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewTask(res.Job, nil, s.queue.Now()))
	return nil
}

// handlePeek answers the task a claim would take (204 when none), waiting
// up to wait_ms for one. Like a claim it is answered by the leader, from
// the state it has applied.
func (s *Server) handlePeek(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	stream := q.Get("stream")
	if stream == "" {
		return badRequest("stream is required")
	}
	var wait time.Duration
	if v := q.Get("wait_ms"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("wait_ms must be a number of milliseconds")
		}
		wait = time.Duration(min(n, s.queue.Config().MaxClaimWait.Milliseconds())) * time.Millisecond
	}
	if _, err := c.caller.ScopeStreams([]string{stream}); err != nil {
		return err
	}
	j, st, err := s.queue.Peek(r.Context(), stream, wait)
	if err != nil {
		return err
	}
	if j == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, viewTask(j, st, s.queue.Now()))
	return nil
}

// handleTaskClaim claims the next task of a stream: the whole task, its
// stream's instructions and the lease token (204 when none).
func (s *Server) handleTaskClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.WaitMS < 0 {
		return badRequest("wait_ms must not be negative")
	}
	wait := time.Duration(min(req.WaitMS, s.queue.Config().MaxClaimWait.Milliseconds())) * time.Millisecond
	j, st, idx, err := s.queue.ClaimTask(r.Context(), c.caller, req.Stream, req.WorkerID, wait, req.ClaimID)
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	if j == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	v := viewTask(j, st, s.queue.Now())
	v.LeaseToken = j.Lease.Token
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) handleTools(w http.ResponseWriter, r *http.Request, c *call) error {
	reg := viewRegistry(s.queue.Registry())
	writeJSON(w, http.StatusOK, map[string]interface{}{"tools": reg.Tools, "task_classes": reg.TaskClasses})
	return nil
}

func (s *Server) handleScripts(w http.ResponseWriter, r *http.Request, c *call) error {
	reg := viewRegistry(s.queue.Registry())
	writeJSON(w, http.StatusOK, map[string]interface{}{"scripts": reg.Scripts, "script_dirs": reg.ScriptDirs})
	return nil
}

func (s *Server) handleRegistry(w http.ResponseWriter, r *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, viewRegistry(s.queue.Registry()))
	return nil
}

func (s *Server) handleRegistrySet(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.Registry
	// The registry is replaced whole: an empty body would wipe it, so it
	// must say so ({} resets to the defaults).
	if err := decodeRequired(c, &req, "the whole registry as a JSON object ({} resets it to the defaults)"); err != nil {
		return err
	}
	reg := fsm.Registry{Project: fsm.Project{Name: req.Project.Name, RepoPath: req.Project.RepoPath, PRDPath: req.Project.PRDPath},
		ScriptDirs: req.ScriptDirs, PurgeDays: req.PurgeOlderThanDays}
	for _, tc := range req.TaskClasses {
		reg.Classes = append(reg.Classes, fsm.TaskClass{Name: tc.Name, Timeout: tc.Timeout})
	}
	for _, t := range req.Tools {
		reg.Tools = append(reg.Tools, fsm.Tool{Name: t.Name, Description: t.Description, TaskClass: t.TaskClass, Timeout: t.Timeout})
	}
	for _, sc := range req.Scripts {
		reg.Scripts = append(reg.Scripts, fsm.Script{Path: sc.Path, Name: sc.Name, Description: sc.Description,
			Inputs: sc.Inputs, Outputs: sc.Outputs, Tags: sc.Tags})
	}
	idx, err := s.queue.SetRegistry(r.Context(), reg, c.caller.Actor(""))
	s.setIndex(w, idx)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewRegistry(s.queue.Registry()))
	return nil
}

// ParseAge reads a retention such as "3d", "12h", "30m" or "45s".
func ParseAge(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		// More days than a Duration holds would wrap to a negative age,
		// which purges every finished task.
		if err != nil || days < 0 || int64(days) > int64(math.MaxInt64/(24*time.Hour)) {
			return 0, fmt.Errorf("%q is not a number of days", v)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration (e.g. 3d, 12h, 30m, 45s)", v)
	}
	return d, nil
}

func (s *Server) handlePurge(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.PurgeRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	age := time.Duration(s.queue.Registry().RetentionNanos())
	if req.OlderThan != "" {
		d, err := ParseAge(req.OlderThan)
		if err != nil {
			return badRequest("older_than: %v", err)
		}
		age = d
	}
	before := s.queue.Now() - age.Nanoseconds()
	n, err := s.queue.PurgeTasks(r.Context(), before)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.PurgeResult{Purged: n, Before: api.Time(before)})
	return nil
}
