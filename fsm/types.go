package fsm

import "strings"

// State is the canonical state of a job. Every API surface shows a mapping
// of these five.
type State string

const (
	// StateQueued: waiting to be claimed. The only state a claim accepts.
	StateQueued State = "queued"
	// StateRunning: claimed under a lease that heartbeats extend. Complete,
	// fail, release and the reaper move it on.
	StateRunning State = "running"
	// StateDone: completed with a result. Terminal.
	StateDone State = "done"
	// StateFailed: failed without requeue (or non-retryable). Terminal until
	// re-driven.
	StateFailed State = "failed"
	// StateDead: out of attempts. Terminal until re-driven.
	StateDead State = "dead"
	// StateCancelled: head cancelled it (cmd_cancel.go). Terminal until
	// re-driven.
	StateCancelled State = "cancelled"
)

// Valid reports whether s is one of the six canonical states.
func (s State) Valid() bool {
	switch s {
	case StateQueued, StateRunning, StateDone, StateFailed, StateDead, StateCancelled:
		return true
	}
	return false
}

// Terminal reports whether no worker action can move a job out of s.
func (s State) Terminal() bool {
	return s == StateDone || s == StateFailed || s == StateDead || s == StateCancelled
}

// DefaultStream is the stream of a job created without one.
const DefaultStream = "default"

// Job is one unit of work. Objects read from the store are shared and must
// never be modified; apply code copies before changing.
//
// A job is 256 bytes, the top of its malloc size class (TestEventSizes
// pins it): its counts and backoff are 32 bits, its target and creator
// Idents, its attempts and history one pointer to an open trail or one to
// a sealed one (trail.go), and what most jobs leave unset lives in
// JobExtra. A field every job needs is worth the next class (288); any
// other belongs in JobExtra.
type Job struct {
	ID     string
	Stream string
	// Target, when set, is the role or worker id the job is meant for; only
	// a claimant matching it may claim the job.
	Target      Ident
	Payload     []byte // raw JSON
	State       State
	Attempts    int32
	MaxAttempts int32
	// Priority orders the queue: higher first, FIFO within a priority,
	// aged so that none starves (PriorityAging). 0 by default.
	Priority int32
	// BackoffBase and BackoffMax (seconds; 0: none) make a fail with
	// requeue wait base*2^(attempts-1), at most max, with jitter, before
	// the job is claimable again (retryDelay). Most jobs have them: the
	// cluster's default backoff is set on every job created without one.
	BackoffBase, BackoffMax int32
	sealedLen               uint32 // the length of sealed (below)
	// NotBefore, while not 0, is when a queued job becomes claimable (a
	// scheduled job, or one waiting out a retry backoff): until the
	// leader's promote command reaches it, it is in no queue lane.
	NotBefore      int64
	IdempotencyKey string

	// Lease is set while the job is running.
	Lease *Lease

	Result []byte // raw JSON, set by complete
	Error  *JobError

	// trail holds the job's attempts (AttemptLog), one per claim, and its
	// append-only event history (History), but for the created event of
	// a job whose creator is set: that event is then {Seq 1, At
	// CreatedAt, created, To queued, Actor creator}, which the job's
	// fields already hold but for its actor, so it is kept as that actor
	// alone (History gives it back). A queued job made by a plain create
	// has no trail and is one allocation; a finished job's trail is
	// sealed into one string (trail.go), held by sealed and sealedLen
	// instead of trail.
	trail *trail
	// sealed points at the bytes of a finished job's sealed trail,
	// sealedLen long (nil while the trail is open or absent). Held here
	// rather than in a trail it would be alone in, a sealed trail is one
	// object without pointers; sealedLen fills what was padding.
	sealed *byte

	CreatedAt  int64 // unix nanoseconds, stamped by the leader
	UpdatedAt  int64
	StartedAt  int64 // last claim
	FinishedAt int64 // last terminal transition

	// CreateIndex is the Raft index of the create entry: the job's place in
	// creation order and the cursor for listing.
	CreateIndex uint64
	// QueueIndex is the Raft index at which the job last entered the queue:
	// claims take the lowest QueueIndex first (FIFO per stream).
	QueueIndex uint64
	// ModifyIndex is the Raft index of the last change.
	ModifyIndex uint64

	// extra holds the fields most jobs leave zero (nil while all are):
	// read them with Extra, change them with extraMut.
	extra *JobExtra

	// creator is the actor of the job's created event when history does
	// not hold it ("" when it does).
	creator Ident
}

