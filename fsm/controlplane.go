package fsm

import "slices"

// The control plane's registry (seed 003): the gateways (agent runtimes)
// that execute tasks and the workers behind them. Spine never executes
// anything; it records who exists, what they can take and how healthy
// they are, so it can route work to them. Both catalogs are small and
// keyed by id.

// Health states of a gateway or worker. A registration starts healthy
// (the registrant has just spoken to the cluster).
const (
	HealthHealthy = "healthy"
	HealthSuspect = "suspect"
	HealthDead    = "dead"
)

// Gateway is a registered gateway: an agent runtime that executes tasks.
type Gateway struct {
	ID       string
	Address  string
	Metadata map[string]string
	// Capacity is how many tasks it runs at once.
	Capacity     int
	Health       string
	HealthAt     int64 // when Health last changed
	RegisteredAt int64
	UpdatedAt    int64
	CreateIndex  uint64
	// Delivery is how its routed tasks reach it: DeliveryPush, or pull
	// ("": its workers claim them). A push gateway's tasks are leased to
	// Role (a claw role) and POSTed to Address, signed with Secret
	// (dispatch.go). The secret is never shown in a view.
	Delivery string
	Role     string
	Secret   string
}

// Pushes reports whether routed tasks are delivered to g.
func (g *Gateway) Pushes() bool { return g.Delivery == DeliveryPush }

// Worker is a registered worker of a gateway.
type Worker struct {
	ID           string
	Gateway      string // the gateway's id
	Capabilities []string
	Metadata     map[string]string
	Capacity     int
	Health       string
	HealthAt     int64
	RegisteredAt int64
	UpdatedAt    int64
	CreateIndex  uint64
}

// HasCapabilities reports whether w has every capability in need.
func (w *Worker) HasCapabilities(need []string) bool {
	for _, c := range need {
		if !slices.Contains(w.Capabilities, c) {
			return false
		}
	}
	return true
}

func (t *tables) gateway(id string) *Gateway { return t.gateways.get(id) }
func (t *tables) worker(id string) *Worker   { return t.workers.get(id) }

// controlPlane reports whether the state holds a registry entry or a
// routed job (always queued or running: a finished job drops its route),
// which a snapshot needs version 4 for.
func (t *tables) controlPlane() bool {
	return t.gateways.len() > 0 || t.workers.len() > 0 || t.routed.Len() > 0
}

// gatewayJobs returns the routed jobs targeted at gateway that are queued
// or running.
func (t *tables) gatewayJobs(gateway string) []*Job {
	var out []*Job
	t.routed.AscendGreaterOrEqual(idOf(gateway+"\x00", nil), func(it idItem) bool {
		if gatewayOf(it.j) != gateway {
			return false
		}
		out = append(out, it.j)
		return true
	})
	return out
}

func (w *writer) putGateway(g *Gateway)   { putIn(w, tGateways, w.t.gateways, g.ID, g) }
func (w *writer) deleteGateway(id string) { deleteIn(w, tGateways, w.t.gateways, id) }
func (w *writer) putWorker(wk *Worker)    { putIn(w, tWorkers, w.t.workers, wk.ID, wk) }
func (w *writer) deleteWorker(id string)  { deleteIn(w, tWorkers, w.t.workers, id) }

// Gateways returns the registered gateways, by id.
func (r *Reader) Gateways() []*Gateway {
	var out []*Gateway
	r.point(func(t *tables) {
		t.gateways.ascend(func(g *Gateway) bool {
			out = append(out, g)
			return true
		})
	})
	return out
}

// Gateway returns the registered gateway id, or nil.
func (r *Reader) Gateway(id string) *Gateway {
	var g *Gateway
	r.point(func(t *tables) { g = t.gateway(id) })
	return g
}

// Workers returns the registered workers, by id; with a gateway, only its.
func (r *Reader) Workers(gateway string) []*Worker {
	var out []*Worker
	r.point(func(t *tables) {
		t.workers.ascend(func(w *Worker) bool {
			if gateway == "" || w.Gateway == gateway {
				out = append(out, w)
			}
			return true
		})
	})
	return out
}

// Worker returns the registered worker id, or nil.
func (r *Reader) Worker(id string) *Worker {
	var w *Worker
	r.point(func(t *tables) { w = t.worker(id) })
	return w
}
