package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// The v0 job routes: each decodes its request, calls the queue service and
// encodes the answer.

type createRequest struct {
	Payload        json.RawMessage `json:"payload"`
	MaxAttempts    *int            `json:"maxAttempts"`
	Target         *string         `json:"target"`
	Stream         *string         `json:"stream"`
	LeaseSeconds   *int64          `json:"leaseSeconds"`
	TaskClass      string          `json:"taskClass"`
	IdempotencyKey string          `json:"idempotencyKey"`
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request, c *call) error {
	var req createRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if req.IdempotencyKey != "" {
		if key != "" && key != req.IdempotencyKey {
			return badRequest("Idempotency-Key header and idempotencyKey field differ")
		}
		key = req.IdempotencyKey
	}
	in := queue.CreateInput{Payload: req.Payload, MaxAttempts: req.MaxAttempts, Stream: req.Stream,
		LeaseSeconds: req.LeaseSeconds, TaskClass: req.TaskClass, IdempotencyKey: key, Actor: fsm.Actor{Role: c.role}}
	if req.Target != nil {
		in.Target = *req.Target
	}
	j, created, index, err := s.queue.Create(r.Context(), in)
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	writeJSON(w, status, viewJob(j))
	return nil
}

// lookup reads the job of the route's {id} that the caller may see.
func (s *Server) lookup(r *http.Request, c *call) (*fsm.Job, error) {
	return queue.Lookup(s.queue.State().Peek(), c.role, r.PathValue("id"))
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
	writeJSON(w, http.StatusOK, map[string]interface{}{"jobId": j.ID, "events": viewEvents(j)})
	return nil
}

func (s *Server) handleAttempts(w http.ResponseWriter, r *http.Request, c *call) error {
	j, err := s.lookup(r, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]interface{}{"jobId": j.ID, "attempts": viewAttempts(j)})
	return nil
}

// listFilter parses the paging and filter query parameters shared by
// GET /jobs and GET /dlq.
func listFilter(r *http.Request) (fsm.ListFilter, error) {
	q := r.URL.Query()
	f := fsm.ListFilter{Limit: 100, Stream: q.Get("stream"), Target: q.Get("target")}
	if v := q.Get("status"); v != "" {
		st := fsm.State(strings.ToLower(v))
		if !st.Valid() {
			return f, badRequest("status must be one of queued, running, done, failed, dead")
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
	jobs, next, err := s.queue.List(c.role, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewList(jobs, next))
	return nil
}

// leaseFields are the optional fencing fields a v0 call may carry.
type leaseFields struct {
	LeaseToken string `json:"leaseToken"`
	AttemptID  string `json:"attemptId"`
}

func (l leaseFields) ref(r *http.Request) fsm.LeaseRef {
	return fsm.LeaseRef{JobID: r.PathValue("id"), AttemptID: l.AttemptID, Token: l.LeaseToken}
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
	var req struct {
		WorkerID string `json:"workerId"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	j, index, err := s.queue.ClaimJob(r.Context(), r.PathValue("id"), fsm.Actor{Role: c.role, WorkerID: req.WorkerID})
	s.setIndex(w, index)
	if err != nil {
		return err
	}
	v := viewJob(j)
	v.LeaseToken = j.Lease.Token
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req leaseFields
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Heartbeat(r.Context(), s.heartbeatInput(c, req.ref(r), fsm.Actor{Role: c.role}))
	return s.answerJob(w, res, index, err)
}

// heartbeatInput carries what the wrapper learned about a heartbeat.
func (s *Server) heartbeatInput(c *call, ref fsm.LeaseRef, actor fsm.Actor) queue.HeartbeatInput {
	return queue.HeartbeatInput{Ref: ref, Actor: actor, Consistent: c.consistent, Local: c.local, MinIndex: c.minIndex}
}

func (s *Server) handleComplete(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		leaseFields
		Result json.RawMessage `json:"result"`
		Stdout string          `json:"stdout"`
		Stderr string          `json:"stderr"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Complete(r.Context(), queue.CompleteInput{Ref: req.ref(r), Actor: fsm.Actor{Role: c.role},
		Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
	return s.answerJob(w, res, index, err)
}

// parseJobError accepts the v0 string form and the structured form.
func parseJobError(raw json.RawMessage) (fsm.JobError, error) {
	var je fsm.JobError
	if len(raw) == 0 || string(raw) == "null" {
		return je, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		je.Message = str
		return je, nil
	}
	if err := json.Unmarshal(raw, &je); err != nil {
		return je, badRequest("error must be a string or {code, message, stack, retryable}")
	}
	return je, nil
}

func (s *Server) handleFail(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		leaseFields
		Error   json.RawMessage `json:"error"`
		Requeue *bool           `json:"requeue"`
		Stdout  string          `json:"stdout"`
		Stderr  string          `json:"stderr"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	je, err := parseJobError(req.Error)
	if err != nil {
		return err
	}
	res, index, err := s.queue.Fail(r.Context(), queue.FailInput{Ref: req.ref(r), Actor: fsm.Actor{Role: c.role},
		Error: je, Requeue: req.Requeue == nil || *req.Requeue, Stdout: req.Stdout, Stderr: req.Stderr})
	return s.answerJob(w, res, index, err)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		leaseFields
		Reason string `json:"reason"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Release(r.Context(), req.ref(r), fsm.Actor{Role: c.role}, req.Reason)
	return s.answerJob(w, res, index, err)
}

func (s *Server) handleComment(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	res, index, err := s.queue.Comment(r.Context(), r.PathValue("id"), fsm.Actor{Role: c.role}, req.Text)
	return s.answerJob(w, res, index, err)
}