// JobExtra is the part of a job that most jobs never set: job-control
// options (but the retry backoff, which the cluster's default sets), a
// task's or a routed job's fields, a running attempt's reports, comments
// and output. It lives behind one pointer so that a plain job does not
// carry it: a queued job costs a fifth less memory, and every change of a
// job copies less.
type JobExtra struct {
	// ConcurrencyKey, when set, limits how many jobs of the key run at
	// once, cluster-wide, to ConcurrencyLimit (at least 1); the others
	// wait without blocking other keys (concurrency.go).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// Rate, when set, limits how often jobs of its key are claimed,
	// cluster-wide (ratelimit.go); shared, never changed.
	Rate *RateLimit
	// Requires is the key (CapabilityKey) of the capabilities a claim must
	// have to take the job; "" for none. ClaimCaps is the capability key
	// of the claim that last took it (capabilities.go).
	Requires, ClaimCaps string
	// NotFor lists the workers that released the job as not for them
	// (at most MaxNotFor, the latest): no claim-next of theirs takes it.
	NotFor []string
	// DependsOn names the jobs this one waits for; DepsPending counts
	// those not done yet: while it is not 0 the queued job is in no lane
	// (depends.go).
	DependsOn   []string
	DepsPending int
	// RunOnDepFailure: a dependency that ends failed, dead or cancelled
	// counts as settled, like a done one, instead of failing this job
	// (a fan-in that must run whatever its parts did).
	RunOnDepFailure bool
	// LeaseSeconds overrides the cluster's lease length for this job (0 = default).
	LeaseSeconds int64
	// TaskClass is an optional label (e.g. LLM_HEAVY) chosen at create.
	TaskClass string

	// A developer-queue task (devq.go) has a Timeout: stale past it since
	// its claim (or last heartbeat), auto-failed at twice it. ToolName is
	// its registered tool; ClonedFrom the failed task a requeue copied.
	ToolName   string
	Timeout    int64 // seconds; 0: not a task
	ClonedFrom string

	// Route is what the job asked of a gateway when it was routed to one
	// (cmd_route.go); Target is then that gateway's id. A gateway's death
	// routes its queued jobs again with the same requirements.
	Route *RouteSpec

	// CancelRequestedAt is when head asked to cancel the job while it ran
	// (0: never): its worker learns it from its next heartbeat answer, and
	// however the attempt ends but by a complete (a fail, a release, the
	// lease running out), the job ends cancelled. CancelReason is head's.
	CancelRequestedAt int64
	CancelReason      string

	// Progress is what the running attempt last reported (raw JSON; nil
	// once a new attempt starts); Checkpoint what an attempt last saved
	// (raw JSON), kept across attempts and handed to the next claim.
	Progress     []byte
	ProgressAt   int64
	Checkpoint   []byte
	CheckpointAt int64

	Stdout   string
	Stderr   string
	Comments []Comment

	// ResultSchema is the job's result contract (contract.go): the
	// canonical JSON of a schema its result must match, "" for none. Set
	// at create (or from the stream's defaults) and never changed; jobs
	// with equal schemas share one string.
	ResultSchema string
	// Schedule names the recurring schedule whose run made the job
	// (schedule.go); "" for a job made otherwise.
	Schedule string
}

// noExtra is what Extra answers for a job without its extra part. Nothing
// may write to it: changes go through extraMut.
var noExtra JobExtra

