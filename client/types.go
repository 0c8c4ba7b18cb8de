package client

import (
	"encoding/json"
	"time"
)

// JobStatus is the state of a job.
type JobStatus string

const (
	// JobStatusQueued: waiting to be claimed.
	JobStatusQueued JobStatus = "queued"
	// JobStatusRunning: claimed under a lease that heartbeats extend.
	JobStatusRunning JobStatus = "running"
	// JobStatusDone: completed with a result. Terminal.
	JobStatusDone JobStatus = "done"
	// JobStatusFailed: failed without requeue. Terminal until redriven.
	JobStatusFailed JobStatus = "failed"
	// JobStatusDead: out of attempts. Terminal until redriven.
	JobStatusDead JobStatus = "dead"
)

// Job is the v0 view of a job.
type Job struct {
	ID           string          `json:"id"`
	Stream       string          `json:"stream"`
	Target       string          `json:"target,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Status       JobStatus       `json:"status"`
	Attempts     int             `json:"attempts"`
	MaxAttempts  int             `json:"maxAttempts"`
	LeaseSeconds int             `json:"leaseSeconds"`
	TaskClass    string          `json:"taskClass,omitempty"`

	// ClaimedBy, WorkerID, AttemptID and LeaseExpiresAt are set while running.
	ClaimedBy      string    `json:"claimedBy,omitempty"`
	WorkerID       string    `json:"workerId,omitempty"`
	AttemptID      string    `json:"attemptId,omitempty"`
	LeaseExpiresAt time.Time `json:"leaseExpiresAt,omitzero"`
	// LeaseToken is only in the answer to the claim that created it.
	LeaseToken string `json:"leaseToken,omitempty"`

	Result   json.RawMessage `json:"result,omitempty"`
	Error    *JobError       `json:"error,omitempty"`
	Stdout   string          `json:"stdout,omitempty"`
	Stderr   string          `json:"stderr,omitempty"`
	Comments []Comment       `json:"comments,omitempty"`

	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	CreatedAt  time.Time `json:"createdAt,omitzero"`
	UpdatedAt  time.Time `json:"updatedAt,omitzero"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`

	CreateIndex uint64 `json:"createIndex"`
	ModifyIndex uint64 `json:"modifyIndex"`

	// Duplicate is set by JobCreate when the idempotency key had already
	// been used: the job is the one the first create made.
	Duplicate bool `json:"-"`
}

// Comment is a note attached to a job.
type Comment struct {
	At    time.Time `json:"at"`
	Actor string    `json:"actor"`
	Text  string    `json:"text"`
}

// JobEvent is one entry of a job's history.
type JobEvent struct {
	Seq       int       `json:"seq"`
	At        time.Time `json:"at"`
	Type      string    `json:"type"`
	Actor     string    `json:"actor"`
	From      JobStatus `json:"from"`
	To        JobStatus `json:"to"`
	AttemptID string    `json:"attemptId"`
	WorkerID  string    `json:"workerId"`
	Text      string    `json:"text"`
}

// Attempt outcomes.
const (
	OutcomeRunning   = "running"
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeReleased  = "released"
	OutcomeExpired   = "expired"
)

// JobAttempt records one claim of a job and how it ended.
type JobAttempt struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	WorkerID  string    `json:"workerId"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
	Outcome   string    `json:"outcome"`
	Error     *JobError `json:"error,omitempty"`
}

