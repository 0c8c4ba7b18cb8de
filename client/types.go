package client

import (
	"time"

	"github.com/spine-queue/spine/api"
)

// The types of the HTTP API are declared once, in package api, for the
// server and this client; the names below are aliases of them, so code
// written against the client keeps compiling.

// JobStatus is the state of a job.
type JobStatus = api.JobStatus

// The statuses of a job.
const (
	JobStatusQueued  = api.JobStatusQueued
	JobStatusRunning = api.JobStatusRunning
	JobStatusDone    = api.JobStatusDone
	JobStatusFailed  = api.JobStatusFailed
	JobStatusDead    = api.JobStatusDead
	// JobStatusCancelled: head cancelled the job.
	JobStatusCancelled = api.JobStatusCancelled
)

// Attempt outcomes ([JobAttempt].Outcome).
const (
	OutcomeRunning   = api.OutcomeRunning
	OutcomeCompleted = api.OutcomeCompleted
	OutcomeFailed    = api.OutcomeFailed
	OutcomeReleased  = api.OutcomeReleased
	OutcomeExpired   = api.OutcomeExpired
	OutcomeCancelled = api.OutcomeCancelled
)

type (
	// Job is the v0 view of a job.
	Job = api.Job
	// Comment is a note attached to a job.
	Comment = api.Comment
	// JobEvent is one entry of a job's history.
	JobEvent = api.JobEvent
	// JobAttempt records one claim of a job and how it ended.
	JobAttempt = api.JobAttempt
	// JobListResult is one page of jobs; NextCursor is empty on the last page.
	JobListResult = api.JobList
	// Blob is a stored, content-addressed byte string.
	Blob = api.Blob

	// JobCreateParams are the fields of a new job. Payload is required.
	// When IdempotencyKey is empty, JobCreate generates a UUID so its own
	// retries are safe.
	JobCreateParams = api.JobCreateRequest
	// Backoff is a job's retry backoff (JobCreateParams.Backoff).
	Backoff = api.Backoff
	// JobClaimParams are the optional fields of a v0 claim.
	JobClaimParams = api.JobClaimRequest
	// JobLeaseParams fence a heartbeat with the claim's lease token and attempt id.
	JobLeaseParams = api.JobHeartbeatRequest
	// JobCompleteParams complete a running job.
	JobCompleteParams = api.JobCompleteRequest
	// JobFailParams fail a running job.
	JobFailParams = api.JobFailRequest
	// JobReleaseParams give a running job back to the queue without
	// counting the attempt.
	JobReleaseParams = api.JobReleaseRequest

	// WorkerClaim is the answer to a worker claim. Claimed is false when no
	// job became ready within MaxWait.
	WorkerClaim = api.WorkerClaim
	// WorkerHeartbeatParams extend the lease of a worker-contract attempt.
	WorkerHeartbeatParams = api.WorkerHeartbeatRequest
	// WorkerHeartbeatResult is the answer to a heartbeat.
	WorkerHeartbeatResult = api.WorkerHeartbeatResult
	// WorkerCompleteParams complete a worker-contract attempt.
	WorkerCompleteParams = api.WorkerCompleteRequest
	// WorkerNextParams, as a complete's Next, also claim the worker's next
	// job (max_wait_ms in milliseconds).
	WorkerNextParams = api.WorkerClaimRequest
	// WorkerFailParams fail a worker-contract attempt.
	WorkerFailParams = api.WorkerFailRequest
	// WorkerReleaseParams give a worker-contract attempt's job back.
	WorkerReleaseParams = api.WorkerReleaseRequest
	// WorkerAck is the answer to a worker complete or fail.
	WorkerAck = api.WorkerAck

	// Health is a node's answer to GET /health.
	Health = api.Health
	// Member names a node joining the cluster.
	Member = api.Member
	// ClusterNode is one member in a cluster status.
	ClusterNode = api.ClusterNode
	// ClusterLeader names the leader in a cluster status.
	ClusterLeader = api.ClusterLeader
	// ClusterStatus is the answer of GET /cluster/status and of the
	// membership calls.
	ClusterStatus = api.ClusterStatus
)

// JobListParams filter and page a job listing. Zero fields are not sent.
type JobListParams struct {
	Status JobStatus
	Stream string
	Target string
	// Schedule keeps the jobs the recurring schedule of this name made.
	Schedule string
	Limit    int    // 1–1000, server default 100
	Cursor   string // NextCursor of the previous page
	// Stale reads the answering node's state without asking the leader.
	Stale bool
	// Consistent asks for a linearizable page: the leader confirms with a
	// quorum that it still leads before it answers (?consistent).
	Consistent bool
}

// WorkerClaimParams ask for the next job of the worker contract v1.
type WorkerClaimParams struct {
	WorkerID string
	// Streams are tried in order; empty means ["default"].
	Streams []string
	// MaxWait is how long the server may hold the request when no job is
	// ready (capped at 30s by the server; 0 answers at once).
	MaxWait time.Duration
	// MaxJobs, from 2 to 100, asks for up to that many jobs in one round
	// trip, each under its own lease (WorkerClaim.Jobs).
	MaxJobs int
	// Capabilities the worker has: it is handed only jobs whose requires
	// it all has.
	Capabilities []string
}

// DLQListParams page the dead-letter listing.
type DLQListParams struct {
	Stream string
	Limit  int
	Cursor string
}