// Extra returns the job's rarely-set fields, for reading (all zero for a
// job that has none). Change them only through the state machine.
func (j *Job) Extra() *JobExtra {
	if j.extra != nil {
		return j.extra
	}
	return &noExtra
}

// extraMut returns the job's rarely-set fields for a change, giving the
// job its own extra part first if it has none.
func (j *Job) extraMut() *JobExtra {
	if j.extra == nil {
		j.extra = &JobExtra{}
	}
	return j.extra
}

// isZero reports whether x holds nothing.
func (x *JobExtra) isZero() bool {
	return x.ConcurrencyKey == "" && x.ConcurrencyLimit == 0 && x.Rate == nil &&
		x.Requires == "" && x.ClaimCaps == "" && x.NotFor == nil && x.DependsOn == nil && x.DepsPending == 0 &&
		!x.RunOnDepFailure && x.LeaseSeconds == 0 && x.TaskClass == "" && x.ToolName == "" && x.Timeout == 0 &&
		x.ClonedFrom == "" && x.Route == nil && x.CancelRequestedAt == 0 && x.CancelReason == "" &&
		x.Progress == nil && x.ProgressAt == 0 && x.Checkpoint == nil && x.CheckpointAt == 0 &&
		x.Stdout == "" && x.Stderr == "" && x.Comments == nil && x.ResultSchema == "" && x.Schedule == ""
}

// compactExtra drops an extra part that holds nothing, so that a job
// whose rare fields were all cleared looks (and weighs) like one that
// never had them.
func (j *Job) compactExtra() {
	if j.extra != nil && j.extra.isZero() {
		j.extra = nil
	}
}

// Lease is the exclusive right of one claimant to work on a running job.
type Lease struct {
	// Owner is the role of the claimant (e.g. "left_claw").
	Owner string
	// WorkerID is the worker-contract identity of the claimant, if any.
	WorkerID  string
	AttemptID string
	// Token fences every later call of this attempt.
	Token     string
	ExpiresAt int64 // unix nanoseconds
}

// JobError is a structured failure reported by a worker.
type JobError struct {
	Code      string `json:"code,omitempty"`
	Message   string `json:"message"`
	Stack     string `json:"stack,omitempty"`
	Retryable bool   `json:"retryable"`
}

// Comment is a note attached to a job by head or a claw.
type Comment struct {
	At    int64
	Actor string
	Text  string
}

// Outcome is how an attempt ended.
type Outcome string

const (
	// OutcomeRunning: the attempt still holds the lease.
	OutcomeRunning Outcome = "running"
	// OutcomeCompleted: the attempt completed the job.
	OutcomeCompleted Outcome = "completed"
	// OutcomeFailed: the attempt reported a failure.
	OutcomeFailed Outcome = "failed"
	// OutcomeReleased: the attempt gave the job back.
	OutcomeReleased Outcome = "released"
	// OutcomeExpired: the lease ran out and the reaper took the job back.
	OutcomeExpired Outcome = "expired"
	// OutcomeCancelled: head overrode the attempt (e.g. redrive).
	OutcomeCancelled Outcome = "cancelled"
)

// Attempt records one claim of a job and how it ended. Its token is kept so
// a repeated complete or fail of a finished attempt can be recognised and
// answered the same way.
type Attempt struct {
	ID        string
	Owner     string
	WorkerID  string
	Token     string
	StartedAt int64
	// RunningAt is when the attempt was started (claimed → running, seed
	// 003's explicit start); 0 while it is only claimed.
	RunningAt int64
	EndedAt   int64
	Outcome   Outcome
	Error     *JobError
	// Requeued and DLQ record the answer given to the fail that ended it.
	Requeued bool
	DLQ      bool
	// ByHolder is true when the complete or fail that ended the attempt
	// carried its lease token. Only such an ending is answered again as a
	// duplicate; one made by a head override is not the worker's own.
	ByHolder bool
}

