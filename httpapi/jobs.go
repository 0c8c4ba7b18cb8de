package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The v0 job routes: each decodes its request, calls the queue service and
// encodes the answer.

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	req := createRequests.Get().(*api.JobCreateRequest)
	defer func() {
		*req = api.JobCreateRequest{}
		createRequests.Put(req)
	}()
	if err := decode(c, req); err != nil {
		return err
	}
	key := r.Header.Get(api.HeaderIdempotencyKey)
	if req.IdempotencyKey != "" {
		if key != "" && key != req.IdempotencyKey {
			return badRequest("Idempotency-Key header and idempotencyKey field differ")
		}
		key = req.IdempotencyKey
	}
	req.IdempotencyKey = key
	var v api.Job
	index, err := s.createJobInto(r.Context(), c.caller, req, &v)
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if v.Duplicate {
		status = http.StatusOK
	}
	writeJob(w, status, &v)
	return nil
}

// createRequests holds the requests handleCreate decodes into: one made
// per create goes to the heap (it is decoded through an interface), in
// the size class of the job the create makes, whose spans it would share
// and leave part empty once collected.
var createRequests = sync.Pool{New: func() any { return new(api.JobCreateRequest) }}

// createJob creates the job req asks for, as role (the route's and the MCP
// enqueue tool's): its view, with Duplicate set when req's idempotency key
// named a job made before.
func (s *Server) createJob(ctx context.Context, caller queue.Caller, req *api.JobCreateRequest) (*api.Job, uint64, error) {
	v := new(api.Job)
	index, err := s.createJobInto(ctx, caller, req, v)
	if err != nil {
		return nil, index, err
	}
	return v, index, nil
}

// createJobInto is createJob filling v.
func (s *Server) createJobInto(ctx context.Context, caller queue.Caller, req *api.JobCreateRequest, v *api.Job) (uint64, error) {
	in, err := createInput(caller, req)
	if err != nil {
		return 0, err
	}
	j, created, index, err := s.queue.Create(ctx, in)
	if err != nil {
		return index, err
	}
	viewJobInto(v, j)
	v.Duplicate = !created
	return index, nil
}

// createInput is the service's input for the create req asks for, as caller
// (a job's, or a schedule's job template).
func createInput(caller queue.Caller, req *api.JobCreateRequest) (queue.CreateInput, error) {
	in := queue.CreateInput{Payload: req.Payload, Target: req.Target, TaskClass: req.TaskClass, IdempotencyKey: req.IdempotencyKey,
		Priority: req.Priority, ConcurrencyKey: req.ConcurrencyKey, ConcurrencyLimit: req.ConcurrencyLimit, DependsOn: req.DependsOn,
		Requires: req.Requires, ResultSchema: req.ResultSchema, Actor: caller.Actor(""), RateLimit: rateInput(req.RateLimit)}
	switch req.OnDependencyFailure {
	case "", "fail":
	case "run":
		in.RunOnDepFailure = true
	default:
		return in, badRequest(`onDependencyFailure must be "fail" or "run"`)
	}
	if !req.RunAt.IsZero() {
		n, err := queue.RunAtNanos(req.RunAt)
		if err != nil {
			return in, err
		}
		in.RunAt = n
	}
	if req.DelaySeconds < 0 || req.DelaySeconds > queue.MaxScheduleDays*24*3600 {
		return in, badRequest("delaySeconds must be 0 to %d (%d days)", queue.MaxScheduleDays*24*3600, queue.MaxScheduleDays)
	}
	in.Delay = time.Duration(req.DelaySeconds) * time.Second
	if b := req.Backoff; b != nil {
		in.BackoffSet, in.BackoffBase, in.BackoffMax = true, b.Base, b.Max
	}
	if req.HasMaxAttempts() {
		in.MaxAttempts = &req.MaxAttempts
	}
	if req.HasStream() {
		in.Stream = &req.Stream
	}
	if req.HasLeaseSeconds() {
		ls := int64(req.LeaseSeconds)
		in.LeaseSeconds = &ls
	}
	return in, nil
}

// lookup reads the job of the route's {id} that the caller may see.
func (s *Server) lookup(r *http.Request, c *call) (*fsm.Job, error) {
	return s.queue.Job(c.caller, r.PathValue("id"))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, c *call) error {
	j, err := s.lookup(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewJob(j))
	return nil
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, c *call) error {
	j, err := s.lookup(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewEvents(j))
	return nil
}

func (s *Server) handleAttempts(w http.ResponseWriter, r *http.Request, c *call) error {
	j, err := s.lookup(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewAttempts(j))
	return nil
}

// listFilter parses the paging and filter query parameters shared by
// GET /jobs and GET /dlq.
func listFilter(r *http.Request) (fsm.ListFilter, error) {
	return listQuery(r.URL.Query())
}

// listQuery is listFilter of the query q (also the MCP list tools').
func listQuery(q url.Values) (fsm.ListFilter, error) {
	f := fsm.ListFilter{Limit: 100, Stream: q.Get("stream"), Target: q.Get("target"), Schedule: q.Get("schedule")}
	if v := q.Get("status"); v != "" {
		st := fsm.State(strings.ToLower(v))
		if !st.Valid() {
			return f, badRequest("status must be one of queued, running, done, failed, dead, cancelled")
		}
		f.State = st
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, badRequest("limit must be an integer from 1 to 1000")
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return f, badRequest("cursor must be the nextCursor of a previous page")
		}
		f.After = n
	}
	return f, nil
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := listFilter(r)
	if err != nil {
		return err
	}
	jobs, next, err := s.queue.List(c.caller, f)
	if err != nil {
		return err
	}
	writeJobPage(w, jobs, next)
	return nil
}

