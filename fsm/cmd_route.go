package fsm

import (
	"fmt"
	"maps"
	"slices"
)

// RouteSpec is what a job asks of the gateway it is routed to: every
// label in Labels among the gateway's metadata, and, if Capabilities is
// set, a healthy worker of the gateway with all of them.
type RouteSpec struct {
	Capabilities []string
	Labels       map[string]string
	// Key, if set, is the dispatch's idempotency key: a route repeated with
	// it while the job is still routed answers the first route and changes
	// nothing.
	Key string

	// A push gateway's delivery (dispatch.go): when the current attempt was
	// leased to the gateway (0: it was not) and when the gateway accepted
	// it; and the gateways that refused the task, which it is not routed to
	// again (the newest MaxRefused). State the machine keeps, never a
	// route's request: unexported, so no command carries them.
	dispatchedAt, acceptedAt int64
	refused                  []string
}

// DispatchedAt is when the current attempt was leased to a push gateway
// (0: it was not).
func (s *RouteSpec) DispatchedAt() int64 { return s.dispatchedAt }

// AcceptedAt is when the push gateway accepted the current attempt (0:
// not yet, or not delivered).
func (s *RouteSpec) AcceptedAt() int64 { return s.acceptedAt }

// Refused lists the gateways that refused the task, oldest first.
func (s *RouteSpec) Refused() []string { return s.refused }

// hasDelivery reports whether s carries a delivery's marks (the optional
// tail of a job's snapshot record).
func (s *RouteSpec) hasDelivery() bool {
	return s.dispatchedAt != 0 || s.acceptedAt != 0 || len(s.refused) > 0
}

// RouteCommand routes a queued job to a gateway (seed 003's route_task):
// among the healthy gateways that meet the spec and have free capacity
// (fewer queued and running jobs routed to them than their capacity), the
// least loaded, the lowest id on a tie. The job's target becomes the
// gateway, so only its workers may claim it. With no such gateway nothing
// changes (ErrNoHealthyGateway). A routed job may be routed again.
type RouteCommand struct {
	Now   int64
	JobID string
	Spec  RouteSpec
	Actor Actor
}

func init() {
	register(CmdRoute, "route", func() command { return new(RouteCommand) })
}

func (c *RouteCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.JobID)
	e.strs(c.Spec.Capabilities)
	e.labels(c.Spec.Labels)
	e.actor(c.Actor)
	e.str(c.Spec.Key)
}

func (c *RouteCommand) decode(d *dec) {
	c.Now = d.varint()
	c.JobID = d.str()
	c.Spec.Capabilities = d.strs()
	c.Spec.Labels = d.labels()
	c.Actor = d.actor()
	c.Spec.Key = d.str()
}

func (c *RouteCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.JobID)
	f.strs(3, &c.Spec.Capabilities)
	f.labels(4, &c.Spec.Labels)
	f.actor(5, &c.Actor)
	f.str(6, &c.Spec.Key)
}

func (c *RouteCommand) apply(a *applier) *Result {
	old := a.t.job(c.JobID)
	if old == nil {
		return notFound(c.JobID)
	}
	if c.Spec.Key != "" && old.Extra().Route != nil && old.Extra().Route.Key == c.Spec.Key {
		// A repeated dispatch: the first one's answer, nothing changed.
		return &Result{Job: old, Gateway: a.t.gateway(gatewayOf(old)), Duplicate: true}
	}
	if old.State != StateQueued {
		return fail(refuse(ErrIllegalTransition, "route", old, "only a queued job can be routed"))
	}
	g := a.pickGateway(c.Spec, old, nil)
	if g == nil {
		return fail(fmt.Errorf("route job %s: %w with free capacity meets its requirements", c.JobID, ErrNoHealthyGateway))
	}
	spec := RouteSpec{Capabilities: slices.Clone(c.Spec.Capabilities), Labels: maps.Clone(c.Spec.Labels), Key: c.Spec.Key}
	slices.Sort(spec.Capabilities)
	spec.Capabilities = slices.Compact(spec.Capabilities)
	j := a.routeTo(old, g, spec, c.Now, a.in.actor(c.Actor), "routed to gateway "+g.ID)
	return &Result{Job: j, Gateway: g}
}

// routeTo targets old at gateway g; it keeps its place in line.
func (a *applier) routeTo(old *Job, g *Gateway, spec RouteSpec, now int64, actor, text string) *Job {
	j := copyJob(old)
	j.Target = IdentOf(a.t.gatewayTarget(g.ID))
	spec.dispatchedAt, spec.acceptedAt = 0, 0
	j.extraMut().Route = &spec
	j.addEvent(Event{At: now, Type: EventRouted, Actor: actor, From: j.State.Code(), To: j.State.Code(), Text: text})
	a.put(old, j, now)
	return j
}

// pickGateway chooses the gateway for a job (self: the job itself, which
// does not count against the gateway it is already routed to): healthy,
// meeting spec, with free capacity, not in skip; the least loaded, then
// the lowest id.
func (a *applier) pickGateway(spec RouteSpec, self *Job, skip []string) *Gateway {
	// The gateways with a healthy worker that has the capabilities, in one
	// pass over the workers.
	var capable map[string]bool
	if len(spec.Capabilities) > 0 {
		capable = map[string]bool{}
		a.t.workers.ascend(func(w *Worker) bool {
			if w.Health == HealthHealthy && w.HasCapabilities(spec.Capabilities) {
				capable[w.Gateway] = true
			}
			return true
		})
	}
	var best *Gateway
	bestLoad := 0
	a.t.gateways.ascend(func(g *Gateway) bool {
		if g.Health != HealthHealthy || slices.Contains(skip, g.ID) {
			return true
		}
		for k, v := range spec.Labels {
			if gv, ok := g.Metadata[k]; !ok || gv != v {
				return true
			}
		}
		if capable != nil && !capable[g.ID] {
			return true
		}
		load := 0
		for _, j := range a.t.gatewayJobs(g.ID) {
			if j.ID != self.ID {
				load++
			}
		}
		if load >= g.Capacity {
			return true
		}
		if best == nil || load < bestLoad { // ascending ids: the first of equals wins
			best, bestLoad = g, load
		}
		return true
	})
	return best
}

// rerouteFrom routes again the queued jobs routed to gateway id (dead, or
// gone), each with its own requirements; a job no other gateway can take
// stays where it is, and is routed again when a gateway turns healthy.
func (a *applier) rerouteFrom(id string, now int64, why string) []*Job {
	var out []*Job
	for _, old := range a.t.gatewayJobs(id) {
		if old.State != StateQueued {
			continue
		}
		if g := a.pickGateway(*old.Extra().Route, old, old.Extra().Route.refused); g != nil && g.ID != id {
			out = append(out, a.routeTo(old, g, *old.Extra().Route, now, "control-plane", "routed to gateway "+g.ID+": "+why))
		}
	}
	return out
}
