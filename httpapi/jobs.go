package httpapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/spine-queue/spine/fsm"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)

const (
	maxAttemptsLimit = 1000
	maxTextBytes     = 64 << 10
)

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
	if len(req.Payload) == 0 || string(req.Payload) == "null" {
		return badRequest("payload is required (any JSON value but null)")
	}
	cmd := fsm.CreateCommand{Payload: req.Payload, TaskClass: req.TaskClass, Actor: fsm.Actor{Role: c.role}}
	if req.MaxAttempts != nil {
		if *req.MaxAttempts < 1 || *req.MaxAttempts > maxAttemptsLimit {
			return badRequest("maxAttempts must be between 1 and %d", maxAttemptsLimit)
		}
		cmd.MaxAttempts = *req.MaxAttempts
	}
	if req.Stream != nil {
		if !nameRE.MatchString(*req.Stream) {
			return badRequest("stream must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
		}
		cmd.Stream = *req.Stream
	}
	if req.Target != nil && *req.Target != "" {
		if !nameRE.MatchString(*req.Target) {
			return badRequest("target must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
		}
		cmd.Target = *req.Target
	}
	if req.LeaseSeconds != nil {
		if *req.LeaseSeconds < 1 || *req.LeaseSeconds > 7*24*3600 {
			return badRequest("leaseSeconds must be between 1 and 604800")
		}
		cmd.LeaseSeconds = *req.LeaseSeconds
	}
	if len(req.TaskClass) > 128 {
		return badRequest("taskClass is too long")
	}
	key := r.Header.Get("Idempotency-Key")
	if req.IdempotencyKey != "" {
		if key != "" && key != req.IdempotencyKey {
			return badRequest("Idempotency-Key header and idempotencyKey field differ")
		}
		key = req.IdempotencyKey
	}
	if len(key) > 256 {
		return badRequest("idempotency key is longer than 256 bytes")
	}
	cmd.IdempotencyKey = key
	if key != "" {
		if j := s.state.Peek().JobByIdempotencyKey(key); j != nil {
			s.setIndex(w, j.ModifyIndex)
			writeJSON(w, http.StatusOK, viewJob(j))
			return nil
		}
	}
	cmd.Now, cmd.ID = s.now(), s.cfg.NewID()
	res, err := s.apply(r.Context(), w, fsm.CmdCreate, &cmd)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeJSON(w, status, viewJob(res.Job))
	return nil
}

// visible reports whether role may see j: head sees everything, a claw the
// untargeted jobs and those targeted at its role.
func visible(role string, j *fsm.Job) bool {
	return role == RoleHead || j.Target == "" || j.Target == role
}

// lookup reads a job the caller may see; an invisible job is not found.
func (s *Server) lookup(r *http.Request, c *call) (*fsm.Job, error) {
	id := r.PathValue("id")
	j, err := s.state.Peek().Job(id)
	if err != nil {
		return nil, err
	}
	if !visible(c.role, j) && !(j.Lease != nil && j.Lease.Owner == c.role) {
		return nil, errorf(http.StatusNotFound, codeNotFound, "job %s: not found", id)
	}
	return j, nil
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
	if c.role != RoleHead {
		role := c.role
		f.Visible = func(j *fsm.Job) bool { return visible(role, j) }
	}
	jobs, next, err := s.state.Read().List(f)
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

func (s *Server) answerJob(w http.ResponseWriter, res *fsm.Result) error {
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
	actor := fsm.Actor{Role: c.role, WorkerID: req.WorkerID}
	cmd := fsm.ClaimCommand{Now: s.now(), JobID: r.PathValue("id"), Targets: []string{c.role, req.WorkerID}, Actor: actor,
		AttemptID: s.cfg.NewID(), LeaseToken: s.cfg.NewID(), LeaseNanos: s.cfg.Lease.Nanoseconds()}
	res, err := s.apply(r.Context(), w, fsm.CmdClaim, &cmd)
	if err != nil {
		return err
	}
	v := viewJob(res.Job)
	v.LeaseToken = res.Job.Lease.Token
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) handleHeartbeat(w http.ResponseWriter, r *http.Request, c *call) error {
	var req leaseFields
	if err := decode(c, &req); err != nil {
		return err
	}
	res, err := s.heartbeat(r.Context(), w, c, &fsm.HeartbeatCommand{Now: s.now(), Ref: req.ref(r),
		Actor: fsm.Actor{Role: c.role}, LeaseNanos: s.cfg.Lease.Nanoseconds()})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
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
	res, err := s.apply(r.Context(), w, fsm.CmdComplete, &fsm.CompleteCommand{Now: s.now(), Ref: req.ref(r),
		Actor: fsm.Actor{Role: c.role}, Result: req.Result, Stdout: req.Stdout, Stderr: req.Stderr})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
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
	if len(je.Message)+len(je.Stack)+len(je.Code) > maxTextBytes {
		return je, badRequest("error is larger than %d bytes", maxTextBytes)
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
	requeue := req.Requeue == nil || *req.Requeue
	res, err := s.apply(r.Context(), w, fsm.CmdFail, &fsm.FailCommand{Now: s.now(), Ref: req.ref(r),
		Actor: fsm.Actor{Role: c.role}, Error: je, Requeue: requeue, Stdout: req.Stdout, Stderr: req.Stderr})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
}

func (s *Server) handleRelease(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		leaseFields
		Reason string `json:"reason"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if len(req.Reason) > maxTextBytes {
		return badRequest("reason is larger than %d bytes", maxTextBytes)
	}
	res, err := s.apply(r.Context(), w, fsm.CmdRelease, &fsm.ReleaseCommand{Now: s.now(), Ref: req.ref(r),
		Actor: fsm.Actor{Role: c.role}, Reason: req.Reason})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
}

func (s *Server) handleComment(w http.ResponseWriter, r *http.Request, c *call) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decode(c, &req); err != nil {
		return err
	}
	if strings.TrimSpace(req.Text) == "" {
		return badRequest("text is required")
	}
	if len(req.Text) > maxTextBytes {
		return badRequest("text is larger than %d bytes", maxTextBytes)
	}
	if _, err := s.lookup(r, c); err != nil {
		return err
	}
	res, err := s.apply(r.Context(), w, fsm.CmdComment, &fsm.CommentCommand{Now: s.now(), JobID: r.PathValue("id"),
		Actor: fsm.Actor{Role: c.role}, Text: req.Text})
	if err != nil {
		return err
	}
	return s.answerJob(w, res)
}
