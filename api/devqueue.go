package api

import (
	"encoding/json"
	"time"
)

// The developer queue (/api/*, docs/devqueue.md): sessions group streams,
// a stream is a FIFO lane with instructions, a task is a job that runs a
// registered tool with a timeout.

// Task statuses, as the developer queue names the job states: done is
// succeeded; failed and dead are failed.
const (
	TaskQueued    = "queued"
	TaskRunning   = "running"
	TaskSucceeded = "succeeded"
	TaskFailed    = "failed"
)

// TaskStatus is the developer queue's name of a job state.
func TaskStatus(s JobStatus) string {
	switch s {
	case JobStatusDone:
		return TaskSucceeded
	case JobStatusFailed, JobStatusDead, JobStatusCancelled:
		return TaskFailed
	}
	return string(s)
}

// Session is a bounded period of work that groups streams.
type Session struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Description string    `json:"description,omitempty"`
	Status      string    `json:"status"` // active or ended
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Streams lists the session's streams by name.
	Streams []string `json:"streams"`
}

// Stream is a FIFO lane of a session with the instructions every claim
// hands the worker.
type Stream struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Session      string    `json:"session"`
	Instructions string    `json:"instructions"`
	Status       string    `json:"status"` // active or ended
	CreatedAt    time.Time `json:"created_at"`
	EndedAt      time.Time `json:"ended_at,omitzero"`
	UpdatedAt    time.Time `json:"updated_at"`
	// Queued and Running count the stream's jobs in those states.
	Queued  int `json:"queued"`
	Running int `json:"running"`
}

// SessionCreateRequest is the body of POST /api/sessions.
type SessionCreateRequest struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// StreamCreateRequest is the body of POST /api/streams.
type StreamCreateRequest struct {
	Name         string `json:"name"`
	Session      string `json:"session"`
	Instructions string `json:"instructions,omitempty"`
}

// TaskStream names a task's stream; a claim's and a task's detail carry
// its instructions too.
type TaskStream struct {
	ID           string `json:"id,omitempty"`
	Name         string `json:"name"`
	Instructions string `json:"instructions,omitempty"`
}

// Task is the developer queue's view of a job that runs a tool.
type Task struct {
	ID        string          `json:"id"`
	Stream    TaskStream      `json:"stream"`
	ToolName  string          `json:"tool_name"`
	TaskClass string          `json:"task_class"`
	Payload   json.RawMessage `json:"payload"`
	Status    string          `json:"status"` // TaskQueued ... TaskFailed
	// Timeout in seconds: the task is stale this long after its claim (or
	// last heartbeat), and auto-failed at twice it.
	Timeout  int64           `json:"timeout"`
	Attempts int             `json:"attempts"`
	Result   json.RawMessage `json:"result,omitempty"`
	// Error is the failure message; AutoFailed marks the reaper's.
	Error      string `json:"error,omitempty"`
	AutoFailed bool   `json:"auto_failed,omitempty"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	// Stale: running past its timeout with no complete, fail or heartbeat.
	Stale      bool   `json:"stale,omitempty"`
	ClonedFrom string `json:"cloned_from,omitempty"`
	// ClaimedBy, WorkerID and AttemptID name the current attempt while
	// running; LeaseToken is only in the answer to the claim.
	ClaimedBy      string    `json:"claimed_by,omitempty"`
	WorkerID       string    `json:"worker_id,omitempty"`
	AttemptID      string    `json:"attempt_id,omitempty"`
	LeaseToken     string    `json:"lease_token,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	StartedAt      time.Time `json:"started_at,omitzero"`
	FinishedAt     time.Time `json:"finished_at,omitzero"`
	// Duplicate is not part of the JSON: the Go client sets it when an
	// enqueue answered the task of a repeated idempotency key.
	Duplicate bool `json:"-"`
}

// TaskList is one page of tasks: the answer of GET /api/tasks.
type TaskList struct {
	Tasks      []*Task        `json:"tasks"`
	NextCursor NullableString `json:"next_cursor"`
}

