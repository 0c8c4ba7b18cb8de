package api

import (
	"encoding/json"
	"time"
)

// JobStatus is the state of a job.
type JobStatus string

const (
	// JobStatusQueued: waiting to be claimed. The only status a claim accepts.
	JobStatusQueued JobStatus = "queued"
	// JobStatusRunning: claimed under a lease that heartbeats extend.
	// Complete, fail, release and the reaper move it on.
	JobStatusRunning JobStatus = "running"
	// JobStatusDone: completed with a result. Terminal.
	JobStatusDone JobStatus = "done"
	// JobStatusFailed: failed without requeue (or not retryable). Terminal
	// until redriven.
	JobStatusFailed JobStatus = "failed"
	// JobStatusDead: out of attempts. Terminal until redriven.
	JobStatusDead JobStatus = "dead"
	// JobStatusCancelled: head cancelled it (POST /jobs/{id}/cancel).
	// Terminal until redriven.
	JobStatusCancelled JobStatus = "cancelled"
)

// Valid reports whether s is one of the six statuses.
func (s JobStatus) Valid() bool {
	switch s {
	case JobStatusQueued, JobStatusRunning, JobStatusDone, JobStatusFailed, JobStatusDead, JobStatusCancelled:
		return true
	}
	return false
}

// Attempt outcomes: how an attempt ended ([JobAttempt].Outcome).
const (
	// OutcomeRunning: the attempt still holds the lease.
	OutcomeRunning = "running"
	// OutcomeCompleted: the attempt completed the job.
	OutcomeCompleted = "completed"
	// OutcomeFailed: the attempt reported a failure.
	OutcomeFailed = "failed"
	// OutcomeReleased: the attempt gave the job back.
	OutcomeReleased = "released"
	// OutcomeExpired: the lease ran out and the reaper took the job back.
	OutcomeExpired = "expired"
	// OutcomeCancelled: head overrode the attempt (a redrive).
	OutcomeCancelled = "cancelled"
)

// Time is the API's form of a leader-stamped time in Unix nanoseconds: the
// zero Time for 0 (absent), else the instant in UTC, which encodes as RFC
// 3339 with nanoseconds.
func Time(unixNanos int64) time.Time {
	if unixNanos == 0 {
		return time.Time{}
	}
	return time.Unix(0, unixNanos).UTC()
}

