package api

import "time"

// The control plane's registry (/v1/gateways, /v1/workers,
// docs/controlplane.md): gateways are agent runtimes that execute tasks,
// workers run behind a gateway. Spine records them and routes work to
// them; it never executes anything itself.

// Health states of a gateway or worker.
const (
	HealthHealthy = "healthy"
	HealthSuspect = "suspect"
	HealthDead    = "dead"
)

// Gateway is a registered gateway.
type Gateway struct {
	ID       string            `json:"id"`
	Address  string            `json:"address"`
	Metadata map[string]string `json:"metadata"`
	// Capacity is how many tasks it runs at once.
	Capacity       int       `json:"capacity"`
	Health         string    `json:"health"`
	HealthSince    time.Time `json:"health_since"`
	RegisteredAt   time.Time `json:"registered_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Workers        []string  `json:"workers"` // the ids of its workers
	WorkerCapacity int       `json:"worker_capacity"`
	// LastSeen is the last heartbeat any node heard, as gossip has told the
	// node that answers (absent: none since the nodes started).
	LastSeen time.Time `json:"last_seen,omitzero"`
	// Delivery is how routed tasks reach it: "push" (POSTed to Address,
	// leased to Role) or "pull" (its workers claim them).
	Delivery string `json:"delivery"`
	Role     string `json:"role,omitempty"`
	// Secret, the key deliveries are signed with, is only in the answer to
	// the registration that set it.
	Secret string `json:"secret,omitempty"`
}

// TaskDelivery is the body Spine POSTs to a push gateway's address for
// each routed task (docs/controlplane.md, "Delivery"). The gateway
// answers 2xx to accept it, 4xx to refuse it; IdempotencyKey is the same
// on every retry of one delivery.
type TaskDelivery struct {
	TaskID         string `json:"task_id"`
	IdempotencyKey string `json:"idempotency_key"`
	// RouteKey is the route's own idempotency key, if it had one.
	RouteKey string `json:"route_key,omitempty"`
	Gateway  string `json:"gateway"`
	// Role is the claw role the task is leased to: the gateway calls back
	// with that role's token and Task.LeaseToken.
	Role string       `json:"role"`
	Task *ControlTask `json:"task"`
	// Nodes are the cluster's nodes' HTTP addresses, to call back.
	Nodes []string `json:"nodes"`
}

// Worker is a registered worker of a gateway.
type Worker struct {
	ID           string            `json:"id"`
	Gateway      string            `json:"gateway"`
	Capabilities []string          `json:"capabilities"`
	Metadata     map[string]string `json:"metadata"`
	Capacity     int               `json:"capacity"`
	Health       string            `json:"health"`
	HealthSince  time.Time         `json:"health_since"`
	RegisteredAt time.Time         `json:"registered_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	LastSeen     time.Time         `json:"last_seen,omitzero"`
}

// HeartbeatAnswer is the answer of POST /v1/gateways/{id}/heartbeat and
// /v1/workers/{id}/heartbeat: the committed health (a heartbeat brings a
// suspect or dead one back to healthy within a second) and when this
// heartbeat was recorded.
type HeartbeatAnswer struct {
	ID       string    `json:"id"`
	Health   string    `json:"health"`
	LastSeen time.Time `json:"last_seen"`
}

// GatewayRegisterRequest is the body of POST /v1/gateways: a new id
// registers, a known one is updated (201 and 200).
type GatewayRegisterRequest struct {
	ID       string            `json:"id"`
	Address  string            `json:"address"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Capacity int               `json:"capacity"`
	// Delivery is "push" or "pull" (the default for a new gateway; an
	// update without it keeps the gateway's). A push gateway's tasks are
	// leased to Role (left_claw or right_claw) and signed with Secret
	// (16 to 256 bytes; generated, and answered once, when a push
	// gateway has none).
	Delivery string `json:"delivery,omitempty"`
	Role     string `json:"role,omitempty"`
	Secret   string `json:"secret,omitempty"`
}

// WorkerRegisterRequest is the body of POST /v1/workers: a new id
// registers, a known one is updated (201 and 200).
type WorkerRegisterRequest struct {
	ID           string            `json:"id"`
	Gateway      string            `json:"gateway"`
	Capabilities []string          `json:"capabilities,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Capacity     int               `json:"capacity"`
}

