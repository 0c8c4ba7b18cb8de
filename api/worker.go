package api

import (
	"encoding/json"
	"time"
)

// The worker contract v1 (claws): POST /internal/worker/claim, heartbeat,
// complete and fail. Its JSON names are snake_case.

// WorkerClaimRequest is the body of POST /internal/worker/claim.
type WorkerClaimRequest struct {
	WorkerID string `json:"worker_id"`
	// Streams are tried in order; empty means ["default"].
	Streams []string `json:"streams,omitempty"`
	// MaxWaitMS is how long the server may hold the request when no job is
	// ready, in milliseconds (capped by the server, 30000 by default; 0
	// answers at once).
	MaxWaitMS int64 `json:"max_wait_ms"`
	// MaxJobs, from 1 to 100, asks for up to that many jobs in one round
	// trip (as many as wait, once at least one does), each under its own
	// lease: the answer lists them in Jobs.
	MaxJobs int `json:"max_jobs,omitempty"`
	// Capabilities the worker has (labels such as gpu, lang:python; at
	// most 32): it is handed only jobs whose requires it all has, still
	// oldest first among those. Without any, only jobs that require
	// nothing.
	Capabilities []string `json:"capabilities,omitempty"`
}

// WorkerClaim is the answer of a worker claim. Claimed is false, and every
// other field absent, when no job became ready within the wait.
type WorkerClaim struct {
	Claimed    bool   `json:"claimed"`
	JobID      string `json:"job_id,omitempty"`
	AttemptID  string `json:"attempt_id,omitempty"`
	LeaseToken string `json:"lease_token,omitempty"`
	Stream     string `json:"stream,omitempty"`
	// MessageID names the queue entry the claim took.
	MessageID string          `json:"message_id,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	// LeaseTTLSeconds is the lease's length; HeartbeatIntervalSeconds how
	// often the server wants a heartbeat (a third of the lease).
	LeaseTTLSeconds          float64 `json:"lease_ttl_seconds,omitempty"`
	HeartbeatIntervalSeconds float64 `json:"heartbeat_interval_seconds,omitempty"`
	// Attempt is this attempt's number, from 1; MaxAttempts the job's limit.
	Attempt     int `json:"attempt,omitempty"`
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Checkpoint is what an earlier attempt saved with a heartbeat: resume
	// from it.
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// ResultSchema is the job's result contract: the result the complete
	// sends must match this JSON Schema, or the complete is refused (400
	// result_mismatch, listing every mismatch) and the job stays yours to
	// complete again. Absent: any result.
	ResultSchema json.RawMessage `json:"result_schema,omitempty"`
	// Elsewhere, in an answer that claimed nothing, lists up to 10 other
	// streams with queued jobs (not paused), most queued first: where work
	// waits that this claim did not ask for (some of it may be targeted at
	// other claimants).
	Elsewhere []StreamQueue `json:"elsewhere,omitempty"`
	// Jobs, in the answer to a claim with max_jobs, lists every job taken,
	// each with its own lease (the fields above repeat the first); empty
	// when nothing was claimed.
	Jobs []WorkerClaim `json:"jobs,omitempty"`
}

// LeaseTTL is the lease length as a duration.
func (w *WorkerClaim) LeaseTTL() time.Duration {
	return time.Duration(w.LeaseTTLSeconds * float64(time.Second))
}

// HeartbeatInterval is how often the server wants a heartbeat; a third of
// the lease when the server did not say, and 10s when it did not say either.
func (w *WorkerClaim) HeartbeatInterval() time.Duration {
	if w.HeartbeatIntervalSeconds > 0 {
		return time.Duration(w.HeartbeatIntervalSeconds * float64(time.Second))
	}
	if d := w.LeaseTTL() / 3; d > 0 {
		return d
	}
	return 10 * time.Second
}

// WorkerHeld is the answer of GET /internal/worker/held: the running jobs
// whose leases the caller's role holds for WorkerID, each as its claim
// answered it (lease token, attempt, payload, checkpoint), oldest first.
type WorkerHeld struct {
	WorkerID string        `json:"worker_id"`
	Jobs     []WorkerClaim `json:"jobs"`
}

// WorkerHeartbeatRequest is the body of POST /internal/worker/heartbeat: it
// extends the lease of the attempt that holds LeaseToken.
type WorkerHeartbeatRequest struct {
	WorkerID   string `json:"worker_id"`
	JobID      string `json:"job_id"`
	LeaseToken string `json:"lease_token"`
	// AttemptID, when given, also fences the heartbeat to that attempt.
	AttemptID string `json:"attempt_id,omitempty"`
	// Stream and MessageID, as the claim answered them, are accepted and
	// not checked (the lease token names the attempt).
	Stream    string `json:"stream,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// Progress (JSON, at most 4 KiB) is shown on the job until the attempt
	// ends; Checkpoint (JSON, at most 64 KiB) is kept across attempts and
	// handed to the next claim (WorkerClaim.Checkpoint). Either makes the
	// heartbeat a write on the leader.
	Progress   json.RawMessage `json:"progress,omitempty"`
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// WorkerHeartbeatResult is the answer of a worker heartbeat.
type WorkerHeartbeatResult struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
	OK             bool      `json:"ok"`
	// Cancel: head cancelled the job. Stop, and fail it (code
	// "cancelled") or release it; it ends cancelled either way, and so it
	// does if the lease runs out.
	Cancel bool `json:"cancel,omitempty"`
}

