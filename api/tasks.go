package api

import (
	"encoding/json"
	"time"
)

// The control plane's task API (/v1/tasks/..., seed 003): a job seen
// through the seed's state machine. States, and how each maps to a job's
// canonical status (docs/api.md has the table):
const (
	StateQueued        = "queued"         // queued
	StateReleased      = "released"       // queued, after a release or a lease that ran out
	StateClaimed       = "claimed"        // running, not started
	StateRunning       = "running"        // running, started
	StateSucceeded     = "succeeded"      // done
	StateFailed        = "failed"         // failed or dead
	StateFailedTimeout = "failed_timeout" // failed or dead: its last attempt's lease ran out
)

// ControlTask is a job as the task API shows it.
type ControlTask struct {
	ID string `json:"id"`
	// State is the seed's state (State* constants); Status the job's
	// canonical one (GET /jobs/{id}).
	State  string    `json:"state"`
	Status JobStatus `json:"status"`
	Stream string    `json:"stream"`
	// Target is the gateway a routed task went to, or the role or worker a
	// job is meant for; TargetKind says which ("gateway", "role",
	// "worker").
	Target      string          `json:"target,omitempty"`
	TargetKind  string          `json:"target_kind,omitempty"`
	Payload     json.RawMessage `json:"payload"`
	Attempt     int             `json:"attempt"`
	MaxAttempts int             `json:"max_attempts"`
	// While claimed or running: who holds it, under which attempt, until
	// when. LeaseToken is only in the answer to the claim that took it.
	AgentID        string    `json:"agent_id,omitempty"`
	ClaimedBy      string    `json:"claimed_by,omitempty"`
	AttemptID      string    `json:"attempt_id,omitempty"`
	LeaseToken     string    `json:"lease_token,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	// ClaimedAt is the current (or last) attempt's claim, RunningAt its
	// start.
	ClaimedAt  time.Time       `json:"claimed_at,omitzero"`
	RunningAt  time.Time       `json:"running_at,omitzero"`
	FinishedAt time.Time       `json:"finished_at,omitzero"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *JobError       `json:"error,omitempty"`
	// ResultSchema is the task's result contract: the result of its
	// complete must match it (400 result_mismatch otherwise).
	ResultSchema json.RawMessage `json:"result_schema,omitempty"`
	// ModifyIndex is the Raft index of the task's latest change.
	ModifyIndex uint64 `json:"modify_index"`
}

// ControlTaskClaimRequest is the body of POST /v1/tasks/claim: the oldest task of
// the first stream that has one an agent may take (the one GET
// /v1/tasks/next?agent_id= names), waiting up to max_wait_ms for one.
type ControlTaskClaimRequest struct {
	AgentID   string   `json:"agent_id"`
	Streams   []string `json:"streams,omitempty"`
	MaxWaitMS int64    `json:"max_wait_ms"`
	// ClaimID makes the claim safe to repeat (as the worker contract's).
	ClaimID string `json:"claim_id,omitempty"`
}

// ControlTaskClaim is the answer of POST /v1/tasks/claim; Claimed false and no
// task when none was ready within the wait.
type ControlTaskClaim struct {
	Claimed bool         `json:"claimed"`
	Task    *ControlTask `json:"task,omitempty"`
}

// TaskStepRequest is the body of POST /v1/tasks/{id}/start, /complete,
// /fail and /release. lease_token (from the claim) fences every step; head
// may act without one. Result, stdout and stderr go with complete (and
// stdout, stderr with fail), error and requeue with fail, reason with
// release.
type TaskStepRequest struct {
	AgentID    string          `json:"agent_id,omitempty"`
	AttemptID  string          `json:"attempt_id,omitempty"`
	LeaseToken string          `json:"lease_token,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	Error      *JobError       `json:"error,omitempty"`
	// Requeue, on fail, puts the task back (queued) while it has attempts
	// left; without it a failed task stays failed, as in the seed.
	Requeue bool   `json:"requeue,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// TaskStepAnswer is the answer of a step: the task as it now is.
// Duplicate is set when the step repeated one already taken (nothing
// changed).
type TaskStepAnswer struct {
	Task      *ControlTask `json:"task"`
	Duplicate bool         `json:"duplicate,omitempty"`
}

// Event is one event of GET /v1/events (Server-Sent Events: its id is Seq,
// its event name Kind, its data this object).
type Event struct {
	// Seq numbers the cluster's events from 1, the same on every node.
	Seq uint64 `json:"seq"`
	// Index is the Raft index of the entry that made it.
	Index uint64    `json:"index"`
	At    time.Time `json:"at"`
	// Kind is job, gateway or worker; ID which one.
	Kind string `json:"kind"`
	ID   string `json:"id"`
	// Type is a job event's type (created, claimed, started, completed,
	// failed, released, reaped, dead, comment, redriven, routed), or
	// registered, updated, deregistered or health for the registry.
	Type  string `json:"type"`
	Actor string `json:"actor,omitempty"`
	// From and To are job statuses, or healths on a health event.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Stream and State, on job events: the job's stream and its task
	// state after the event.
	Stream    string `json:"stream,omitempty"`
	State     string `json:"state,omitempty"`
	AttemptID string `json:"attempt_id,omitempty"`
	AgentID   string `json:"agent_id,omitempty"`
	Text      string `json:"text,omitempty"`
	// Token names the named token of the call that caused a job event.
	Token string `json:"token,omitempty"`
}

// EventGap is the data of a "gap" event of GET /v1/events: the events
// after After up to Oldest-1 are no longer held (the feed keeps at least the
// latest 65,536); the stream goes on from Oldest.
type EventGap struct {
	After  uint64 `json:"after"`
	Oldest uint64 `json:"oldest"`
}
