package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/client"
)

// The claws' tools: claim, heartbeat, complete, fail, release and
// held_jobs. A claim keeps each job's lease in the session (leases); the
// others take it from there unless the call gives a lease_token.

// Claim waits: the default and the most a claim waits for a job.
const (
	defaultClaimWait = 10 * time.Second
	maxClaimWait     = 30 * time.Second
)

type claimIn struct {
	Streams      []string `json:"streams,omitempty" jsonschema:"streams to take work from, in order of preference (default [\"default\"]); list_streams shows them"`
	WaitSeconds  *int     `json:"wait_seconds,omitempty" range:"0,30" jsonschema:"how long to wait for a job when none is queued, 0 to 30 (default 10)"`
	MaxJobs      int      `json:"max_jobs,omitempty" range:"1,100" jsonschema:"take up to this many jobs at once, 1 to 100 (default 1), each under its own lease"`
	Capabilities []string `json:"capabilities,omitempty" jsonschema:"what you can do, as labels such as gpu or lang:python: you are handed only jobs whose requires you all have"`
	WorkerID     string   `json:"worker_id,omitempty" jsonschema:"your name as a worker, shown on the job (default: this session's, in the answer)"`
}

// ClaimedJob is one job a claim took.
type ClaimedJob struct {
	JobID   string `json:"job_id"`
	Stream  string `json:"stream"`
	Payload any    `json:"payload,omitempty"`
	// Attempt is this attempt's number, from 1.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// Checkpoint is what an earlier attempt saved: resume from it.
	Checkpoint any `json:"checkpoint,omitempty"`
	// ResultSchema is the job's result contract: the result of complete
	// must match this JSON Schema, or complete is refused with every
	// mismatch listed (the job stays yours: fix it and complete again).
	ResultSchema any `json:"result_schema,omitempty"`
	// Instructions are the stream's.
	Instructions             string  `json:"instructions,omitempty"`
	LeaseSeconds             float64 `json:"lease_seconds"`
	HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds"`
	// AttemptID and LeaseToken prove the job is yours. The session keeps
	// them; they are shown for finishing the job from another session.
	AttemptID  string `json:"attempt_id"`
	LeaseToken string `json:"lease_token"`
}

// StreamQueued is a stream with queued jobs.
type StreamQueued struct {
	Name   string `json:"name"`
	Queued int    `json:"queued"`
}

type claimOut struct {
	Claimed  bool         `json:"claimed"`
	WorkerID string       `json:"worker_id"`
	Jobs     []ClaimedJob `json:"jobs,omitempty"`
	// Elsewhere, when nothing was claimed, lists other streams where work waits.
	Elsewhere []StreamQueued `json:"elsewhere,omitempty"`
	Next      string         `json:"next"`
}

type heartbeatIn struct {
	JobID      string         `json:"job_id" jsonschema:"the claimed job's id"`
	Progress   map[string]any `json:"progress,omitempty" jsonschema:"how far you are, shown on the job, e.g. {\"pct\": 40, \"step\": \"tests\"} (at most 4 KiB)"`
	Checkpoint map[string]any `json:"checkpoint,omitempty" jsonschema:"state to resume from, handed to the next attempt if this one does not finish (at most 64 KiB)"`
	LeaseToken string         `json:"lease_token,omitempty" jsonschema:"only for a job claimed in another session: its lease_token (this session's own leases are kept for you)"`
	AttemptID  string         `json:"attempt_id,omitempty" jsonschema:"with lease_token: the claim's attempt_id"`
}

