package mcpserver

import (
	"encoding/json"
	"time"

	"github.com/spine-queue/spine/client"
)

// The tools answer in views of their own, snake_case like the worker
// contract: what an agent needs of a job or a stream, with JSON values
// (payload, result, progress) as they were given.

// JobView is a job as the tools show it.
type JobView struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
	// Status is queued, running, done, failed, dead or cancelled.
	Status string `json:"status"`
	// Target is the role, worker id or gateway the job is meant for
	// (empty: anyone); TargetKind says which (role, worker or gateway).
	Target      string `json:"target,omitempty"`
	TargetKind  string `json:"target_kind,omitempty"`
	Payload     any    `json:"payload,omitempty"`
	Priority    int    `json:"priority,omitempty"`
	Attempts    int    `json:"attempts"`
	MaxAttempts int    `json:"max_attempts"`
	// WorkerID, AttemptID and LeaseExpiresAt are set while the job runs.
	WorkerID       string    `json:"worker_id,omitempty"`
	ClaimedBy      string    `json:"claimed_by,omitempty"`
	AttemptID      string    `json:"attempt_id,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// RunAt: a queued job waits for this time (scheduled, or a retry's backoff).
	RunAt time.Time `json:"run_at,omitzero"`
	// WaitingOn counts the jobs of DependsOn not done yet.
	DependsOn      []string `json:"depends_on,omitempty"`
	WaitingOn      int      `json:"waiting_on,omitempty"`
	Requires       []string `json:"requires,omitempty"`
	ConcurrencyKey string   `json:"concurrency_key,omitempty"`
	// RateKey: the job's claims count against this key's rate limit; a
	// queued job may wait for the rate to allow its claim.
	RateKey string `json:"rate_key,omitempty"`
	// CancelRequested: head cancelled the running job; its worker should stop.
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	CancelReason    string `json:"cancel_reason,omitempty"`
	Progress        any    `json:"progress,omitempty"`
	Checkpoint      any    `json:"checkpoint,omitempty"`
	Result          any    `json:"result,omitempty"`
	// ResultSchema is the job's result contract: a complete's result must match it.
	ResultSchema any          `json:"result_schema,omitempty"`
	Error        *ErrorView   `json:"error,omitempty"`
	Comments     []CommentRow `json:"comments,omitempty"`
	CreatedAt    time.Time    `json:"created_at,omitzero"`
	StartedAt    time.Time    `json:"started_at,omitzero"`
	FinishedAt   time.Time    `json:"finished_at,omitzero"`
	// History and AttemptList are filled when get_job asks for them.
	History     []EventRow   `json:"history,omitempty"`
	AttemptList []AttemptRow `json:"attempt_list,omitempty"`
}

// ErrorView is a failed attempt's error.
type ErrorView struct {
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// CommentRow is a note on a job.
type CommentRow struct {
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	Text  string    `json:"text"`
}

// EventRow is one entry of a job's history.
type EventRow struct {
	At       time.Time `json:"at"`
	Type     string    `json:"type"`
	Actor    string    `json:"actor,omitempty"`
	From     string    `json:"from,omitempty"`
	To       string    `json:"to,omitempty"`
	WorkerID string    `json:"worker_id,omitempty"`
	Text     string    `json:"text,omitempty"`
}

// AttemptRow is one claim of a job and how it ended.
type AttemptRow struct {
	ID        string     `json:"id"`
	WorkerID  string     `json:"worker_id,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   time.Time  `json:"ended_at,omitzero"`
	Outcome   string     `json:"outcome"`
	Error     *ErrorView `json:"error,omitempty"`
}

// StreamView is a stream as list_streams shows it.
type StreamView struct {
	Name      string `json:"name"`
	Queued    int    `json:"queued"`
	Running   int    `json:"running"`
	Done      int    `json:"done"`
	Failed    int    `json:"failed"`
	Dead      int    `json:"dead"`
	Cancelled int    `json:"cancelled"`
	// OldestWaitSeconds is how long the job that has waited longest has
	// been queued.
	OldestWaitSeconds float64 `json:"oldest_wait_seconds,omitempty"`
	Paused            bool    `json:"paused"`
	PauseReason       string  `json:"pause_reason,omitempty"`
	// Status (active or ended) and Instructions come from the developer
	// queue's catalog.
	Status       string `json:"status,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	// Unmatched counts queued jobs no live worker can take, by the
	// capabilities they require.
	Unmatched []UnmatchedRow `json:"unmatched,omitempty"`
}

// UnmatchedRow is how many queued jobs require a set of capabilities no
// worker heard from lately has.
type UnmatchedRow struct {
	Requires []string `json:"requires"`
	Jobs     int      `json:"jobs"`
}

// rawJSON is a JSON value for an `any` field: nil when absent, so that
// omitempty leaves it out.
func rawJSON(m json.RawMessage) any {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	return m
}

func errorView(e *client.JobError) *ErrorView {
	if e == nil {
		return nil
	}
	return &ErrorView{Code: e.Code, Message: e.Message, Retryable: e.Retryable}
}

func jobView(j *client.Job) JobView {
	v := JobView{
		ID: j.ID, Stream: j.Stream, Status: string(j.Status), Target: string(j.Target), TargetKind: j.TargetKind, Payload: rawJSON(j.Payload),
		Priority: j.Priority, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		WorkerID: j.WorkerID, ClaimedBy: j.ClaimedBy, AttemptID: j.AttemptID, LeaseExpiresAt: j.LeaseExpiresAt,
		RunAt: j.RunAt, DependsOn: j.DependsOn, WaitingOn: j.WaitingOn, Requires: j.Requires, ConcurrencyKey: j.ConcurrencyKey,
		CancelRequested: j.Cancel, CancelReason: j.CancelReason,
		Progress: rawJSON(j.Progress), Checkpoint: rawJSON(j.Checkpoint), Result: rawJSON(j.Result), Error: errorView(j.Error),
		ResultSchema: rawJSON(j.ResultSchema),
		CreatedAt:    j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
	}
	if j.RateLimit != nil {
		v.RateKey = j.RateLimit.Key
	}
	for _, c := range j.Comments {
		v.Comments = append(v.Comments, CommentRow{At: c.At, Actor: c.Actor, Text: c.Text})
	}
	return v
}

func streamView(s *client.StreamInfo) StreamView {
	v := StreamView{Name: s.Name, Queued: s.Queued, Running: s.Running, Done: s.Done, Failed: s.Failed, Dead: s.Dead, Cancelled: s.Cancelled,
		OldestWaitSeconds: s.OldestQueuedSeconds, Paused: s.Paused, Status: s.Status, Instructions: s.Instructions}
	if s.Pause != nil {
		v.PauseReason = s.Pause.Reason
	}
	for _, u := range s.Unmatched {
		v.Unmatched = append(v.Unmatched, UnmatchedRow{Requires: u.Requires, Jobs: u.Jobs})
	}
	return v
}
