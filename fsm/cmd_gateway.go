package fsm

import (
	"fmt"
	"sort"
)

// GatewayRegisterCommand registers a gateway, or updates it when its id is
// registered already (its address, metadata and capacity are replaced; its
// registration time and health stay).
type GatewayRegisterCommand struct {
	Now      int64
	ID       string
	Address  string
	Metadata map[string]string
	Capacity int
	Actor    Actor
	// The optional tail (from LevelDelivery): how routed tasks reach the
	// gateway. An update without a Delivery keeps the gateway's delivery
	// and role, one without a Secret its secret.
	Delivery string
	Role     string
	Secret   string
}

// GatewayDeregisterCommand removes a gateway and the workers registered
// under it.
type GatewayDeregisterCommand struct {
	Now   int64
	ID    string
	Actor Actor
}

func init() {
	register(CmdGatewayRegister, "gateway-register", func() command { return new(GatewayRegisterCommand) })
	register(CmdGatewayDeregister, "gateway-deregister", func() command { return new(GatewayDeregisterCommand) })
}

func (c *GatewayRegisterCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Address)
	e.labels(c.Metadata)
	e.int(c.Capacity)
	e.actor(c.Actor)
	if c.Delivery != "" || c.Role != "" || c.Secret != "" {
		e.str(c.Delivery)
		e.str(c.Role)
		e.str(c.Secret)
	}
}

func (c *GatewayRegisterCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Address = d.str()
	c.Metadata = d.labels()
	c.Capacity = d.int()
	c.Actor = d.actor()
	if d.more() {
		c.Delivery, c.Role, c.Secret = d.istr(), d.istr(), d.str()
	}
}

func (c *GatewayRegisterCommand) apply(a *applier) *Result {
	if c.ID == "" || c.Address == "" || c.Capacity < 1 {
		return fail(fmt.Errorf("gateway register: %w: id, address and a capacity of at least 1 are required", ErrInvalid))
	}
	if a.t.level >= LevelIdentity && !c.Actor.isHead() {
		return fail(fmt.Errorf("gateway register: %w: only head registers gateways", ErrNotAllowed))
	}
	if err := c.checkDelivery(a.t.level); err != nil {
		return fail(err)
	}
	g := &Gateway{ID: c.ID, Address: c.Address, Metadata: c.Metadata, Capacity: c.Capacity,
		Health: HealthHealthy, HealthAt: c.Now, RegisteredAt: c.Now, UpdatedAt: c.Now, CreateIndex: a.index,
		Delivery: c.Delivery, Role: c.Role, Secret: c.Secret}
	typ := FeedRegistered
	if old := a.t.gateway(c.ID); old != nil {
		g.Health, g.HealthAt, g.RegisteredAt, g.CreateIndex = old.Health, old.HealthAt, old.RegisteredAt, old.CreateIndex
		if c.Delivery == "" {
			// An update that does not say how tasks reach it keeps how.
			g.Delivery, g.Role = old.Delivery, old.Role
		}
		if g.Secret == "" {
			g.Secret = old.Secret
		}
		typ = FeedUpdated
	}
	if g.Pushes() && g.Secret == "" {
		return fail(fmt.Errorf("gateway register: %w: a push gateway needs a signing secret", ErrInvalid))
	}
	a.putGateway(g)
	a.emit(FeedEvent{At: c.Now, Kind: FeedGateway, ID: g.ID, Type: typ, Actor: a.in.actor(c.Actor), Text: g.Address})
	res := &Result{Gateway: g}
	if g.Health == HealthHealthy {
		// A healthy gateway (new, or with more room now) takes the jobs left
		// on gateways that are not.
		res.Jobs = a.rerouteOrphans(c.Now)
	}
	return res
}

func (c *GatewayDeregisterCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.actor(c.Actor)
}

func (c *GatewayDeregisterCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Actor = d.actor()
}

func (c *GatewayDeregisterCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.actor(3, &c.Actor)
}

// apply removes the gateway and its workers (answered in Workers).
func (c *GatewayDeregisterCommand) apply(a *applier) *Result {
	g := a.t.gateway(c.ID)
	if g == nil {
		return fail(fmt.Errorf("gateway %s: %w", c.ID, ErrNotFound))
	}
	if a.t.level >= LevelIdentity && !c.Actor.isHead() {
		return fail(fmt.Errorf("gateway %s: %w: only head removes gateways", c.ID, ErrNotAllowed))
	}
	var gone []*Worker
	a.t.workers.ascend(func(w *Worker) bool {
		if w.Gateway == c.ID {
			gone = append(gone, w)
		}
		return true
	})
	actor := a.in.actor(c.Actor)
	for _, w := range gone {
		a.deleteWorker(w.ID)
		a.emit(FeedEvent{At: c.Now, Kind: FeedWorker, ID: w.ID, Type: FeedDeregistered, Actor: actor, Text: "gateway " + c.ID + " was deregistered"})
	}
	a.deleteGateway(c.ID)
	a.emit(FeedEvent{At: c.Now, Kind: FeedGateway, ID: c.ID, Type: FeedDeregistered, Actor: actor})
	if a.t.level >= LevelDelivery {
		// A delivery it has not accepted yet will not be: the task goes
		// back, to be routed on with the gateway's queued ones.
		for _, j := range a.t.gatewayJobs(c.ID) {
			if j.Dispatching() {
				a.releaseUntil(&ReleaseCommand{Now: c.Now, Ref: LeaseRef{JobID: j.ID, Token: j.Lease.Token}, Actor: Actor{Role: j.Lease.Owner},
					Reason: "gateway " + c.ID + " was deregistered before it accepted it"}, 0, false)
			}
		}
	}
	// Its queued routed jobs go to another gateway (those none can take
	// wait for one to turn healthy).
	return &Result{Gateway: g, Workers: gone, Jobs: a.rerouteFrom(c.ID, c.Now, "gateway "+c.ID+" was deregistered")}
}

// labels encodes a string map in key order, so equal maps encode equally.
func (e *enc) labels(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

func (d *dec) labels() map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := d.str()
		m[k] = d.str()
	}
	return m
}

// checkDelivery checks the delivery fields: none before LevelDelivery; a
// push gateway's tasks are leased to a claw role.
func (c *GatewayRegisterCommand) checkDelivery(level int) error {
	switch {
	case c.Delivery == "" && c.Role == "" && c.Secret == "":
		return nil
	case level < LevelDelivery:
		return fmt.Errorf("gateway register: %w: the cluster does not deliver tasks yet", ErrInvalid)
	case c.Delivery == DeliveryPull:
		if c.Role != "" {
			return fmt.Errorf("gateway register: %w: a role is for a push gateway's deliveries", ErrInvalid)
		}
		return nil
	case c.Delivery != DeliveryPush:
		return fmt.Errorf("gateway register: %w: delivery must be push or pull", ErrInvalid)
	case !IsClaw(c.Role):
		return fmt.Errorf("gateway register: %w: a push gateway's role must be %s or %s", ErrInvalid, RoleLeftClaw, RoleRightClaw)
	}
	return nil
}