// EnqueueRequest is the body of POST /api/tasks.
type EnqueueRequest struct {
	ToolName string          `json:"tool_name"`
	Stream   string          `json:"stream"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	// Timeout overrides the tool's and its class's timeout (seconds).
	Timeout int64 `json:"timeout,omitempty"`
	// IdempotencyKey makes a repeated enqueue answer the first task.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// RequeueRequest is the body of POST /api/tasks/{id}/requeue: the clone
// goes to Stream if set, else to the failed task's stream.
type RequeueRequest struct {
	Stream string `json:"stream,omitempty"`
}

// TaskClaimRequest is the body of POST /api/claim.
type TaskClaimRequest struct {
	Stream   string `json:"stream"`
	WorkerID string `json:"worker_id,omitempty"`
	// WaitMS is how long the claim may wait for a task (0: answer at once).
	WaitMS int64 `json:"wait_ms,omitempty"`
	// ClaimID (8 to 64 letters, digits, '-' or '_'), chosen by the claimant
	// once per claim, makes the claim safe to repeat: repeated by the same
	// worker while the task it took runs, it answers that task and lease
	// again instead of taking another.
	ClaimID string `json:"claim_id,omitempty"`
}

// TaskCompleteRequest is the body of POST /api/tasks/{id}/complete. Result
// must be a JSON object with a string "summary".
type TaskCompleteRequest struct {
	Result     json.RawMessage `json:"result"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	LeaseToken string          `json:"lease_token,omitempty"`
	AttemptID  string          `json:"attempt_id,omitempty"`
}

// TaskFailRequest is the body of POST /api/tasks/{id}/fail.
type TaskFailRequest struct {
	Error      string `json:"error"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`
	LeaseToken string `json:"lease_token,omitempty"`
	AttemptID  string `json:"attempt_id,omitempty"`
}

// TaskHeartbeatRequest is the body of POST /api/tasks/{id}/heartbeat: it
// pushes the task's stale and auto-fail marks back.
type TaskHeartbeatRequest struct {
	LeaseToken string `json:"lease_token,omitempty"`
	AttemptID  string `json:"attempt_id,omitempty"`
}

// StreamQueue is one line of the answer to a claim without a stream: a
// stream with queued tasks.
type StreamQueue struct {
	Name   string `json:"name"`
	Queued int    `json:"queued"`
}

// PurgeRequest is the body of POST /api/purge: finished tasks older than
// OlderThan ("3d", "12h", "30m", "45s") are deleted.
type PurgeRequest struct {
	OlderThan string `json:"older_than"`
}

// PurgeResult is the answer of POST /api/purge.
type PurgeResult struct {
	Purged int       `json:"purged"`
	Before time.Time `json:"before"`
}

// TaskClass is a named default timeout.
type TaskClass struct {
	Name    string `json:"name"`
	Timeout int64  `json:"timeout"`
}

// Tool is a registered tool.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	TaskClass   string `json:"task_class"`
	// Timeout is the tool's own timeout (0: its class's); EffectiveTimeout
	// is the one a task gets without an override.
	Timeout          int64 `json:"timeout,omitempty"`
	EffectiveTimeout int64 `json:"effective_timeout"`
}

// Script is an entry of the script index.
type Script struct {
	Path        string   `json:"path"`
	Name        string   `json:"name,omitempty"`
	Description string   `json:"description,omitempty"`
	Inputs      string   `json:"inputs,omitempty"`
	Outputs     string   `json:"outputs,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// Project describes the project (spine.yml).
type Project struct {
	Name     string `json:"name,omitempty"`
	RepoPath string `json:"repo_path,omitempty"`
	PRDPath  string `json:"prd_path,omitempty"`
}

// Registry is the configuration a reload puts in force: the body of PUT
// /api/registry and the answer of GET /api/registry.
type Registry struct {
	Project     Project     `json:"project"`
	TaskClasses []TaskClass `json:"task_classes"`
	Tools       []Tool      `json:"tools"`
	ScriptDirs  []string    `json:"script_dirs"`
	Scripts     []Script    `json:"scripts"`
	// PurgeOlderThanDays is the retention of finished tasks (default 3).
	PurgeOlderThanDays int       `json:"purge_older_than_days"`
	UpdatedAt          time.Time `json:"updated_at,omitzero"`
}

// DevStatus is the answer of GET /api/status.
type DevStatus struct {
	NodeID   string     `json:"node_id"`
	Leader   string     `json:"leader"`
	Sessions []*Session `json:"sessions"`
	Streams  []*Stream  `json:"streams"`
	// Tasks counts tasks by task status.
	Tasks map[string]int `json:"tasks"`
	Tools int            `json:"tools"`
}