// Job is the v0 view of a job: the answer of GET /jobs/{id} and of every v0
// write. Absent times are zero.
type Job struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
	// Target is the role, worker id or gateway the job is meant for; ""
	// (JSON null) when any claimant may take it. TargetKind says which:
	// "role", "worker" or "gateway" (a routed job).
	Target     NullableString `json:"target"`
	TargetKind string         `json:"targetKind,omitempty"`
	// Payload is the job's JSON payload, as created.
	Payload      json.RawMessage `json:"payload"`
	Status       JobStatus       `json:"status"`
	Attempts     int             `json:"attempts"`
	MaxAttempts  int             `json:"maxAttempts"`
	Priority     int             `json:"priority,omitempty"`
	LeaseSeconds int             `json:"leaseSeconds,omitempty"` // 0: the server's lease
	// RunAt is set while a queued job waits for its time (scheduled, or
	// waiting out its retry backoff): no claim takes it before.
	RunAt   time.Time `json:"runAt,omitzero"`
	Backoff *Backoff  `json:"backoff,omitempty"`
	// ConcurrencyKey and ConcurrencyLimit, as created or filled in from
	// the stream's defaults (the limit is at least 1 with a key).
	ConcurrencyKey   string `json:"concurrencyKey,omitempty"`
	ConcurrencyLimit int    `json:"concurrencyLimit,omitempty"`
	// RateLimit, as created or filled in from the stream's defaults: the
	// job's claims count against its key's rate (the key's rate in force
	// is the latest create's; GET /rates).
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// DependsOn names the jobs this one waits for; WaitingOn counts those
	// not done yet (no claim takes the job while it is above 0).
	// OnDependencyFailure is "run" for a job that runs whatever its
	// dependencies did (absent: "fail").
	DependsOn           []string `json:"dependsOn,omitempty"`
	WaitingOn           int      `json:"waitingOn,omitempty"`
	OnDependencyFailure string   `json:"onDependencyFailure,omitempty"`
	// Requires are the capabilities a claimant must have to be handed the
	// job (sorted, as created).
	Requires []string `json:"requires,omitempty"`
	// NotFor lists the workers that released the job as not for them:
	// no claim of theirs takes it again.
	NotFor    []string `json:"notFor,omitempty"`
	TaskClass string   `json:"taskClass,omitempty"`
	// ResultSchema is the job's result contract (as created, or from its
	// stream's defaults): a complete's result must match it.
	ResultSchema json.RawMessage `json:"resultSchema,omitempty"`

	// ClaimedBy, WorkerID, AttemptID and LeaseExpiresAt are set while the
	// job is running.
	ClaimedBy string `json:"claimedBy,omitempty"`
	WorkerID  string `json:"workerId,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	// LeaseToken is only in the answer to the claim that created it.
	LeaseToken     string    `json:"leaseToken,omitempty"`
	LeaseExpiresAt time.Time `json:"leaseExpiresAt,omitzero"`
	// Cancel is true while the job runs with a cancel asked of it: its
	// worker should stop and fail it (code "cancelled") or release it; the
	// job then ends cancelled, and so it does if the lease runs out.
	// CancelRequestedAt and CancelReason say when head asked, and why.
	Cancel            bool      `json:"cancel,omitempty"`
	CancelRequestedAt time.Time `json:"cancelRequestedAt,omitzero"`
	CancelReason      string    `json:"cancelReason,omitempty"`
	// Progress is what the running attempt last reported with a heartbeat
	// (gone once a new attempt starts); Checkpoint what an attempt last
	// saved, kept across attempts.
	Progress     json.RawMessage `json:"progress,omitempty"`
	ProgressAt   time.Time       `json:"progressAt,omitzero"`
	Checkpoint   json.RawMessage `json:"checkpoint,omitempty"`
	CheckpointAt time.Time       `json:"checkpointAt,omitzero"`

	Result json.RawMessage `json:"result,omitempty"`
	Error  *JobError       `json:"error,omitempty"`
	Stdout string          `json:"stdout,omitempty"`
	Stderr string          `json:"stderr,omitempty"`
	// Comments, oldest first; the server sends an empty array when there
	// are none.
	Comments []Comment `json:"comments"`

	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Schedule names the recurring schedule whose run made the job.
	Schedule string `json:"schedule,omitempty"`

	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`

	// CreateIndex and ModifyIndex are the Raft indexes of the job's
	// creation and of its latest change.
	CreateIndex uint64 `json:"createIndex"`
	ModifyIndex uint64 `json:"modifyIndex"`

	// Duplicate is not part of the JSON: the Go client sets it when a create
	// answered the first job of a repeated idempotency key (200, not 201).
	Duplicate bool `json:"-"`
}

// JobCancelRequest is the optional body of POST /jobs/{id}/cancel.
type JobCancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// NullableString is a string that encodes as JSON null when empty (and
// decodes null as empty).
type NullableString string

// MarshalJSON writes null for "".
func (s NullableString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(s))
}

// Comment is a note attached to a job.
type Comment struct {
	At    time.Time `json:"at"`
	Actor string    `json:"actor"` // the role that wrote it
	Text  string    `json:"text"`
}

// JobEvent is one entry of a job's history. From and To are set by the
// events that change the status.
type JobEvent struct {
	Seq int       `json:"seq"`
	At  time.Time `json:"at"`
	// Type is created, claimed, heartbeat, completed, failed, released,
	// reaped, dead, comment or redriven.
	Type      string    `json:"type"`
	Actor     string    `json:"actor"`
	From      JobStatus `json:"from,omitempty"`
	To        JobStatus `json:"to,omitempty"`
	AttemptID string    `json:"attemptId,omitempty"`
	WorkerID  string    `json:"workerId,omitempty"`
	Text      string    `json:"text,omitempty"`
	// Token names the named token of the call that caused the event
	// (none for an environment token, or the cluster's own events).
	Token string `json:"token,omitempty"`
}

// JobAttempt records one claim of a job and how it ended.
type JobAttempt struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"` // the role that claimed
	WorkerID  string    `json:"workerId,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"` // zero while running
	// Outcome is one of the Outcome constants.
	Outcome string    `json:"outcome"`
	Error   *JobError `json:"error,omitempty"`
}

// JobList is one page of jobs: the answer of GET /jobs and GET /dlq.
type JobList struct {
	Jobs []*Job `json:"jobs"`
	// NextCursor is the cursor of the next page; "" (JSON null) on the last
	// page.
	NextCursor NullableString `json:"nextCursor"`
}

// JobEventList is the answer of GET /jobs/{id}/events: the job's history,
// oldest first.
type JobEventList struct {
	Events []*JobEvent `json:"events"`
	JobID  string      `json:"jobId"`
}

