package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The control plane's task API (/v1/tasks/..., seed 003's state machine)
// and the event feed (GET /v1/events). A task is a job: these routes show
// and move it in the seed's vocabulary (fsm.TaskState).

func (s *Server) taskRoutes() {
	s.route("POST", "/v1/tasks/claim", kindLongPoll, allowClaws, s.handleControlTaskClaim)
	s.route("GET", "/v1/tasks/{id}", kindRead, allowAll, s.handleControlTask)
	s.route("POST", "/v1/tasks/{id}/start", kindWrite, allowAll, s.taskStep(fsm.TaskStart))
	s.route("POST", "/v1/tasks/{id}/heartbeat", kindLocalFirst, allowAll, s.handleControlTaskHeartbeat)
	s.route("POST", "/v1/tasks/{id}/complete", kindWrite, allowAll, s.taskStep(fsm.TaskComplete))
	s.route("POST", "/v1/tasks/{id}/fail", kindWrite, allowAll, s.taskStep(fsm.TaskFail))
	s.route("POST", "/v1/tasks/{id}/release", kindWrite, allowAll, s.taskStep(fsm.TaskRelease))
	// The feed is served by the node the client is connected to, from its
	// own state: every node numbers the events the same, so a client
	// resumes anywhere (one behind simply delivers later).
	s.route("GET", "/v1/events", kindLocal, allowAll, s.handleEventStream)
}

func viewControlTask(j *fsm.Job) *api.ControlTask {
	kind, target := j.TargetOf()
	v := &api.ControlTask{ID: j.ID, State: string(j.TaskState()), Status: api.JobStatus(j.State), Stream: j.Stream, Target: target, TargetKind: kind,
		Payload: j.Payload, Attempt: int(j.Attempts), MaxAttempts: int(j.MaxAttempts), FinishedAt: api.Time(j.FinishedAt),
		CreatedAt: api.Time(j.CreatedAt), UpdatedAt: api.Time(j.UpdatedAt), Result: j.Result, Error: viewError(j.Error), ModifyIndex: j.ModifyIndex,
		ResultSchema: resultSchema(j)}
	if l := j.Lease; l != nil {
		v.AgentID, v.ClaimedBy, v.AttemptID, v.LeaseExpiresAt = l.WorkerID, l.Owner, l.AttemptID, api.Time(l.ExpiresAt)
	}
	if log := j.AttemptLog(); len(log) > 0 && j.State != fsm.StateQueued {
		at := &log[len(log)-1]
		v.ClaimedAt, v.RunningAt = api.Time(at.StartedAt), api.Time(at.RunningAt)
	}
	return v
}

func (s *Server) handleControlTask(w http.ResponseWriter, r *http.Request, c *call) error {
	j, err := s.lookup(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewControlTask(j))
	return nil
}

// handleControlTaskClaim claims for agent_id the task GET /v1/tasks/next would
// name (queued|released → claimed), waiting up to max_wait_ms for one.
func (s *Server) handleControlTaskClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.ControlTaskClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := queue.CheckWorkerID("agent_id", req.AgentID, true); err != nil {
		return err
	}
	if req.MaxWaitMS < 0 {
		return badRequest("max_wait_ms must not be negative")
	}
	if req.ClaimID != "" && !queue.ValidClaimID(req.ClaimID) {
		return badRequest("claim_id must be 8 to 64 letters, digits, '-' or '_'")
	}
	wait := time.Duration(min(req.MaxWaitMS, s.queue.Config().MaxClaimWait.Milliseconds())) * time.Millisecond
	j, index, err := s.queue.ClaimNext(r.Context(), queue.ClaimNextInput{Streams: req.Streams,
		Actor: c.caller.Actor(req.AgentID), Wait: wait, ClaimID: req.ClaimID})
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	if j == nil {
		writeJSON(w, http.StatusOK, api.ControlTaskClaim{})
		return nil
	}
	t := viewControlTask(j)
	t.LeaseToken = j.Lease.Token
	writeJSON(w, http.StatusOK, api.ControlTaskClaim{Claimed: true, Task: t})
	return nil
}

// controlTaskRef is the lease a step names: the token is required but for head,
// which may act on any running task.
func controlTaskRef(r *http.Request, c *call, req *api.TaskStepRequest) (fsm.LeaseRef, fsm.Actor, error) {
	if req.LeaseToken == "" && c.role != fsm.HeadRole {
		return fsm.LeaseRef{}, fsm.Actor{}, badRequest("lease_token (from the claim) is required")
	}
	return fsm.LeaseRef{JobID: r.PathValue("id"), AttemptID: req.AttemptID, Token: req.LeaseToken},
		c.caller.Actor(req.AgentID), nil
}

// taskStep serves one step of the seed's state machine; a step it does
// not allow is 409 illegal_transition with the seed's from and to.
func (s *Server) taskStep(op fsm.TaskOp) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *call) error {
		var req api.TaskStepRequest
		if err := decode(c, &req); err != nil {
			return err
		}
		ref, actor, err := controlTaskRef(r, c, &req)
		if err != nil {
			return err
		}
		in := queue.TaskStepInput{Op: op, Ref: ref, Actor: actor, Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr,
			Requeue: req.Requeue, Reason: req.Reason}
		if op == fsm.TaskFail {
			if req.Error == nil || req.Error.Message == "" {
				return badRequest("error with a message is required")
			}
			in.Error = fsm.JobError(*req.Error)
		}
		if op == fsm.TaskComplete && len(req.Result) > 0 && !json.Valid(req.Result) {
			return badRequest("result must be JSON")
		}
		res, index, err := s.queue.TaskStep(r.Context(), in)
		s.setIndex(w, index)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, api.TaskStepAnswer{Task: viewControlTask(res.Job), Duplicate: res.Duplicate})
		return nil
	}
}