// GatewayList is the answer of GET /v1/gateways.
type GatewayList struct {
	Gateways []*Gateway `json:"gateways"`
}

// WorkerList is the answer of GET /v1/workers.
type WorkerList struct {
	Workers []*Worker `json:"workers"`
}

// GatewayDeregistered is the answer of DELETE /v1/gateways/{id}: the
// gateway as it was, and the workers removed with it.
type GatewayDeregistered struct {
	Gateway *Gateway  `json:"gateway"`
	Workers []*Worker `json:"workers"`
}

// SystemState is the answer of GET /v1/state: the cluster, the registry,
// who works on what, and the queues, from the answering node's view.
type SystemState struct {
	NodeID   string         `json:"node_id"`
	Leader   ClusterLeader  `json:"leader"`
	Term     uint64         `json:"term"`
	Index    uint64         `json:"applied_index"`
	Nodes    []*ClusterNode `json:"nodes"`
	Gateways []*Gateway     `json:"gateways"`
	Agents   []*Agent       `json:"agents"`
	Queues   []*QueueDepth  `json:"queues"`
	// Jobs counts every job by status (queued, running, done, failed, dead).
	Jobs map[string]int `json:"jobs"`
	// Events is the event feed (GET /v1/events) as this node holds it.
	Events EventFeedState `json:"events"`
}

// EventFeedState says whether the event feed records yet (the leader turns
// it on once every node runs a version that has it) and which events it
// holds: seqs Oldest to Latest (0 when none).
type EventFeedState struct {
	On     bool   `json:"on"`
	Oldest uint64 `json:"oldest"`
	Latest uint64 `json:"latest"`
}

// QueueDepth is one stream's queue in the system state.
type QueueDepth struct {
	Stream  string `json:"stream"`
	Queued  int    `json:"queued"`
	Running int    `json:"running"`
	// OldestQueuedSeconds is how long the longest-waiting queued job has
	// waited since it was last queued (0 when none is).
	OldestQueuedSeconds float64 `json:"oldest_queued_seconds"`
	// Paused: an operator paused the stream; claims skip it (a paused
	// stream is listed even with no jobs).
	Paused bool `json:"paused"`
	// Unmatched: queued jobs no live worker can take, per requirement set
	// (as in GET /streams).
	Unmatched []UnmatchedJobs `json:"unmatched,omitempty"`
	// RateLimited counts the queued jobs their key's rate holds back now
	// (as GET /streams' rateLimited; counted in Queued).
	RateLimited int `json:"rate_limited,omitempty"`
}

// Agent is a claimant in GET /v1/agents and the system state: a registered
// worker (Worker set) or any worker id holding a lease, with the jobs it
// runs.
type Agent struct {
	ID         string      `json:"id"`
	Registered bool        `json:"registered"`
	Gateway    string      `json:"gateway,omitempty"`
	Health     string      `json:"health,omitempty"` // registered workers only
	Capacity   int         `json:"capacity,omitempty"`
	Tasks      []AgentTask `json:"tasks"`
}

// AgentTask is a job an agent runs.
type AgentTask struct {
	JobID          string    `json:"job_id"`
	Stream         string    `json:"stream"`
	Attempt        int       `json:"attempt"`
	StartedAt      time.Time `json:"started_at"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
}

// AgentList is the answer of GET /v1/agents.
type AgentList struct {
	Agents []*Agent `json:"agents"`
}

// RouteRequest is the body of POST /v1/tasks/route: route a queued job to
// a gateway.
type RouteRequest struct {
	JobID string `json:"job_id"`
	// Capabilities, if set: the gateway must have a healthy worker with all
	// of them. Labels: each must be among the gateway's metadata.
	Capabilities []string          `json:"capabilities,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// IdempotencyKey (at most 256 bytes; seed 003 dispatches its claim
	// token): repeated with it while the job is still routed, the route
	// answers the first route again and changes nothing.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// RouteAnswer is the answer of POST /v1/tasks/route: the job, now targeted
// at the gateway, and the gateway (null only for a repeated dispatch whose
// gateway has left since, with no other able to take the job).
type RouteAnswer struct {
	Job     *Job     `json:"job"`
	Gateway *Gateway `json:"gateway"`
}