// leaseRef is the lease a v0 call on the route's {id} names, if it names
// one (the optional fencing fields).
func leaseRef(r *http.Request, token, attemptID string) fsm.LeaseRef {
	return fsm.LeaseRef{JobID: r.PathValue("id"), AttemptID: attemptID, Token: token}
}

// answerJob answers a v0 write with the job as it now is (or the refusal).
func (s *Server) answerJob(w http.ResponseWriter, res *fsm.Result, index uint64, err error) error {
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewJob(res.Job))
	return nil
}

func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	j, index, err := s.queue.ClaimJob(r.Context(), r.PathValue("id"), c.caller.Actor(req.WorkerID), req.Capabilities)
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	v := viewJob(j)
	v.LeaseToken = j.Lease.Token
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobCancelRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Cancel(r.Context(), r.PathValue("id"), req.Reason, c.caller.Actor(""))
	return s.answerJob(w, res, index, err)
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobHeartbeatRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ref, err := v0Lease(r, req.LeaseToken, req.AttemptID, req.WorkerLeaseFields)
	if err != nil {
		return err
	}
	in := s.heartbeatInput(c, ref, c.caller.Actor(req.WorkerID))
	in.Progress, in.Checkpoint = reported(req.Progress), reported(req.Checkpoint)
	res, index, err := s.queue.Heartbeat(r.Context(), in)
	return s.answerJob(w, res, index, err)
}

// heartbeatInput carries what the wrapper learned about a heartbeat.
func (s *Server) heartbeatInput(c *call, ref fsm.LeaseRef, actor fsm.Actor) queue.HeartbeatInput {
	return queue.HeartbeatInput{Ref: ref, Actor: actor, Consistent: c.consistent, Local: c.local, MinIndex: c.minIndex}
}

func (s *Server) handleComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobCompleteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ref, err := v0Lease(r, req.LeaseToken, req.AttemptID, req.WorkerLeaseFields)
	if err != nil {
		return err
	}
	res, index, err := s.queue.Complete(r.Context(), queue.CompleteInput{Ref: ref, Actor: c.caller.Actor(req.WorkerID),
		Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
	return s.answerJob(w, res, index, err)
}

// jobError is the state machine's form of a request's error (nil: none).
func jobError(e *api.JobError) fsm.JobError {
	if e == nil {
		return fsm.JobError{}
	}
	return fsm.JobError(*e)
}

func (s *Server) handleFail(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobFailRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ref, err := v0Lease(r, req.LeaseToken, req.AttemptID, req.WorkerLeaseFields)
	if err != nil {
		return err
	}
	requeue := true
	switch {
	case req.Requeue != nil:
		requeue = *req.Requeue
	case namesRetryable(c.body):
		requeue = req.Error.Retryable
	}
	res, index, err := s.queue.Fail(r.Context(), queue.FailInput{Ref: ref, Actor: c.caller.Actor(req.WorkerID),
		Error: jobError(req.Error), Requeue: requeue, Stdout: req.Stdout, Stderr: req.Stderr})
	return s.answerJob(w, res, index, err)
}

// v0Lease is the lease a v0 lease call names: by the v0 fields or the
// worker contract's (api.WorkerLeaseFields), refused when the two disagree
// or job_id is not the job of the path.
func v0Lease(r *http.Request, token, attempt string, alt api.WorkerLeaseFields) (fsm.LeaseRef, error) {
	if alt.JobIDAlt != "" && alt.JobIDAlt != r.PathValue("id") {
		return fsm.LeaseRef{}, badRequest("job_id %q is not the job of the path, %q", alt.JobIDAlt, r.PathValue("id"))
	}
	token, err := oneOf("leaseToken", token, "lease_token", alt.LeaseTokenAlt)
	if err != nil {
		return fsm.LeaseRef{}, err
	}
	attempt, err = oneOf("attemptId", attempt, "attempt_id", alt.AttemptIDAlt)
	if err != nil {
		return fsm.LeaseRef{}, err
	}
	return leaseRef(r, token, attempt), nil
}

// oneOf is the value of a field the body may give under either of two
// names (the v0 and the worker contract's): refused when both are given
// and differ.
func oneOf(name, v, altName, alt string) (string, error) {
	if v != "" && alt != "" && v != alt {
		return "", badRequest("%s and %s differ", name, altName)
	}
	return cmp.Or(v, alt), nil
}

// namesRetryable reports whether a fail body's error is an object that
// names retryable.
func namesRetryable(body []byte) bool {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	var e map[string]json.RawMessage
	if json.Unmarshal(body, &b) != nil || json.Unmarshal(b.Error, &e) != nil {
		return false
	}
	_, ok := e["retryable"]
	return ok
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobReleaseRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ref, err := v0Lease(r, req.LeaseToken, req.AttemptID, req.WorkerLeaseFields)
	if err != nil {
		return err
	}
	if req.NotForMe && req.WorkerID == "" {
		return badRequest("not_for_me needs worker_id: the worker the job is not for")
	}
	res, index, err := s.queue.ReleaseFor(r.Context(), ref, c.caller.Actor(req.WorkerID), req.Reason,
		time.Duration(req.CooldownMS)*time.Millisecond, req.NotForMe)
	return s.answerJob(w, res, index, err)
}

func (s *Server) handleComment(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.JobCommentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Comment(r.Context(), r.PathValue("id"), c.caller.Actor(""), req.Text)
	return s.answerJob(w, res, index, err)
}
