package httpapi

import (
	"encoding/json"

	"net/http"
	"strconv"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

type workerClaimRequest struct {
	WorkerID  string   `json:"worker_id"`
	Streams   []string `json:"streams"`
	MaxWaitMS int64    `json:"max_wait_ms"`
}

type workerClaimAnswer struct {
	Claimed           bool            `json:"claimed"`
	JobID             string          `json:"job_id,omitempty"`
	AttemptID         string          `json:"attempt_id,omitempty"`
	LeaseToken        string          `json:"lease_token,omitempty"`
	Stream            string          `json:"stream,omitempty"`
	MessageID         string          `json:"message_id,omitempty"`
	Payload           json.RawMessage `json:"payload,omitempty"`
	LeaseTTLSeconds   float64         `json:"lease_ttl_seconds,omitempty"`
	HeartbeatInterval float64         `json:"heartbeat_interval_seconds,omitempty"`
	Attempt           int             `json:"attempt,omitempty"`
	MaxAttempts       int             `json:"max_attempts,omitempty"`
}

// messageID names the queue entry a claim took: the Raft index at which
// the job last entered its stream.
func messageID(j *fsm.Job) string { return strconv.FormatUint(j.QueueIndex, 10) }

// handleWorkerClaim claims the oldest job of the first stream that has one,
// waiting up to max_wait_ms for one (queue.Service.ClaimNext).
func (s *Server) handleWorkerClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req workerClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.MaxWaitMS < 0 {
		return badRequest("max_wait_ms must not be negative")
	}
	// Cap in milliseconds first: a huge max_wait_ms would overflow a Duration.
	wait := time.Duration(min(req.MaxWaitMS, s.queue.Config().MaxClaimWait.Milliseconds())) * time.Millisecond
	j, index, err := s.queue.ClaimNext(r.Context(), queue.ClaimNextInput{Streams: req.Streams,
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, Wait: wait})
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	if j == nil {
		writeJSON(w, http.StatusOK, workerClaimAnswer{Claimed: false})
		return nil
	}
	writeJSON(w, http.StatusOK, s.claimAnswer(j))
	return nil
}

func (s *Server) claimAnswer(j *fsm.Job) workerClaimAnswer {
	ttl := time.Duration(j.Lease.ExpiresAt - j.StartedAt)
	return workerClaimAnswer{
		Claimed: true, JobID: j.ID, AttemptID: j.Lease.AttemptID, LeaseToken: j.Lease.Token,
		Stream: j.Stream, MessageID: messageID(j), Payload: j.Payload,
		LeaseTTLSeconds: ttl.Seconds(), HeartbeatInterval: (ttl / 3).Seconds(),
		Attempt: j.Attempts, MaxAttempts: j.MaxAttempts,
	}
}

type workerRef struct {
	WorkerID   string `json:"worker_id"`
	JobID      string `json:"job_id"`
	AttemptID  string `json:"attempt_id"`
	LeaseToken string `json:"lease_token"`
	Stream     string `json:"stream"`
	MessageID  string `json:"message_id"`
}

func (ref workerRef) validate(needAttempt bool) error {
	if ref.WorkerID == "" || ref.JobID == "" || ref.LeaseToken == "" {
		return badRequest("worker_id, job_id and lease_token are required")
	}
	if needAttempt && ref.AttemptID == "" {
		return badRequest("attempt_id is required")
	}
	return nil
}

func (ref workerRef) lease() fsm.LeaseRef {
	return fsm.LeaseRef{JobID: ref.JobID, AttemptID: ref.AttemptID, Token: ref.LeaseToken}
}

// workerRefusal answers a fenced-off call with ok:false and the error.
func (s *Server) workerRefusal(w http.ResponseWriter, err error) error {
	ae := classify(err)
	if ae.Status != http.StatusConflict && ae.Status != http.StatusForbidden && ae.Status != http.StatusNotFound {
		return err
	}
	if ae.Code == codeIllegal {
		// Every worker call carries a lease token, and a job that is not
		// running has no current lease: the token is stale (the lease was
		// reaped, released, or the job finished under another attempt).
		ae = &apiError{Status: http.StatusConflict, Code: codeStaleLease, Message: ae.Message + " (lease token is no longer current)"}
	}
	writeJSON(w, ae.Status, map[string]interface{}{"ok": false, "error": errorDetail{Code: ae.Code, Message: ae.Message}})
	return nil
}

func (s *Server) handleWorkerHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req workerRef
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := req.validate(false); err != nil {
		return err
	}
	res, index, err := s.queue.Heartbeat(r.Context(), s.heartbeatInput(c, req.lease(), fsm.Actor{Role: c.role, WorkerID: req.WorkerID}))
	s.setIndex(w, index)
	if err != nil {
		return s.workerRefusal(w, err)
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"ok": true, "lease_expires_at": ts(res.Job.Lease.ExpiresAt)})
	return nil
}

func (s *Server) handleWorkerComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		workerRef
		Result json.RawMessage `json:"result"`
		Stdout string          `json:"stdout"`
		Stderr string          `json:"stderr"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := req.validate(true); err != nil {
		return err
	}
	res, index, err := s.queue.Complete(r.Context(), queue.CompleteInput{Ref: req.lease(),
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
	s.setIndex(w, index)
	if err != nil {
		return s.workerRefusal(w, err)
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"ok": true, "ack": true, "duplicate": res.Duplicate})
	return nil
}

func (s *Server) handleWorkerFail(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		workerRef
		Error  json.RawMessage `json:"error"`
		Stdout string          `json:"stdout"`
		Stderr string          `json:"stderr"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := req.validate(true); err != nil {
		return err
	}
	je, err := parseJobError(req.Error)
	if err != nil {
		return err
	}
	res, index, err := s.queue.Fail(r.Context(), queue.FailInput{Ref: req.lease(),
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, Error: je, Requeue: je.Retryable, Stdout: req.Stdout, Stderr: req.Stderr})
	s.setIndex(w, index)
	if err != nil {
		return s.workerRefusal(w, err)
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"ok": true, "ack": true, "requeued": res.Requeued, "dlq": res.DLQ, "duplicate": res.Duplicate})
	return nil
}

func (s *Server) handleDLQList(w http.ResponseWriter, r *http.Request, c *call) error {
	f, err := listFilter(r)
	if err != nil {
		return err
	}
	jobs, next, err := s.queue.ListDLQ(f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewList(jobs, next))
	return nil
}

func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request, c *call) error {
	res, index, err := s.queue.Redrive(r.Context(), r.PathValue("id"), fsm.Actor{Role: c.role})
	return s.answerJob(w, res, index, err)
}
