package fsm

import (
	"fmt"
	"slices"
)

// WorkerRegisterCommand registers a worker under a registered gateway, or
// updates it when its id is registered already (gateway, capabilities,
// metadata and capacity are replaced; its registration time and health
// stay).
type WorkerRegisterCommand struct {
	Now          int64
	ID           string
	Gateway      string
	Capabilities []string
	Metadata     map[string]string
	Capacity     int
	Actor        Actor
}

// WorkerDeregisterCommand removes a worker.
type WorkerDeregisterCommand struct {
	Now   int64
	ID    string
	Actor Actor
}

func init() {
	register(CmdWorkerRegister, "worker-register", func() command { return new(WorkerRegisterCommand) })
	register(CmdWorkerDeregister, "worker-deregister", func() command { return new(WorkerDeregisterCommand) })
}

func (c *WorkerRegisterCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Gateway)
	e.strs(c.Capabilities)
	e.labels(c.Metadata)
	e.int(c.Capacity)
	e.actor(c.Actor)
}

func (c *WorkerRegisterCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Gateway = d.str()
	c.Capabilities = d.strs()
	c.Metadata = d.labels()
	c.Capacity = d.int()
	c.Actor = d.actor()
}

func (c *WorkerRegisterCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.str(3, &c.Gateway)
	f.strs(4, &c.Capabilities)
	f.labels(5, &c.Metadata)
	f.int(6, &c.Capacity)
	f.actor(7, &c.Actor)
}

func (c *WorkerRegisterCommand) apply(a *applier) *Result {
	if c.ID == "" || c.Gateway == "" || c.Capacity < 1 {
		return fail(fmt.Errorf("worker register: %w: id, gateway and a capacity of at least 1 are required", ErrInvalid))
	}
	if a.t.level >= LevelIdentity && !c.Actor.isHead() {
		// A claw registers a worker id as its own: one another role holds
		// is refused, and an unbound one becomes its role's.
		if err := a.t.admitWorker(Actor{Role: c.Actor.Role, WorkerID: c.ID}); err != nil {
			return fail(fmt.Errorf("worker register: %w", err))
		}
	}
	if a.t.gateway(c.Gateway) == nil {
		return fail(fmt.Errorf("worker %s: gateway %s: %w", c.ID, c.Gateway, ErrNotFound))
	}
	caps := slices.Clone(c.Capabilities)
	slices.Sort(caps)
	w := &Worker{ID: c.ID, Gateway: c.Gateway, Capabilities: slices.Compact(caps), Metadata: c.Metadata, Capacity: c.Capacity,
		Health: HealthHealthy, HealthAt: c.Now, RegisteredAt: c.Now, UpdatedAt: c.Now, CreateIndex: a.index}
	typ := FeedRegistered
	if old := a.t.worker(c.ID); old != nil {
		w.Health, w.HealthAt, w.RegisteredAt, w.CreateIndex = old.Health, old.HealthAt, old.RegisteredAt, old.CreateIndex
		typ = FeedUpdated
	}
	a.putWorker(w)
	a.useWorker(Actor{Role: c.Actor.Role, WorkerID: c.ID}, c.Now, true)
	a.emit(FeedEvent{At: c.Now, Kind: FeedWorker, ID: w.ID, Type: typ, Actor: a.in.actor(c.Actor), Text: "gateway " + w.Gateway})
	return &Result{Worker: w}
}

func (c *WorkerDeregisterCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.actor(c.Actor)
}

func (c *WorkerDeregisterCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Actor = d.actor()
}

func (c *WorkerDeregisterCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.actor(3, &c.Actor)
}

func (c *WorkerDeregisterCommand) apply(a *applier) *Result {
	w := a.t.worker(c.ID)
	if w == nil {
		return fail(fmt.Errorf("worker %s: %w", c.ID, ErrNotFound))
	}
	if a.t.level >= LevelIdentity && !a.t.mayChangeWorker(c.Actor, c.ID) {
		return fail(fmt.Errorf("worker %s: %w: only head or the role its id belongs to may remove it", c.ID, ErrNotAllowed))
	}
	a.deleteWorker(c.ID)
	a.emit(FeedEvent{At: c.Now, Kind: FeedWorker, ID: c.ID, Type: FeedDeregistered, Actor: a.in.actor(c.Actor)})
	return &Result{Worker: w}
}
