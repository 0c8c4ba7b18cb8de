package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The worker contract v1 routes (/internal/worker/*) and the dead-letter
// view.

// messageID names the queue entry a claim took: the Raft index at which
// the job last entered its stream.
func messageID(j *fsm.Job) string { return strconv.FormatUint(j.QueueIndex, 10) }

// handleWorkerClaim claims the oldest job of the first stream that has one,
// waiting up to max_wait_ms for one (queue.Service.ClaimNextBatch).
func (s *Server) handleWorkerClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	a, index, err := s.workerClaim(r.Context(), c.caller, &req)
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

// workerClaim is the worker contract's claim, for role (the route's and
// the MCP claim tool's).
func (s *Server) workerClaim(ctx context.Context, caller queue.Caller, req *api.WorkerClaimRequest) (*api.WorkerClaim, uint64, error) {
	in, err := s.claimInput(caller, req)
	if err != nil {
		return nil, 0, err
	}
	jobs, index, err := s.queue.ClaimNextBatch(ctx, in)
	if err != nil {
		return nil, index, err
	}
	return s.claimReply(caller, in, jobs), index, nil
}

// claimInput checks caller's worker claim req (a claim's, or a complete's
// next claim) and returns the claim it asks for.
func (s *Server) claimInput(caller queue.Caller, req *api.WorkerClaimRequest) (queue.ClaimNextInput, error) {
	req.WorkerID = boundWorker(caller, req.WorkerID)
	if err := queue.CheckWorkerID("worker_id", req.WorkerID, true); err != nil {
		return queue.ClaimNextInput{}, err
	}
	if req.MaxWaitMS < 0 {
		return queue.ClaimNextInput{}, badRequest("max_wait_ms must not be negative")
	}
	// Cap in milliseconds first: a huge max_wait_ms would overflow a Duration.
	wait := time.Duration(min(req.MaxWaitMS, s.queue.Config().MaxClaimWait.Milliseconds())) * time.Millisecond
	if req.MaxJobs < 0 || req.MaxJobs > fsm.MaxClaimBatch {
		return queue.ClaimNextInput{}, badRequest("max_jobs must be 1 to %d", fsm.MaxClaimBatch)
	}
	if err := caller.CheckWorker(req.WorkerID); err != nil {
		return queue.ClaimNextInput{}, err
	}
	streams, err := caller.ScopeStreams(req.Streams)
	if err != nil {
		return queue.ClaimNextInput{}, err
	}
	req.Streams = streams
	return queue.ClaimNextInput{Streams: streams, Actor: caller.Actor(req.WorkerID), Wait: wait,
		MaxJobs: req.MaxJobs, Capabilities: req.Capabilities}, nil
}

// claimReply is the answer of claim in, which took jobs (none: claimed
// false, with the streams where work waits).
func (s *Server) claimReply(caller queue.Caller, in queue.ClaimNextInput, jobs []*fsm.Job) *api.WorkerClaim {
	if len(jobs) == 0 {
		return &api.WorkerClaim{Claimed: false, Elsewhere: s.elsewhere(in.Streams, caller, in.Actor, in.Capabilities)}
	}
	a := claimAnswer(jobs[0])
	if in.MaxJobs > 0 {
		for _, j := range jobs {
			a.Jobs = append(a.Jobs, claimAnswer(j))
		}
	}
	return &a
}

func claimAnswer(j *fsm.Job) api.WorkerClaim {
	ttl := time.Duration(j.Lease.ExpiresAt - j.StartedAt)
	return api.WorkerClaim{
		Claimed: true, JobID: j.ID, AttemptID: j.Lease.AttemptID, LeaseToken: j.Lease.Token,
		Stream: j.Stream, MessageID: messageID(j), Payload: j.Payload,
		LeaseTTLSeconds: ttl.Seconds(), HeartbeatIntervalSeconds: (ttl / 3).Seconds(),
		Attempt: int(j.Attempts), MaxAttempts: int(j.MaxAttempts), Checkpoint: j.Extra().Checkpoint,
		ResultSchema: resultSchema(j),
	}
}

// elsewhere lists up to 10 streams other than asked with a job the
// claimant (actor, with capabilities caps) could take now, most queued
// first, for an answer that claimed nothing.
func (s *Server) elsewhere(asked []string, caller queue.Caller, actor fsm.Actor, caps []string) []api.StreamQueue {
	if len(asked) == 0 {
		asked = []string{fsm.DefaultStream}
	}
	var out []api.StreamQueue
	for _, si := range s.queue.StreamInfos(caller) {
		if n := si.Counts[fsm.StateQueued]; n > 0 && si.Pause == nil && !slices.Contains(asked, si.Name) && s.queue.HasWorkFor(si.Name, actor, caps) {
			out = append(out, api.StreamQueue{Name: si.Name, Queued: n})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Queued > out[j].Queued })
	return out[:min(len(out), 10)]
}

// reported is a heartbeat's progress or checkpoint as the queue takes it:
// nil when absent or JSON null.
func reported(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// workerLease checks the reference every worker call carries and returns
// the lease it names.
func workerLease(workerID, jobID, attemptID, token string, needAttempt bool) (fsm.LeaseRef, error) {
	if workerID == "" || jobID == "" || token == "" {
		return fsm.LeaseRef{}, badRequest("worker_id, job_id and lease_token are required")
	}
	if needAttempt && attemptID == "" {
		return fsm.LeaseRef{}, badRequest("attempt_id is required")
	}
	return fsm.LeaseRef{JobID: jobID, AttemptID: attemptID, Token: token}, nil
}

// workerRefusal answers a fenced-off call with ok:false and the error (a
// job the caller may not read is not found: queue.Service.ForCaller).
func (s *Server) workerRefusal(w http.ResponseWriter, c *call, jobID string, err error) error {
	ae := s.workerRefused(c.caller, jobID, err)
	if ae == nil {
		return err
	}
	writeJSON(w, ae.Status, api.WorkerRefusal{OK: false, Error: api.ErrorDetail{Code: ae.Code, Message: ae.Message, Mismatches: ae.Mismatches}})
	return nil
}

// workerRefused is a worker call's refusal in the API's terms, when err
// fenced the call off (409, 403 or 404) or refused its result (400
// result_mismatch), else nil.
func (s *Server) workerRefused(caller queue.Caller, jobID string, err error) *apiError {
	ae := classify(s.queue.ForCaller(caller, jobID, err))
	if ae.Code == api.CodeResultMismatch {
		return ae
	}
	if ae.Status != http.StatusConflict && ae.Status != http.StatusForbidden && ae.Status != http.StatusNotFound {
		return nil
	}
	if ae.Code == api.CodeIllegalTransition {
		// Every worker call carries a lease token, and a job that is not
		// running has no current lease: the token is stale (the lease was
		// reaped, released, or the job finished under another attempt).
		ae = &apiError{Status: http.StatusConflict, Code: api.CodeStaleLease, Message: ae.Message + " (lease token is no longer current)"}
	}
	return ae
}

func (s *Server) handleWorkerHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerHeartbeatRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.workerHeartbeat(r.Context(), c, &req)
	s.setIndex(w, index)
	if err != nil {
		return s.workerRefusal(w, c, req.JobID, err)
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// workerHeartbeat is the worker contract's heartbeat (the route's and the
// MCP heartbeat tool's); a refusal is the queue's error (workerRefused).
func (s *Server) workerHeartbeat(ctx context.Context, c *call, req *api.WorkerHeartbeatRequest) (*api.WorkerHeartbeatResult, uint64, error) {
	ref, err := workerLease(req.WorkerID, req.JobID, req.AttemptID, req.LeaseToken, false)
	if err != nil {
		return nil, 0, err
	}
	in := s.heartbeatInput(c, ref, c.caller.Actor(req.WorkerID))
	in.Progress, in.Checkpoint = reported(req.Progress), reported(req.Checkpoint)
	res, index, err := s.queue.Heartbeat(ctx, in)
	if err != nil {
		return nil, index, err
	}
	return &api.WorkerHeartbeatResult{OK: true, LeaseExpiresAt: api.Time(res.Job.Lease.ExpiresAt), Cancel: res.Job.CancelRequested()}, index, nil
}

func (s *Server) handleWorkerComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerCompleteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ack, index, err := s.workerComplete(r.Context(), c.caller, &req)
	s.setIndex(w, index)
	if err != nil {
		return s.workerRefusal(w, c, req.JobID, err)
	}
	writeJSON(w, http.StatusOK, api.WorkerCompleteAck{OK: ack.OK, Ack: ack.Ack, Duplicate: ack.Duplicate, Next: ack.Next})
	return nil
}

// workerComplete is the worker contract's complete (the route's and the
// MCP complete tool's); a refusal is the queue's error (workerRefused).
func (s *Server) workerComplete(ctx context.Context, caller queue.Caller, req *api.WorkerCompleteRequest) (*api.WorkerAck, uint64, error) {
	req.WorkerID = boundWorker(caller, req.WorkerID)
	ref, err := workerLease(req.WorkerID, req.JobID, req.AttemptID, req.LeaseToken, true)
	if err != nil {
		return nil, 0, err
	}
	in := queue.CompleteInput{Ref: ref, Actor: caller.Actor(req.WorkerID), Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr}
	if req.Next == nil {
		res, index, err := s.queue.Complete(ctx, in)
		if err != nil {
			return nil, index, err
		}
		return &api.WorkerAck{OK: true, Ack: true, Duplicate: res.Duplicate}, index, nil
	}
	if req.Next.WorkerID != "" && req.Next.WorkerID != req.WorkerID {
		return nil, 0, badRequest("next.worker_id must be the complete's worker_id (or left out)")
	}
	req.Next.WorkerID = req.WorkerID
	next, err := s.claimInput(caller, req.Next)
	if err != nil {
		return nil, 0, err
	}
	res, jobs, index, err := s.queue.CompleteNext(ctx, in, next)
	if err != nil {
		return nil, index, err
	}
	return &api.WorkerAck{OK: true, Ack: true, Duplicate: res.Duplicate, Next: s.claimReply(caller, next, jobs)}, index, nil
}

func (s *Server) handleWorkerFail(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerFailRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.answerWorker(w, c, req.JobID)(s.workerFail(r.Context(), c.caller, &req))
}

// answerWorker answers a worker fail or release: the ack, or the refusal
// of job jobID.
func (s *Server) answerWorker(w http.ResponseWriter, c *call, jobID string) func(*api.WorkerAck, uint64, error) error {
	return func(ack *api.WorkerAck, index uint64, err error) error {
		s.setIndex(w, index)
		if err != nil {
			return s.workerRefusal(w, c, jobID, err)
		}
		writeJSON(w, http.StatusOK, ack)
		return nil
	}
}

// workerFail is the worker contract's fail (the route's and the MCP fail
// tool's); a refusal is the queue's error (workerRefused).
func (s *Server) workerFail(ctx context.Context, caller queue.Caller, req *api.WorkerFailRequest) (*api.WorkerAck, uint64, error) {
	req.WorkerID = boundWorker(caller, req.WorkerID)
	ref, err := workerLease(req.WorkerID, req.JobID, req.AttemptID, req.LeaseToken, true)
	if err != nil {
		return nil, 0, err
	}
	je := jobError(req.Error)
	requeue := je.Retryable
	if req.Requeue != nil {
		requeue = *req.Requeue
	}
	res, index, err := s.queue.Fail(ctx, queue.FailInput{Ref: ref,
		Actor: caller.Actor(req.WorkerID), Error: je, Requeue: requeue, Stdout: req.Stdout, Stderr: req.Stderr})
	if err != nil {
		return nil, index, err
	}
	return &api.WorkerAck{OK: true, Ack: true, Requeued: res.Requeued, DLQ: res.DLQ, Duplicate: res.Duplicate, Status: failStatus(res, req.AttemptID)}, index, nil
}

// failStatus is the status a fail left its job in: for a repeat, the first
// fail's, whatever the job's status is now (its answer is the first's).
func failStatus(res *fsm.Result, attemptID string) api.JobStatus {
	j := res.Job
	switch {
	case res.Requeued:
		return api.JobStatusQueued
	case !res.Duplicate:
		return api.JobStatus(j.State)
	case !res.DLQ:
		return api.JobStatusCancelled
	}
	// A repeat of a fail that dead-lettered the job: failed or dead, as
	// the job still reads if that attempt was its last; else (re-driven
	// since) dead when it was retryable at its last attempt.
	log := j.AttemptLog()
	for i := len(log) - 1; i >= 0; i-- {
		if at := log[i]; at.ID == attemptID {
			if i == len(log)-1 && (j.State == fsm.StateFailed || j.State == fsm.StateDead) {
				return api.JobStatus(j.State)
			}
			if at.Error != nil && at.Error.Retryable && i+1 >= int(j.MaxAttempts) {
				return api.JobStatusDead
			}
			break
		}
	}
	return api.JobStatusFailed
}

// handleWorkerRelease gives a job back without using an attempt, fenced by
// its lease token, optionally out of reach for cooldown_ms.
func (s *Server) handleWorkerRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req api.WorkerReleaseRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	return s.answerWorker(w, c, req.JobID)(s.workerRelease(r.Context(), c.caller, &req))
}

// workerRelease is the worker contract's release (the route's and the MCP
// release tool's); a refusal is the queue's error (workerRefused).
func (s *Server) workerRelease(ctx context.Context, caller queue.Caller, req *api.WorkerReleaseRequest) (*api.WorkerAck, uint64, error) {
	req.WorkerID = boundWorker(caller, req.WorkerID)
	ref, err := workerLease(req.WorkerID, req.JobID, req.AttemptID, req.LeaseToken, false)
	if err != nil {
		return nil, 0, err
	}
	if req.CooldownMS < 0 || req.CooldownMS > queue.MaxCooldown.Milliseconds() {
		return nil, 0, badRequest("cooldown_ms must be 0 to %d", queue.MaxCooldown.Milliseconds())
	}
	res, index, err := s.queue.ReleaseFor(ctx, ref, caller.Actor(req.WorkerID), req.Reason,
		time.Duration(req.CooldownMS)*time.Millisecond, req.NotForMe)
	if err != nil {
		return nil, index, err
	}
	return &api.WorkerAck{OK: true, Ack: true, Requeued: res.Job.State == fsm.StateQueued, Status: api.JobStatus(res.Job.State)}, index, nil
}

// handleWorkerHeld lists the jobs the caller's role holds leases on for
// worker_id, each as its claim answered it (lease token included): how a
// worker that lost its claims' answers picks its work up again.
func (s *Server) handleWorkerHeld(w http.ResponseWriter, r *http.Request, c *call) error {
	out, err := s.workerHeld(c.caller, r.URL.Query().Get("worker_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workerHeld is the worker contract's held list (the route's and the MCP
// held_jobs tool's).
func (s *Server) workerHeld(caller queue.Caller, worker string) (*api.WorkerHeld, error) {
	worker = boundWorker(caller, worker)
	if worker == "" {
		return nil, badRequest("worker_id is required")
	}
	jobs, err := s.queue.Held(caller, worker)
	if err != nil {
		return nil, err
	}
	out := &api.WorkerHeld{WorkerID: worker, Jobs: []api.WorkerClaim{}}
	for _, j := range jobs {
		a := claimAnswer(j)
		// A heartbeat moved the expiry since the claim: the lease's length
		// is the job's own, or the cluster's.
		ttl := s.queue.Config().Lease
		if j.Extra().LeaseSeconds > 0 {
			ttl = time.Duration(j.Extra().LeaseSeconds) * time.Second
		}
		a.LeaseTTLSeconds, a.HeartbeatIntervalSeconds = ttl.Seconds(), (ttl / 3).Seconds()
		out.Jobs = append(out.Jobs, a)
	}
	return out, nil
}

func (s *Server) handleDLQList(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := listFilter(r)
	if err != nil {
		return err
	}
	jobs, next, err := s.queue.ListDLQFor(c.caller, f)
	if err != nil {
		return err
	}
	writeJobPage(w, jobs, next)
	return nil
}

func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := noFields(c); err != nil {
		return err
	}
	res, index, err := s.queue.Redrive(r.Context(), r.PathValue("id"), c.caller.Actor(""))
	return s.answerJob(w, res, index, err)
}

// boundWorker is the worker id a worker call acts as: the one it names,
// else the one its token is bound to (a call naming another is refused
// by queue.Caller.CheckWorker, when its write is proposed or here).
func boundWorker(c queue.Caller, named string) string {
	if named == "" {
		return c.WorkerID
	}
	return named
}