// WorkerCompleteRequest is the body of POST /internal/worker/complete. A
// repeat of the same attempt with the same token answers the first answer
// again and changes nothing.
type WorkerCompleteRequest struct {
	WorkerID   string          `json:"worker_id"`
	JobID      string          `json:"job_id"`
	AttemptID  string          `json:"attempt_id"`
	LeaseToken string          `json:"lease_token"`
	Stream     string          `json:"stream,omitempty"`
	MessageID  string          `json:"message_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	// Next, when set, also claims this worker's next job, as a claim with
	// these fields would (its worker_id, if given, must be the complete's):
	// the answer's Next is that claim's answer. A job that is ready is
	// taken in the same commit as the complete; otherwise the claim waits
	// up to its max_wait_ms after the complete, as a claim does. A refused
	// complete claims nothing. A repeated complete claims again, so a
	// worker that lost an answer holds the job that answer named until its
	// lease expires, as after a lost claim answer.
	Next *WorkerClaimRequest `json:"next,omitempty"`
}

// WorkerFailRequest is the body of POST /internal/worker/fail. The error's
// Retryable decides whether the job is requeued (while it has attempts
// left). Repeats are answered like those of a complete.
type WorkerFailRequest struct {
	WorkerID   string `json:"worker_id"`
	JobID      string `json:"job_id"`
	AttemptID  string `json:"attempt_id"`
	LeaseToken string `json:"lease_token"`
	Stream     string `json:"stream,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	// Error is the failure; in JSON an object or a plain string (the
	// message). Nil (null) fails as not retryable with an empty message.
	Error  *JobError `json:"error"`
	Stdout string    `json:"stdout,omitempty"`
	Stderr string    `json:"stderr,omitempty"`
	// Requeue, when given, decides instead of Error.Retryable whether the
	// job goes back to the queue (the v0 fail's field, accepted here too).
	Requeue *bool `json:"requeue,omitempty"`
}

// WorkerReleaseRequest is the body of POST /internal/worker/release: give
// the job back without using an attempt. CooldownMS keeps it from being
// claimed again (by anyone) for that long, so a worker that cannot do it is
// not handed it straight back.
type WorkerReleaseRequest struct {
	WorkerID   string `json:"worker_id"`
	JobID      string `json:"job_id"`
	AttemptID  string `json:"attempt_id,omitempty"`
	LeaseToken string `json:"lease_token"`
	Stream     string `json:"stream,omitempty"`
	MessageID  string `json:"message_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
	CooldownMS int64  `json:"cooldown_ms,omitempty"`
	// NotForMe: this worker cannot do the job; no claim of this worker_id
	// takes it again, while other workers get it at once (or after
	// CooldownMS, which then applies to them).
	NotForMe bool `json:"not_for_me,omitempty"`
}

// WorkerAck is the answer of a worker fail. It is also what the Go client
// decodes the answer of a complete into ([WorkerCompleteAck], which lacks
// Requeued and DLQ).
type WorkerAck struct {
	Ack bool `json:"ack"`
	// DLQ: the job is now failed or dead (fail only).
	DLQ bool `json:"dlq"`
	// Duplicate: a repeat of a call already applied; nothing changed.
	Duplicate bool `json:"duplicate"`
	OK        bool `json:"ok"`
	// Requeued: the job is back in the queue (fail and release).
	Requeued bool `json:"requeued"`
	// Status is where the call left the job. After a fail: queued
	// (requeued), failed (not retryable), dead (retryable, but out of
	// attempts) or cancelled (a cancel had been asked); a repeat answers
	// as the first did. After a release: queued, or cancelled.
	Status JobStatus `json:"status,omitempty"`
	// Next is the answer of a complete's next claim (complete only).
	Next *WorkerClaim `json:"next,omitempty"`
}

// WorkerCompleteAck is the answer of a worker complete.
type WorkerCompleteAck struct {
	Ack bool `json:"ack"`
	// Duplicate: a repeat of a complete already applied; nothing changed.
	Duplicate bool `json:"duplicate"`
	OK        bool `json:"ok"`
	// Next: the answer of the claim the request's Next asked for.
	Next *WorkerClaim `json:"next,omitempty"`
}

// WorkerRefusal is the body of a refused (fenced-off) worker heartbeat,
// complete or fail: 409, 403 or 404 with ok false. Its "error" has the shape
// of an [ErrorBody]'s, so it decodes as one too.
type WorkerRefusal struct {
	Error ErrorDetail `json:"error"`
	OK    bool        `json:"ok"`
}
