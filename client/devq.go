package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/spine-queue/spine/api"
)

// The developer queue (/api/*, docs/devqueue.md): sessions, streams,
// tasks and the registry.

// Developer-queue types, as the API declares them.
type (
	Session             = api.Session
	Stream              = api.Stream
	Task                = api.Task
	TaskList            = api.TaskList
	Registry            = api.Registry
	DevStatus           = api.DevStatus
	PurgeResult         = api.PurgeResult
	EnqueueParams       = api.EnqueueRequest
	TaskCompleteParams  = api.TaskCompleteRequest
	TaskFailParams      = api.TaskFailRequest
	TaskHeartbeatParams = api.TaskHeartbeatRequest
	StreamCreateParams  = api.StreamCreateRequest
	SessionCreateParams = api.SessionCreateRequest
	TaskClaimParams     = api.TaskClaimRequest
	StreamQueue         = api.StreamQueue
	TaskStream          = api.TaskStream
	RegistryTool        = api.Tool
	RegistryTaskClass   = api.TaskClass
	RegistryScript      = api.Script
	RegistryProject     = api.Project
	TaskPurgeParams     = api.PurgeRequest
	TaskRequeueParams   = api.RequeueRequest
)

// TaskListParams filter a task listing. Zero fields are not sent.
type TaskListParams struct {
	Status string // queued, running, succeeded, failed
	Stream string
	Stale  bool
	Limit  int
	Cursor string
}