// handleControlTaskHeartbeat extends a claimed or running task's lease.
func (s *Server) handleControlTaskHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.TaskStepRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ref, actor, err := controlTaskRef(r, c, &req)
	if err != nil {
		return err
	}
	res, index, err := s.queue.Heartbeat(r.Context(), s.heartbeatInput(c, ref, actor))
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.TaskStepAnswer{Task: viewControlTask(res.Job)})
	return nil
}

// Event stream settings.
const (
	eventBatch     = 256
	eventKeepalive = 15 * time.Second
)

func viewFeedEvent(e *fsm.FeedEvent) api.Event {
	return api.Event{Seq: e.Seq, Index: e.Index, At: api.Time(e.At), Kind: e.Kind, ID: e.ID, Type: e.Type, Actor: e.Actor,
		From: e.From, To: e.To, Stream: e.Stream, State: string(e.Task), AttemptID: e.AttemptID, AgentID: e.WorkerID, Text: e.Text, Token: e.Token}
}

// eventFilter is what a client of GET /v1/events asked to see.
type eventFilter struct {
	caller queue.Caller
	kinds  map[string]bool
	stream string
	job    string
}

func (f *eventFilter) keep(s *Server, e *fsm.FeedEvent) bool {
	if len(f.kinds) > 0 && !f.kinds[e.Kind] {
		return false
	}
	if e.Kind != fsm.FeedJob {
		// Gateways and workers are the whole cluster's: a token scoped to
		// streams sees the events of its streams' jobs alone.
		return f.stream == "" && f.job == "" && !f.caller.Scoped()
	}
	if (f.stream != "" && e.Stream != f.stream) || (f.job != "" && e.ID != f.job) {
		return false
	}
	if f.caller.ViewRole() == fsm.HeadRole && !f.caller.Scoped() {
		return true
	}
	// A claw, or a scoped token, sees the events of the jobs it may see.
	if !f.caller.InScope(e.Stream) {
		return false
	}
	j, err := s.queue.Job(f.caller, e.ID)
	return err == nil && j != nil
}

// handleEventStream serves the feed as Server-Sent Events: each event's
// id is its seq, its name its kind ("job", "gateway", "worker"), its data
// the api.Event. It starts after Last-Event-ID (a reconnect), else after
// ?after= (0: from the oldest event held), else at the latest event (only
// what happens from now). Events the feed no longer holds are announced
// by one "gap" event. Filters: ?kinds=job,worker, ?stream=, ?job=.
func (s *Server) handleEventStream(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	f := &eventFilter{caller: c.caller, stream: q.Get("stream"), job: q.Get("job")}
	if v := q.Get("kinds"); v != "" {
		f.kinds = map[string]bool{}
		for _, k := range strings.Split(v, ",") {
			switch k {
			case fsm.FeedJob, fsm.FeedGateway, fsm.FeedWorker:
				f.kinds[k] = true
			default:
				return badRequest("kinds: unknown kind %q (job, gateway, worker)", k)
			}
		}
	}
	var after uint64
	cursor := r.Header.Get("Last-Event-ID")
	what := "Last-Event-ID"
	if cursor == "" {
		cursor, what = q.Get("after"), "after"
	}
	if cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			return badRequest("%s must be an event seq (an unsigned integer), got %q", what, cursor)
		}
		after = n
	} else {
		after = s.queue.Feed(0, 0).Latest
	}
	h := w.Header()
	h.Set(api.HeaderEventsAfter, strconv.FormatUint(after, 10))
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(id uint64, event string, data interface{}) error {
		// A stream outlives the server's write timeout: each write has its own.
		_ = rc.SetWriteDeadline(time.Now().Add(eventKeepalive + 30*time.Second))
		body, err := json.Marshal(data)
		if err != nil {
			return err
		}
		if id != 0 {
			if _, err := fmt.Fprintf(w, "id: %d\n", id); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, body)
		return err
	}
	// The client retries after 1 s when the connection drops.
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return nil
	}
	_ = rc.Flush()
	keepalive := time.NewTicker(eventKeepalive)
	defer keepalive.Stop()
	// A node shutting down ends its streams at once (their clients resume
	// on another node) rather than hold its drain to the deadline.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	for ctx.Err() == nil {
		page := s.queue.Feed(after, eventBatch)
		if page.Oldest > after+1 {
			// Events after the cursor were dropped: say so, then go on.
			if err := send(page.Oldest-1, "gap", api.EventGap{After: after, Oldest: page.Oldest}); err != nil {
				return nil
			}
			after = page.Oldest - 1
			continue
		}
		for _, e := range page.Events {
			after = e.Seq
			if !f.keep(s, e) {
				continue
			}
			if err := send(e.Seq, e.Kind, viewFeedEvent(e)); err != nil {
				return nil // the client left
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		if len(page.Events) == eventBatch {
			continue
		}
		if err := waitFeed(ctx, page.Changed, keepalive.C, func() error {
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return err
			}
			return rc.Flush()
		}); err != nil {
			return nil
		}
	}
	return nil
}

// waitFeed waits for the feed to change, sending keepalives meanwhile.
func waitFeed(ctx context.Context, changed <-chan struct{}, tick <-chan time.Time, keepalive func() error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return nil
		case <-tick:
			if err := keepalive(); err != nil {
				return err
			}
		}
	}
}
