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