type heartbeatOut struct {
	JobID          string    `json:"job_id"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// CancelRequested: head cancelled the job: stop, then fail or release it.
	CancelRequested bool   `json:"cancel_requested"`
	Next            string `json:"next"`
}

type completeIn struct {
	JobID      string         `json:"job_id" jsonschema:"the claimed job's id"`
	Result     map[string]any `json:"result" jsonschema:"what you did: an object with a one-line \"summary\" first, then any fields worth keeping (ids, counts, blob ids of large outputs)"`
	LeaseToken string         `json:"lease_token,omitempty" jsonschema:"only for a job claimed in another session: its lease_token"`
	AttemptID  string         `json:"attempt_id,omitempty" jsonschema:"with lease_token: the claim's attempt_id"`
	// ClaimNext and the next_ arguments: claim's, for the next job.
	ClaimNext        bool     `json:"claim_next,omitempty" jsonschema:"also claim your next job in the same call, as claim would: the answer's claimed is that claim's answer"`
	NextStreams      []string `json:"next_streams,omitempty" jsonschema:"with claim_next: streams to take the next job from, in order of preference (default [\"default\"])"`
	NextWaitSeconds  *int     `json:"next_wait_seconds,omitempty" range:"0,30" jsonschema:"with claim_next: how long to wait for a job when none is queued, 0 to 30 (default 0: answer at once)"`
	NextCapabilities []string `json:"next_capabilities,omitempty" jsonschema:"with claim_next: what you can do, as labels such as gpu or lang:python"`
	NextMaxJobs      int      `json:"next_max_jobs,omitempty" range:"1,100" jsonschema:"with claim_next: take up to this many jobs at once, 1 to 100 (default 1), each under its own lease"`
}

type completeOut struct {
	JobID  string `json:"job_id"`
	Status string `json:"status"`
	// Duplicate: it had been completed already by this attempt; nothing changed.
	Duplicate bool `json:"duplicate"`
	// Claimed is the answer of claim_next, when asked.
	Claimed *claimOut `json:"claimed,omitempty"`
	Next    string    `json:"next"`
}

type failIn struct {
	JobID      string `json:"job_id" jsonschema:"the claimed job's id"`
	Message    string `json:"message" jsonschema:"what went wrong, for whoever looks next"`
	Retryable  bool   `json:"retryable" jsonschema:"true: another attempt may succeed, the job goes back to the queue while it has attempts left; false: it goes to the dead letters for a human"`
	Code       string `json:"code,omitempty" jsonschema:"a short machine-readable cause, e.g. timeout, bad_input, cancelled"`
	LeaseToken string `json:"lease_token,omitempty" jsonschema:"only for a job claimed in another session: its lease_token"`
	AttemptID  string `json:"attempt_id,omitempty" jsonschema:"with lease_token: the claim's attempt_id"`
}

type failOut struct {
	JobID string `json:"job_id"`
	// Status is where the fail left the job: queued, failed, dead or cancelled.
	Status string `json:"status,omitempty"`
	// Requeued: the job is back in the queue for another attempt.
	Requeued bool `json:"requeued"`
	// DeadLetter: the job is failed or dead, waiting for a human.
	DeadLetter bool   `json:"dead_letter"`
	Next       string `json:"next"`
}

type releaseIn struct {
	JobID      string `json:"job_id" jsonschema:"the claimed job's id"`
	Reason     string `json:"reason,omitempty" jsonschema:"why you give it back, e.g. needs a GPU"`
	NotForMe   bool   `json:"not_for_me,omitempty" jsonschema:"you cannot do this job: you are never handed it again, other workers get it at once"`
	CooldownMS int64  `json:"cooldown_ms,omitempty" range:"0,86400000" jsonschema:"no one is handed the job again for this long (at most a day); prefer not_for_me when another worker could do it"`
	LeaseToken string `json:"lease_token,omitempty" jsonschema:"only for a job claimed in another session: its lease_token"`
	AttemptID  string `json:"attempt_id,omitempty" jsonschema:"with lease_token: the claim's attempt_id"`
}

type releaseOut struct {
	JobID string `json:"job_id"`
	// Status is queued, or cancelled when head had cancelled the job.
	Status string `json:"status"`
	Next   string `json:"next"`
}

func (s *server) addClawTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "claim",
		Title: "Claim the next job",
		Description: "Take the next job of your streams (the first listed stream that has one; within it the highest priority, " +
			"then the oldest), waiting up to wait_seconds for one to be queued. The job is yours under a lease: this session keeps " +
			"the lease, so later calls need only the job_id. Heartbeat while you work, then complete, fail or release it. " +
			"When nothing came, elsewhere lists other streams where work waits.",
		Annotations: writes("Claim the next job", false, false),
	}, s.claim)

	addTool(s, srv, &mcp.Tool{
		Name:  "heartbeat",
		Title: "Heartbeat a claimed job",
		Description: "Keep your lease on a job you work on: call it every heartbeat_interval_seconds (the claim says; a third of the lease). " +
			"Report progress (shown on the job) and save a checkpoint (handed to the next attempt if this one does not finish). " +
			"If it answers cancel_requested, stop and fail (code cancelled) or release the job; if it says the lease ended, stop working on it.",
		Annotations: writes("Heartbeat a claimed job", true, false),
	}, s.heartbeat)

	addTool(s, srv, &mcp.Tool{
		Name:  "complete",
		Title: "Complete a claimed job",
		Description: "Report a job you claimed as done, with its result: an object whose \"summary\" says in one line what you did, " +
			"plus any fields worth keeping. Repeating it (say after a lost answer) is safe. A job with a result_schema (in the claim " +
			"and get_job) takes only a result matching it: a result that does not is refused with every mismatch (path, expected, " +
			"got) and the job stays yours, so fix the result and call complete again. With claim_next it also claims your next job " +
			"in the same call (one commit instead of two): its answer's claimed is what claim would answer, the lease kept by this session.",
		Annotations: writes("Complete a claimed job", true, false),
	}, s.complete)

	addTool(s, srv, &mcp.Tool{
		Name:  "fail",
		Title: "Fail a claimed job",
		Description: "Report that you could not do a job you claimed. retryable true puts it back in the queue for another attempt " +
			"(while it has attempts left); false sends it to the dead letters for a human. Repeating it is safe.",
		Annotations: writes("Fail a claimed job", true, true),
	}, s.fail)

	addTool(s, srv, &mcp.Tool{
		Name:  "release",
		Title: "Release a claimed job",
		Description: "Give back a job without using up an attempt. If it is not for you (it needs a tool or capability you lack), " +
			"set not_for_me: you are never handed it again and other workers get it at once; with cooldown_ms no one is handed it again for that long.",
		Annotations: writes("Release a claimed job", true, false),
	}, s.release)

	addTool(s, srv, &mcp.Tool{
		Name:  "held_jobs",
		Title: "Jobs you hold",
		Description: "The jobs you claimed and have not finished or released, with their leases: what you are working on, " +
			"as the cluster holds it. After reconnecting (a new session, say because the node you used died), pass the worker_id " +
			"your earlier claims answered: this session takes over that worker and its leases, so heartbeat, complete, fail and " +
			"release work on those jobs with just the job_id again.",
		Annotations: readOnly("Jobs you hold"), // it changes the session, never the cluster
	}, s.held)
}

func (s *server) claim(ctx context.Context, _ *mcp.CallToolRequest, in claimIn) (*mcp.CallToolResult, claimOut, error) {
	streams := in.Streams
	if len(streams) == 0 {
		streams = []string{"default"}
	}
	wait := defaultClaimWait
	if in.WaitSeconds != nil {
		wait = min(max(time.Duration(*in.WaitSeconds)*time.Second, 0), maxClaimWait)
	}
	worker := in.WorkerID
	if worker == "" {
		worker = s.worker()
	}
	p := &client.WorkerClaimParams{WorkerID: worker, Streams: streams, MaxWait: wait, Capabilities: in.Capabilities}
	if in.MaxJobs > 1 {
		p.MaxJobs = in.MaxJobs
	}
	wc, err := s.c.WorkerClaim(ctx, p)
	if err != nil {
		return nil, claimOut{}, s.advise(err, opClaim, "")
	}
	return nil, s.claimed(ctx, wc, worker, streams, wait), nil
}

// claimed is the answer of a claim (or a complete's next claim) by worker
// of streams that waited up to wait and got wc; the jobs it took are the
// session's leases from now on.
func (s *server) claimed(ctx context.Context, wc *client.WorkerClaim, worker string, streams []string, wait time.Duration) claimOut {
	out := claimOut{Claimed: wc.Claimed, WorkerID: worker}
	claims := wc.Jobs
	if len(claims) == 0 && wc.Claimed {
		claims = []client.WorkerClaim{*wc}
	}
	if len(claims) == 0 {
		for _, e := range wc.Elsewhere {
			out.Elsewhere = append(out.Elsewhere, StreamQueued{Name: e.Name, Queued: e.Queued})
		}
		out.Next = nothingClaimed(streams, wait, out.Elsewhere)
		return out
	}
	out.Claimed = true
	now := time.Now()
	for _, c := range claims {
		s.leases.put(lease{JobID: c.JobID, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken, WorkerID: worker, Stream: c.Stream,
			HeartbeatEvery: s.heartbeatEvery(c.HeartbeatInterval()), ClaimedAt: now})
	}
	instructions := s.instructionsOf(ctx, claims)
	for _, c := range claims {
		out.Jobs = append(out.Jobs, ClaimedJob{JobID: c.JobID, Stream: c.Stream, Payload: rawJSON(c.Payload), Attempt: c.Attempt,
			MaxAttempts: c.MaxAttempts, Checkpoint: rawJSON(c.Checkpoint), ResultSchema: rawJSON(c.ResultSchema), Instructions: instructions[c.Stream],
			LeaseSeconds: c.LeaseTTLSeconds, HeartbeatIntervalSeconds: s.heartbeatEvery(c.HeartbeatInterval()).Seconds(),
			AttemptID: c.AttemptID, LeaseToken: c.LeaseToken})
	}
	first := claims[0]
	what := "the job's payload says"
	if len(claims) > 1 {
		what = "each job's payload says"
	}
	out.Next = fmt.Sprintf("Do what %s (and its stream's instructions, if any). While you work, call heartbeat with the job_id "+
		"at least every %.0f s (the lease lasts %.0f s). Then call complete with the job_id and a result {\"summary\": …}; "+
		"or fail (message, retryable) if you cannot do it; or release if it is not for you. This session keeps the lease.",
		what, s.heartbeatEvery(first.HeartbeatInterval()).Seconds(), first.LeaseTTLSeconds)
	for _, c := range claims {
		if len(c.ResultSchema) > 0 {
			out.Next += " A job with result_schema takes only a result that matches that JSON Schema: read it before you " +
				"start, and build your result to match it (a summary field too only if the schema allows it)."
			break
		}
	}
	return out
}

// leaseOf returns the lease a call about jobID is fenced with: the
// token (and attempt) the call gives, else the session's. needAttempt
// looks up the attempt id a given token lacks.
func (s *server) leaseOf(ctx context.Context, op, jobID, token, attemptID string, needAttempt bool) (lease, error) {
	if jobID == "" {
		return lease{}, fmt.Errorf("%s: job_id is required", op)
	}
	held, ok := s.leases.get(jobID)
	if token == "" {
		if !ok {
			return lease{}, fmt.Errorf("%s of job %s: this session holds no lease on it (held_jobs lists the ones it holds). "+
				"Take work with claim; for a job claimed in another session, pass the lease_token and attempt_id its claim answered", op, jobID)
		}
		if attemptID != "" {
			held.AttemptID = attemptID
		}
		return held, nil
	}
	l := lease{JobID: jobID, LeaseToken: token, AttemptID: attemptID, WorkerID: s.worker()}
	if ok && held.LeaseToken == token {
		l.WorkerID, l.Stream, l.HeartbeatEvery = held.WorkerID, held.Stream, held.HeartbeatEvery
		if l.AttemptID == "" {
			l.AttemptID = held.AttemptID
		}
	}
	if l.AttemptID == "" && needAttempt {
		j, err := s.c.JobGet(ctx, jobID)
		if err != nil {
			return lease{}, s.advise(err, op, jobID)
		}
		if j.Status != client.JobStatusRunning || j.AttemptID == "" {
			return lease{}, fmt.Errorf("%s refused: job %s is %s, not running: your lease on it ended. "+
				"Stop working on it and do not report it again; call claim for new work", op, jobID, j.Status)
		}
		l.AttemptID = j.AttemptID
		if j.WorkerID != "" {
			l.WorkerID = j.WorkerID
		}
	}
	return l, nil
}

// ended forgets the session's lease when err says it is gone.
func (s *server) ended(l lease, err error) {
	if errors.Is(err, client.ErrStaleLease) || errors.Is(err, client.ErrIllegalTransition) || errors.Is(err, client.ErrNotFound) ||
		errors.Is(err, client.ErrNotOwner) || errors.Is(err, client.ErrMaxAttempts) {
		s.leases.drop(l.JobID, l.LeaseToken)
	}
}

func marshalObject(what string, m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", what, err)
	}
	return b, nil
}

func (s *server) heartbeat(ctx context.Context, _ *mcp.CallToolRequest, in heartbeatIn) (*mcp.CallToolResult, heartbeatOut, error) {
	l, err := s.leaseOf(ctx, opHeartbeat, in.JobID, in.LeaseToken, in.AttemptID, false)
	if err != nil {
		return nil, heartbeatOut{}, err
	}
	progress, err := marshalObject("heartbeat: progress", in.Progress)
	if err != nil {
		return nil, heartbeatOut{}, err
	}
	checkpoint, err := marshalObject("heartbeat: checkpoint", in.Checkpoint)
	if err != nil {
		return nil, heartbeatOut{}, err
	}
	res, err := s.c.WorkerHeartbeat(ctx, &client.WorkerHeartbeatParams{WorkerID: l.WorkerID, JobID: l.JobID, LeaseToken: l.LeaseToken,
		AttemptID: l.AttemptID, Progress: progress, Checkpoint: checkpoint})
	if err != nil {
		s.ended(l, err)
		return nil, heartbeatOut{}, s.advise(err, opHeartbeat, l.JobID)
	}
	out := heartbeatOut{JobID: l.JobID, LeaseExpiresAt: res.LeaseExpiresAt, CancelRequested: res.Cancel}
	switch {
	case res.Cancel:
		out.Next = "Head cancelled this job: stop working on it, then call fail with code \"cancelled\" (or release it)."
	case l.HeartbeatEvery > 0:
		out.Next = fmt.Sprintf("Keep working; heartbeat again within %.0f s.", l.HeartbeatEvery.Seconds())
	default:
		out.Next = "Keep working; heartbeat again well before lease_expires_at."
	}
	return nil, out, nil
}

func (s *server) complete(ctx context.Context, _ *mcp.CallToolRequest, in completeIn) (*mcp.CallToolResult, completeOut, error) {
	l, err := s.leaseOf(ctx, opComplete, in.JobID, in.LeaseToken, in.AttemptID, true)
	if err != nil {
		return nil, completeOut{}, err
	}
	result, err := marshalObject("complete: result", in.Result)
	if err != nil {
		return nil, completeOut{}, err
	}
	p := &client.WorkerCompleteParams{WorkerID: l.WorkerID, JobID: l.JobID, AttemptID: l.AttemptID,
		LeaseToken: l.LeaseToken, Stream: l.Stream, Result: result}
	var streams []string
	var wait time.Duration
	if in.ClaimNext {
		streams = in.NextStreams
		if len(streams) == 0 {
			streams = []string{"default"}
		}
		if in.NextWaitSeconds != nil {
			wait = min(max(time.Duration(*in.NextWaitSeconds)*time.Second, 0), maxClaimWait)
		}
		p.Next = &client.WorkerNextParams{WorkerID: l.WorkerID, Streams: streams, MaxWaitMS: wait.Milliseconds(), Capabilities: in.NextCapabilities}
		if in.NextMaxJobs > 1 {
			p.Next.MaxJobs = in.NextMaxJobs
		}
	}
	ack, err := s.c.WorkerComplete(ctx, p)
	if err != nil {
		s.ended(l, err)
		return nil, completeOut{}, s.advise(err, opComplete, l.JobID)
	}
	s.leases.drop(l.JobID, l.LeaseToken)
	out := completeOut{JobID: l.JobID, Status: string(client.JobStatusDone), Duplicate: ack.Duplicate,
		Next: "Done: the job's result is committed. Call claim for the next job."}
	switch {
	case ack.Next != nil:
		c := s.claimed(ctx, ack.Next, l.WorkerID, streams, wait)
		out.Claimed = &c
		out.Next = "Done: the job's result is committed. " + c.Next
	case p.Next != nil:
		// The cluster could not tell (an answer checked after it was lost,
		// or a build without claim_next).
		out.Next = "Done: the job's result is committed. No next job came with it: call claim for the next job."
	}
	return nil, out, nil
}

func (s *server) fail(ctx context.Context, _ *mcp.CallToolRequest, in failIn) (*mcp.CallToolResult, failOut, error) {
	if strings.TrimSpace(in.Message) == "" {
		return nil, failOut{}, errors.New("fail: message is required: say what went wrong")
	}
	l, err := s.leaseOf(ctx, opFail, in.JobID, in.LeaseToken, in.AttemptID, true)
	if err != nil {
		return nil, failOut{}, err
	}
	ack, err := s.c.WorkerFail(ctx, &client.WorkerFailParams{WorkerID: l.WorkerID, JobID: l.JobID, AttemptID: l.AttemptID,
		LeaseToken: l.LeaseToken, Stream: l.Stream, Error: &client.JobError{Code: in.Code, Message: in.Message, Retryable: in.Retryable}})
	if err != nil {
		s.ended(l, err)
		return nil, failOut{}, s.advise(err, opFail, l.JobID)
	}
	s.leases.drop(l.JobID, l.LeaseToken)
	out := failOut{JobID: l.JobID, Status: string(ack.Status), Requeued: ack.Requeued, DeadLetter: ack.DLQ}
	switch {
	case ack.Requeued:
		out.Next = "The job is back in the queue for another attempt. Call claim for the next job."
	case ack.DLQ:
		out.Next = "The job is in the dead letters, for a human (head may redrive it). Call claim for the next job."
	default:
		out.Next = "Head had cancelled the job: it is now cancelled. Call claim for the next job."
	}
	return nil, out, nil
}

func (s *server) release(ctx context.Context, _ *mcp.CallToolRequest, in releaseIn) (*mcp.CallToolResult, releaseOut, error) {
	l, err := s.leaseOf(ctx, opRelease, in.JobID, in.LeaseToken, in.AttemptID, false)
	if err != nil {
		return nil, releaseOut{}, err
	}
	ack, err := s.c.WorkerRelease(ctx, &client.WorkerReleaseParams{WorkerID: l.WorkerID, JobID: l.JobID, AttemptID: l.AttemptID,
		LeaseToken: l.LeaseToken, Stream: l.Stream, Reason: in.Reason, CooldownMS: in.CooldownMS, NotForMe: in.NotForMe})
	if err != nil {
		s.ended(l, err)
		return nil, releaseOut{}, s.advise(err, opRelease, l.JobID)
	}
	s.leases.drop(l.JobID, l.LeaseToken)
	status := string(ack.Status)
	if status == "" {
		status = string(client.JobStatusQueued)
	}
	next := "The job is back in the queue for another worker. Call claim for the next job."
	switch {
	case in.NotForMe:
		next = "The job is back in the queue for other workers; you will not be handed it again. Call claim for the next job."
	case in.CooldownMS > 0:
		next = fmt.Sprintf("The job is back in the queue; no one is handed it for %s. Call claim for the next job.",
			time.Duration(in.CooldownMS)*time.Millisecond)
	}
	if status == string(client.JobStatusCancelled) {
		next = "Head had cancelled the job: it is now cancelled. Call claim for the next job."
	}
	return nil, releaseOut{JobID: l.JobID, Status: status, Next: next}, nil
}