func devPath(parts ...string) string {
	p := "/api"
	for _, s := range parts {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// SessionCreate starts a session (head).
func (c *Client) SessionCreate(ctx context.Context, p *SessionCreateParams) (*Session, error) {
	req, err := jsonRequest(http.MethodPost, "/api/sessions", p)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	var s Session
	if _, _, err := c.call(ctx, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SessionList lists the sessions.
func (c *Client) SessionList(ctx context.Context) ([]*Session, error) {
	var out struct {
		Sessions []*Session `json:"sessions"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/sessions"}, &out); err != nil {
		return nil, err
	}
	return out.Sessions, nil
}

// SessionEnd ends a session and its streams (head). Ending an ended
// session answers it as it is.
func (c *Client) SessionEnd(ctx context.Context, name string) (*Session, error) {
	var s Session
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: devPath("sessions", name, "end"), write: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StreamCreate adds a stream to a session (head).
func (c *Client) StreamCreate(ctx context.Context, p *StreamCreateParams) (*Stream, error) {
	req, err := jsonRequest(http.MethodPost, "/api/streams", p)
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	var s Stream
	if _, _, err := c.call(ctx, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StreamList lists the streams of session (all when "").
func (c *Client) StreamList(ctx context.Context, session string) ([]*Stream, error) {
	q := url.Values{}
	setNonEmpty(q, "session", session)
	var out struct {
		Streams []*Stream `json:"streams"`
	}
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/streams", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Streams, nil
}

// StreamGet returns one stream.
func (c *Client) StreamGet(ctx context.Context, name string) (*Stream, error) {
	var s Stream
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: devPath("streams", name)}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// StreamEnd ends a stream (head).
func (c *Client) StreamEnd(ctx context.Context, name string) (*Stream, error) {
	var s Stream
	if _, _, err := c.call(ctx, &request{method: http.MethodPost, path: devPath("streams", name, "end"), write: true}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Enqueue adds a task (head). It always sends an idempotency key, so a
// retried enqueue never makes a second task; Duplicate marks the first
// task of a repeated key.
func (c *Client) Enqueue(ctx context.Context, params *EnqueueParams) (*Task, error) {
	p := *params
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = uuid.NewString()
	}
	req, err := jsonRequest(http.MethodPost, "/api/tasks", &p)
	if err != nil {
		return nil, err
	}
	req.write = true
	var t Task
	status, _, err := c.call(ctx, req, &t)
	if err != nil {
		return nil, err
	}
	t.Duplicate = status == http.StatusOK
	return &t, nil
}

// TaskListAll returns one page of tasks.
func (c *Client) TaskListAll(ctx context.Context, p *TaskListParams) (*TaskList, error) {
	q := url.Values{}
	if p != nil {
		setNonEmpty(q, "status", p.Status)
		setNonEmpty(q, "stream", p.Stream)
		setNonEmpty(q, "cursor", p.Cursor)
		if p.Stale {
			q.Set("stale", "true")
		}
		if p.Limit > 0 {
			q.Set("limit", strconv.Itoa(p.Limit))
		}
	}
	var out TaskList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/tasks", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TaskGet returns a task with its stream's instructions.
func (c *Client) TaskGet(ctx context.Context, id string) (*Task, error) {
	var t Task
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: devPath("tasks", id)}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// TaskRequeue clones a failed task under a new id (head), into stream if
// set. It is not repeated after an unknown outcome (it would clone twice).
func (c *Client) TaskRequeue(ctx context.Context, id, stream string) (*Task, error) {
	req, err := jsonRequest(http.MethodPost, devPath("tasks", id, "requeue"), &TaskRequeueParams{Stream: stream})
	if err != nil {
		return nil, err
	}
	req.write, req.mode = true, retryUnsent
	var t Task
	if _, _, err := c.call(ctx, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// TaskPeek returns the task a claim of stream would take next, or nil,
// claiming nothing. With wait > 0 the server holds the request up to that
// long (at most 30 s) until a task is queued.
func (c *Client) TaskPeek(ctx context.Context, stream string, wait time.Duration) (*Task, error) {
	q := url.Values{"stream": {stream}}
	if wait > 0 {
		q.Set("wait_ms", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var t Task
	status, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/peek", query: q, minTimeout: wait}, &t)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &t, nil
}

// TaskClaim claims the next task of a stream, or answers nil when there is
// none within p.WaitMS. The answer carries the lease token. A claim with a
// ClaimID is repeated like any idempotent write (a repeat answers the task
// the first one took); without one, only when it certainly was not
// applied.
func (c *Client) TaskClaim(ctx context.Context, p *TaskClaimParams) (*Task, error) {
	req, err := jsonRequest(http.MethodPost, "/api/claim", p)
	if err != nil {
		return nil, err
	}
	req.write = true
	if p.ClaimID == "" {
		req.mode = retryUnsent
	}
	req.minTimeout = time.Duration(p.WaitMS) * time.Millisecond
	var t Task
	status, _, err := c.call(ctx, req, &t)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &t, nil
}

// TaskComplete completes a task; the result needs a string "summary". With
// the claim's lease token a repeat answers the first answer, so it is
// retried.
func (c *Client) TaskComplete(ctx context.Context, id string, p *TaskCompleteParams) (*Task, error) {
	return c.taskWrite(ctx, id, "complete", p, p.LeaseToken != "")
}

// TaskFail fails a task with an error message; retried as TaskComplete.
func (c *Client) TaskFail(ctx context.Context, id string, p *TaskFailParams) (*Task, error) {
	return c.taskWrite(ctx, id, "fail", p, p.LeaseToken != "")
}

// TaskHeartbeat pushes a running task's stale and auto-fail marks back.
func (c *Client) TaskHeartbeat(ctx context.Context, id string, p *TaskHeartbeatParams) (*Task, error) {
	return c.taskWrite(ctx, id, "heartbeat", p, true)
}

func (c *Client) taskWrite(ctx context.Context, id, verb string, body any, idempotent bool) (*Task, error) {
	req, err := jsonRequest(http.MethodPost, devPath("tasks", id, verb), body)
	if err != nil {
		return nil, err
	}
	req.write = true
	if !idempotent {
		req.mode = retryUnsent
	}
	var t Task
	if _, _, err := c.call(ctx, req, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// RegistryGet returns the registry in force.
func (c *Client) RegistryGet(ctx context.Context) (*Registry, error) {
	var r Registry
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/registry"}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RegistrySet puts a registry in force (head): what spine reload sends.
func (c *Client) RegistrySet(ctx context.Context, r *Registry) (*Registry, error) {
	req, err := jsonRequest(http.MethodPut, "/api/registry", r)
	if err != nil {
		return nil, err
	}
	req.write = true
	var out Registry
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TaskPurge deletes finished tasks older than olderThan ("3d", "12h"; ""
// for the registry's retention) (head).
func (c *Client) TaskPurge(ctx context.Context, olderThan string) (*PurgeResult, error) {
	req, err := jsonRequest(http.MethodPost, "/api/purge", &TaskPurgeParams{OlderThan: olderThan})
	if err != nil {
		return nil, err
	}
	req.write = true
	var out PurgeResult
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DevStatus returns the developer queue's status: active sessions and
// streams, task counts.
func (c *Client) DevStatus(ctx context.Context) (*DevStatus, error) {
	var out DevStatus
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: "/api/status"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