// JobCreateParams are the fields of a new job. Payload is required.
type JobCreateParams struct {
	Payload      json.RawMessage `json:"payload"`
	MaxAttempts  int             `json:"maxAttempts,omitempty"`
	Target       string          `json:"target,omitempty"`
	Stream       string          `json:"stream,omitempty"`
	LeaseSeconds int             `json:"leaseSeconds,omitempty"`
	TaskClass    string          `json:"taskClass,omitempty"`
	// IdempotencyKey makes a repeated create answer the first job. When
	// empty, JobCreate generates a UUID so its own retries are safe.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// JobListParams filter and page a job listing. Zero fields are not sent.
type JobListParams struct {
	Status JobStatus
	Stream string
	Target string
	Limit  int    // 1–1000, server default 100
	Cursor string // NextCursor of the previous page
	// Stale reads the answering node's state without asking the leader.
	Stale bool
}

// JobListResult is one page of jobs.
type JobListResult struct {
	Jobs []*Job `json:"jobs"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"nextCursor"`
}

// JobClaimParams are the optional fields of a v0 claim.
type JobClaimParams struct {
	WorkerID string `json:"workerId,omitempty"`
}

// JobLeaseParams fence a heartbeat with the claim's lease token and attempt id.
type JobLeaseParams struct {
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
}

// JobCompleteParams complete a running job.
type JobCompleteParams struct {
	Result     json.RawMessage `json:"result,omitempty"`
	Stdout     string          `json:"stdout,omitempty"`
	Stderr     string          `json:"stderr,omitempty"`
	LeaseToken string          `json:"leaseToken,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
}

// JobFailParams fail a running job.
type JobFailParams struct {
	Error *JobError `json:"error,omitempty"`
	// Requeue (default true) puts the job back in the queue while it has
	// attempts left; false makes it failed.
	Requeue    *bool  `json:"requeue,omitempty"`
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
}

// JobReleaseParams give a running job back to the queue without counting
// the attempt.
type JobReleaseParams struct {
	Reason     string `json:"reason,omitempty"`
	LeaseToken string `json:"leaseToken,omitempty"`
	AttemptID  string `json:"attemptId,omitempty"`
}

// Blob is a stored, content-addressed byte string.
type Blob struct {
	ID          string `json:"id"` // hex SHA-256 of the content
	Size        int64  `json:"size"`
	ContentType string `json:"contentType"`
	// Duplicate is set when the same bytes were already stored.
	Duplicate bool `json:"-"`
}

// WorkerClaimParams ask for the next job of the worker contract v1.
type WorkerClaimParams struct {
	WorkerID string
	// Streams are tried in order; empty means ["default"].
	Streams []string
	// MaxWait is how long the server may hold the request when no job is
	// ready (capped at 30s by the server; 0 answers at once).
	MaxWait time.Duration
}

// WorkerClaim is the answer to a worker claim. Claimed is false when no job
// became ready within MaxWait.
type WorkerClaim struct {
	Claimed                  bool            `json:"claimed"`
	JobID                    string          `json:"job_id,omitempty"`
	AttemptID                string          `json:"attempt_id,omitempty"`
	LeaseToken               string          `json:"lease_token,omitempty"`
	Stream                   string          `json:"stream,omitempty"`
	MessageID                string          `json:"message_id,omitempty"`
	Payload                  json.RawMessage `json:"payload,omitempty"`
	LeaseTTLSeconds          float64         `json:"lease_ttl_seconds,omitempty"`
	HeartbeatIntervalSeconds float64         `json:"heartbeat_interval_seconds,omitempty"`
	Attempt                  int             `json:"attempt,omitempty"`
	MaxAttempts              int             `json:"max_attempts,omitempty"`
}

// LeaseTTL is the lease length as a duration.
func (w *WorkerClaim) LeaseTTL() time.Duration {
	return time.Duration(w.LeaseTTLSeconds * float64(time.Second))
}

// HeartbeatInterval is how often the server wants a heartbeat; a third of
// the lease when the server did not say.
func (w *WorkerClaim) HeartbeatInterval() time.Duration {
	if w.HeartbeatIntervalSeconds > 0 {
		return time.Duration(w.HeartbeatIntervalSeconds * float64(time.Second))
	}
	if d := w.LeaseTTL() / 3; d > 0 {
		return d
	}
	return 10 * time.Second
}

// WorkerHeartbeatParams extend the lease of a worker-contract attempt.
type WorkerHeartbeatParams struct {
	WorkerID   string `json:"worker_id"`
	JobID      string `json:"job_id"`
	LeaseToken string `json:"lease_token"`
}

// WorkerHeartbeatResult is the answer to a heartbeat.
type WorkerHeartbeatResult struct {
	OK             bool      `json:"ok"`
	LeaseExpiresAt time.Time `json:"lease_expires_at,omitzero"`
}

// WorkerCompleteParams complete a worker-contract attempt.
type WorkerCompleteParams struct {
	WorkerID   string          `json:"worker_id"`
	JobID      string          `json:"job_id"`
	AttemptID  string          `json:"attempt_id"`
	LeaseToken string          `json:"lease_token"`
	Stream     string          `json:"stream,omitempty"`
	MessageID  string          `json:"message_id,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
}

// WorkerFailParams fail a worker-contract attempt.
type WorkerFailParams struct {
	WorkerID   string    `json:"worker_id"`
	JobID      string    `json:"job_id"`
	AttemptID  string    `json:"attempt_id"`
	LeaseToken string    `json:"lease_token"`
	Stream     string    `json:"stream,omitempty"`
	MessageID  string    `json:"message_id,omitempty"`
	Error      *JobError `json:"error"`
}

// WorkerAck is the answer to a worker complete or fail.
type WorkerAck struct {
	OK  bool `json:"ok"`
	Ack bool `json:"ack"`
	// Requeued and DLQ are set by a fail: back in the queue, or failed/dead.
	Requeued bool `json:"requeued,omitempty"`
	DLQ      bool `json:"dlq,omitempty"`
}

// DLQListParams page the dead-letter listing.
type DLQListParams struct {
	Stream string
	Limit  int
	Cursor string
}

// Health is a node's answer to GET /health.
type Health struct {
	OK           bool      `json:"ok"`
	NodeID       string    `json:"node_id"`
	Role         string    `json:"role"`
	LeaderID     string    `json:"leader_id"`
	LeaderAddr   string    `json:"leader_addr"`
	LastContact  time.Time `json:"last_contact,omitzero"`
	AppliedIndex uint64    `json:"applied_index"`
	CommitIndex  uint64    `json:"commit_index"`
	CPUSeconds   float64   `json:"cpu_seconds"`
}

// Member names a node joining the cluster.
type Member struct {
	NodeID     string `json:"node_id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
}

// ClusterNode is one member in a cluster status.
type ClusterNode struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
	Suffrage   string `json:"suffrage"`
	Alive      bool   `json:"alive"`
	// HashIndex and StateHash: the node's latest state hash as gossiped.
	HashIndex uint64 `json:"hash_index,omitempty"`
	StateHash string `json:"state_hash,omitempty"`
}

// ClusterLeader names the leader in a cluster status.
type ClusterLeader struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// ClusterStatus is the answer of GET /cluster/status and of the membership calls.
type ClusterStatus struct {
	Leader       ClusterLeader  `json:"leader"`
	Nodes        []*ClusterNode `json:"nodes"`
	Term         uint64         `json:"term"`
	CommitIndex  uint64         `json:"commit_index"`
	AppliedIndex uint64         `json:"applied_index"`
	NodeID       string         `json:"node_id"`
	State        string         `json:"state"`
	// LastContact is passed through as the server formats it.
	LastContact string `json:"last_contact,omitempty"`
	// HashIndex and StateHash are the node's running hash of the commands
	// it has applied: equal on nodes that applied the same log up to the
	// same index. HashMismatches counts peers whose hash differed at the
	// same index (replicas diverged): it must be 0.
	HashIndex      uint64 `json:"hash_index"`
	StateHash      string `json:"state_hash"`
	HashChecks     uint64 `json:"hash_checks"`
	HashMismatches uint64 `json:"hash_mismatches"`
}