// Event is one entry of a job's replicated history. Its type and states
// are one-byte codes of their words (names.go): a job's history is most
// of what a finished job holds beyond its payload (TestEventSizes).
type Event struct {
	Seq       int32 // its place in the history, from 1
	Type      EventType
	From      StateCode
	To        StateCode
	At        int64
	Actor     string
	AttemptID string
	WorkerID  string
	Text      string
}

// TokenSep joins an event's actor and the named token of the call that
// caused it, in Event.Actor ("left_claw/w1@indexer-1"): no role, worker id
// or token name holds it, and the token kept in the interned actor string
// costs a job's history nothing (Who splits them).
const TokenSep = "@"

// Who is the event's actor and the named token of the call that caused
// it ("" for an environment token or the cluster itself).
func (e *Event) Who() (actor, token string) {
	actor, token, _ = strings.Cut(e.Actor, TokenSep)
	return actor, token
}

// Event types. The constants are their codes (names.go), in this order;
// String and MarshalText give their words ("created"…).
const (
	EventCreated EventType = iota + 1
	EventClaimed
	EventHeartbeat
	EventCompleted
	EventFailed
	EventReleased
	EventReaped
	EventDead
	EventComment
	EventRedriven
	EventRouted
	EventStarted
	// EventCancelRequested: head asked a running job's worker to stop;
	// EventCancelled: the job ended cancelled.
	EventCancelRequested
	EventCancelled
	// EventCompleteRefused is the event of a refused complete (contract.go).
	EventCompleteRefused
)

// eventWords are the event types' words, by code.
var eventWords = [...]string{EventCreated: "created", EventClaimed: "claimed", EventHeartbeat: "heartbeat",
	EventCompleted: "completed", EventFailed: "failed", EventReleased: "released", EventReaped: "reaped",
	EventDead: "dead", EventComment: "comment", EventRedriven: "redriven", EventRouted: "routed",
	EventStarted: "started", EventCancelRequested: "cancel_requested", EventCancelled: "cancelled",
	EventCompleteRefused: "complete_refused"}

// Blob is a replicated, content-addressed byte string. Its id is the hex
// SHA-256 of its content; its bytes are stored in chunks.
type Blob struct {
	ID          string
	Size        int64
	ContentType string
	Chunks      int
	CreatedAt   int64
}

// BlobChunk is one piece of a blob's content, replicated in its own entry
// so no log entry is large.
type BlobChunk struct {
	BlobID string
	Seq    int
	Data   []byte
}

// lease returns the lease length of j in nanoseconds given the cluster default.
func (j *Job) leaseNanos(def int64) int64 {
	if j.Extra().LeaseSeconds > 0 {
		return j.Extra().LeaseSeconds * 1e9
	}
	return def
}

// copyJob returns a shallow copy of j whose slices may be appended to
// without touching j's.
func copyJob(j *Job) *Job {
	c := *j
	if j.Lease != nil {
		l := *j.Lease
		c.Lease = &l
	}
	if j.extra != nil {
		x := *j.extra
		x.Comments = x.Comments[:len(x.Comments):len(x.Comments)]
		c.extra = &x
	}
	c.trail, c.sealed, c.sealedLen = j.copyTrail(), nil, 0
	return &c
}

// CancelRequested reports whether j runs with a cancel asked of it.
func (j *Job) CancelRequested() bool {
	return j.State == StateRunning && j.Extra().CancelRequestedAt != 0
}

// CurrentAttempt returns the attempt holding the lease, or nil.
func (j *Job) CurrentAttempt() *Attempt {
	if j.Lease == nil {
		return nil
	}
	at := j.AttemptLog()
	for i := len(at) - 1; i >= 0; i-- {
		if at[i].ID == j.Lease.AttemptID {
			return &at[i]
		}
	}
	return nil
}

// FindAttempt returns the attempt with the given id, or nil.
func (j *Job) FindAttempt(id string) *Attempt {
	at := j.AttemptLog()
	for i := len(at) - 1; i >= 0; i-- {
		if at[i].ID == id {
			return &at[i]
		}
	}
	return nil
}
