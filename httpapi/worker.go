package httpapi

import (
	"context"
	"encoding/json"

	"net/http"
	"strconv"
	"time"

	"github.com/spine-queue/spine/fsm"
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

// handleWorkerClaim claims the oldest job of the first stream that has one.
// With nothing to claim it waits — on a watch of its queue lanes in the state store, so
// it wakes as soon as a matching job is committed — up to max_wait_ms.
func (s *Server) handleWorkerClaim(w http.ResponseWriter, r *http.Request, c *call) error {
	var req workerClaimRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.WorkerID == "" || len(req.WorkerID) > 128 {
		return badRequest("worker_id is required (at most 128 bytes)")
	}
	if len(req.Streams) == 0 {
		req.Streams = []string{fsm.DefaultStream}
	}
	if len(req.Streams) > 32 {
		return badRequest("at most 32 streams per claim")
	}
	for _, st := range req.Streams {
		if !nameRE.MatchString(st) {
			return badRequest("stream %q is not a valid stream name", st)
		}
	}
	if req.MaxWaitMS < 0 {
		return badRequest("max_wait_ms must not be negative")
	}
	// Cap in milliseconds first: a huge max_wait_ms would overflow a Duration.
	wait := time.Duration(min(req.MaxWaitMS, s.cfg.MaxClaimWait.Milliseconds())) * time.Millisecond
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// A node shutting down ends the wait early (Shutdown).
	defer context.AfterFunc(s.draining, cancel)()

	targets := []string{c.role, req.WorkerID}
	actor := fsm.Actor{Role: c.role, WorkerID: req.WorkerID}
	s.claimWaiters.Add(1)
	defer s.claimWaiters.Add(-1)
	for {
		j, ws := s.state.Peek().NextClaimable(req.Streams, targets)
		if j != nil {
			cmd := fsm.ClaimCommand{Now: s.now(), Streams: req.Streams, Targets: targets, Actor: actor,
				AttemptID: s.cfg.NewID(), LeaseToken: s.cfg.NewID(), LeaseNanos: s.cfg.Lease.Nanoseconds()}
			// The claim is applied under a context the caller's departure does
			// not cancel: cancelling mid-apply would leave a claim that may have
			// committed with nobody to answer or release it (a job stuck running
			// until its lease expires). Knowing the outcome, a departed caller's
			// job is given back at once.
			actx, acancel := context.WithTimeout(context.WithoutCancel(r.Context()), claimApplyTimeout)
			res, err := s.apply(actx, w, fsm.CmdClaim, &cmd)
			acancel()
			if err != nil {
				return err
			}
			if res.Claimed {
				if r.Context().Err() != nil {
					// The caller left while the claim committed: give the job back now
					// rather than leaving it to the reaper.
					s.giveBack(res.Job)
					return r.Context().Err()
				}
				writeJSON(w, http.StatusOK, s.claimAnswer(res.Job))
				return nil
			}
			// Another claimant won the race; look again.
			continue
		}
		if err := ws.WatchCtx(ctx); err != nil {
			if r.Context().Err() != nil {
				return r.Context().Err()
			}
			writeJSON(w, http.StatusOK, workerClaimAnswer{Claimed: false})
			return nil
		}
		if !s.cluster.IsLeader() {
			return errorf(http.StatusServiceUnavailable, codeNoLeader, "this node lost leadership while the claim waited; retry")
		}
	}
}

// claimApplyTimeout bounds the apply of one claim (see handleWorkerClaim).
const claimApplyTimeout = 10 * time.Second

func (s *Server) giveBack(j *fsm.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := j.Lease
	_, err := s.apply(ctx, nil, fsm.CmdRelease, &fsm.ReleaseCommand{Now: s.now(),
		Ref:   fsm.LeaseRef{JobID: j.ID, AttemptID: l.AttemptID, Token: l.Token},
		Actor: fsm.Actor{Role: l.Owner, WorkerID: l.WorkerID}, Reason: "claimant disconnected before the answer"})
	if err != nil {
		s.logger.Warn("could not release a job claimed for a departed caller; the reaper will", "job", j.ID, "error", err)
	}
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
	res, err := s.heartbeat(r.Context(), w, c, &fsm.HeartbeatCommand{Now: s.now(), Ref: req.lease(),
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, LeaseNanos: s.cfg.Lease.Nanoseconds()})
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
	res, err := s.apply(r.Context(), w, fsm.CmdComplete, &fsm.CompleteCommand{Now: s.now(), Ref: req.lease(),
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
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
	res, err := s.apply(r.Context(), w, fsm.CmdFail, &fsm.FailCommand{Now: s.now(), Ref: req.lease(),
		Actor: fsm.Actor{Role: c.role, WorkerID: req.WorkerID}, Error: je, Requeue: je.Retryable, Stdout: req.Stdout, Stderr: req.Stderr})
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
	switch f.State {
	case "":
		f.Visible = func(j *fsm.Job) bool { return j.State == fsm.StateFailed || j.State == fsm.StateDead }
	case fsm.StateFailed, fsm.StateDead:
	default:
		return badRequest("the dead-letter view holds only failed and dead jobs")
	}
	jobs, next, err := s.state.Read().List(f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewList(jobs, next))
	return nil
}

func (s *Server) handleRedrive(w http.ResponseWriter, r *http.Request, c *call) error {
	res, err := s.apply(r.Context(), w, fsm.CmdRedrive, &fsm.RedriveCommand{Now: s.now(), JobID: r.PathValue("id"), Actor: fsm.Actor{Role: c.role}})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
}