// JobAttemptList is the answer of GET /jobs/{id}/attempts: the job's
// attempts, oldest first.
type JobAttemptList struct {
	Attempts []*JobAttempt `json:"attempts"`
	JobID    string        `json:"jobId"`
}

// Blob is a stored, content-addressed byte string: the answer of POST /blobs.
type Blob struct {
	ID          string `json:"id"` // hex SHA-256 of the content
	Size        int64  `json:"size"`
	ContentType string `json:"contentType"`
	// Duplicate is not part of the JSON: the Go client sets it when the
	// same bytes were already stored (200, not 201).
	Duplicate bool `json:"-"`
}

// Backoff is a job's retry backoff: after its n-th failed attempt (with
// requeue) it waits Base*2^(n-1) seconds, at most Max, less up to a fifth
// as jitter.
type Backoff struct {
	Base int64 `json:"base"`
	Max  int64 `json:"max,omitempty"`
}

// JobClaimRequest is the body of POST /jobs/{id}/claim (claws).
type JobClaimRequest struct {
	// WorkerID is recorded with the attempt; a job targeted at a worker id
	// can only be claimed with it.
	WorkerID string `json:"workerId,omitempty"`
	// Capabilities the claimant has: a job that requires others is
	// refused (409 missing_capability).
	Capabilities []string `json:"capabilities,omitempty"`
}

// JobHeartbeatRequest is the body of POST /jobs/{id}/heartbeat. The lease
// token and attempt id of the claim, when given, fence the call to that
// lease.
type JobHeartbeatRequest struct {
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
	WorkerLeaseFields
	// Progress (JSON, at most 4 KiB) is shown on the job until the attempt
	// ends; Checkpoint (JSON, at most 64 KiB) is kept across attempts and
	// handed to the next claim. Either makes the heartbeat a write.
	Progress   json.RawMessage `json:"progress,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// JobCompleteRequest is the body of POST /jobs/{id}/complete. With both
// LeaseToken and AttemptID a repeat of the same call is idempotent.
type JobCompleteRequest struct {
	Result     json.RawMessage `json:"result,omitempty"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	LeaseToken string          `json:"leaseToken,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
	WorkerLeaseFields
}

// JobFailRequest is the body of POST /jobs/{id}/fail. With both LeaseToken
// and AttemptID a repeat of the same call is idempotent.
type JobFailRequest struct {
	// Error is the failure; in JSON an object or a plain string (the
	// message). Nil fails with an empty message.
	Error *JobError `json:"error,omitempty"`
	// Requeue (nil: true) puts the job back in the queue while it has
	// attempts left; false makes it failed.
	Requeue    *bool  `json:"requeue,omitempty"`
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
	Stdout     string `json:"stdout,omitempty"`
	Stderr     string `json:"stderr,omitempty"`

	// The worker contract's fail body (WorkerFailRequest) is accepted as
	// it is: without requeue, an error that names retryable decides
	// (true: requeue).
	WorkerLeaseFields
}

// WorkerLeaseFields are the worker contract's names for a lease call's
// fields, accepted by every v0 lease call (heartbeat, complete, fail,
// release) so that one body works on both APIs: lease_token and
// attempt_id fence the call like leaseToken and attemptId (giving both
// names with different values is refused), job_id must name the job of
// the path, worker_id names the worker (the release's not_for_me needs
// it), stream and message_id are accepted and not checked.
type WorkerLeaseFields struct {
	JobIDAlt      string `json:"job_id,omitempty"`
	WorkerID      string `json:"worker_id,omitempty"`
	LeaseTokenAlt string `json:"lease_token,omitempty"`
	AttemptIDAlt  string `json:"attempt_id,omitempty"`
	Stream        string `json:"stream,omitempty"`
	MessageID     string `json:"message_id,omitempty"`
}

// JobReleaseRequest is the body of POST /jobs/{id}/release: the job goes
// back to the queue and the attempt does not count. The worker contract's
// release body (WorkerReleaseRequest) is accepted as it is.
type JobReleaseRequest struct {
	Reason     string `json:"reason,omitempty"`
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
	WorkerLeaseFields
	// CooldownMS keeps the job from being claimed again for that long;
	// NotForMe (with worker_id) keeps it from that worker's claims, as on
	// the worker contract's release.
	CooldownMS int64 `json:"cooldown_ms,omitempty"`
	NotForMe   bool  `json:"not_for_me,omitempty"`
}

// JobCommentRequest is the body of POST /jobs/{id}/comment.
type JobCommentRequest struct {
	Text string `json:"text"`
}
