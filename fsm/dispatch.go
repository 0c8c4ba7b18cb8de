package fsm

import (
	"fmt"
	"slices"
)

// Delivery of routed tasks to push gateways (seed 003: route_task
// "forwards the task" and the gateway executes it). From LevelDelivery on,
// the leader delivers each queued task routed to a push gateway in steps,
// each one entry, so a new leader carries on where the old one stopped:
//
//  1. DispatchLease leases the task to its gateway (a claim in the
//     gateway's role, no worker id), before anything is sent: the lease
//     token is the delivery's idempotency key and the gateway's credential
//     for the task's later steps (heartbeat, complete, fail).
//  2. The leader POSTs the task to the gateway's address, signed with its
//     secret, and retries until the accept deadline (queue/deliver.go).
//  3. DispatchAccepted records the gateway's yes: the attempt runs.
//     DispatchRefused records its no: the attempt is given back and the
//     task routed to another gateway that has not refused it.
//     DispatchUnreachable records that no answer came in time: the gateway
//     is suspect until it is heard from again, and its queued tasks, this
//     one too, are routed to the others.
//
// Afterwards the task is any running job: its lease runs out unless the
// gateway heartbeats it, and a gateway declared dead loses its leases at
// once (cmd_health.go).

// Gateway delivery modes.
const (
	DeliveryPush = "push"
	DeliveryPull = "pull"
)

// MaxRefused bounds a routed task's list of gateways that refused it.
const MaxRefused = 8

// DispatchStep is the step a DispatchCommand takes.
type DispatchStep uint8

// Dispatch steps.
const (
	DispatchLease DispatchStep = 1 + iota
	DispatchAccepted
	DispatchRefused
	DispatchUnreachable
)

// DispatchCommand takes one step of a task's delivery to Gateway. Every
// step but the lease names the lease it is about (JobID and LeaseToken):
// a step about a lease that has ended changes nothing.
type DispatchCommand struct {
	Now        int64
	Step       DispatchStep
	JobID      string
	Gateway    string
	AttemptID  string
	LeaseToken string
	// LeaseNanos is the cluster's default lease (a job's own wins).
	LeaseNanos int64
	// Reason is the gateway's answer (refused) or what went wrong
	// (unreachable).
	Reason string
}

func init() {
	register(CmdDispatch, "dispatch", func() command { return new(DispatchCommand) })
}

func (c *DispatchCommand) encode(e *enc) {
	e.varint(c.Now)
	e.byte1(byte(c.Step))
	e.str(c.JobID)
	e.str(c.Gateway)
	e.str(c.AttemptID)
	e.str(c.LeaseToken)
	e.varint(c.LeaseNanos)
	e.str(c.Reason)
}

func (c *DispatchCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Step = DispatchStep(d.byte1())
	c.JobID = d.str()
	c.Gateway = d.str()
	c.AttemptID = d.str()
	c.LeaseToken = d.str()
	c.LeaseNanos = d.varint()
	c.Reason = d.str()
}

func (c *DispatchCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.u8(2, (*uint8)(&c.Step))
	f.str(3, &c.JobID)
	f.str(4, &c.Gateway)
	f.str(5, &c.AttemptID)
	f.str(6, &c.LeaseToken)
	f.i64(7, &c.LeaseNanos)
	f.str(8, &c.Reason)
}

func (c *DispatchCommand) apply(a *applier) *Result {
	if a.t.level < LevelDelivery {
		return fail(fmt.Errorf("dispatch: %w: the cluster does not deliver tasks yet", ErrInvalid))
	}
	j := a.t.job(c.JobID)
	if j == nil {
		return notFound(c.JobID)
	}
	if gatewayOf(j) != c.Gateway || j.Extra().Route == nil {
		return &Result{Job: j, Err: refuse(ErrIllegalTransition, "dispatch", j, "it is not routed to gateway "+c.Gateway)}
	}
	if c.Step == DispatchLease {
		return a.dispatchLease(c, j)
	}
	if j.State != StateRunning || j.Lease == nil || j.Lease.Token != c.LeaseToken || j.Extra().Route.dispatchedAt == 0 {
		return &Result{Job: j, Err: refuse(ErrStaleLease, "dispatch", j, "that delivery's lease has ended")}
	}
	switch c.Step {
	case DispatchAccepted:
		if j.Extra().Route.acceptedAt != 0 {
			return &Result{Job: j, Duplicate: true}
		}
		nj := copyJob(j)
		route := *j.Extra().Route
		route.acceptedAt = c.Now
		nj.extraMut().Route = &route
		log := nj.trail.attempts // the copy's own (copyJob)
		if at := &log[len(log)-1]; at.RunningAt == 0 {
			at.RunningAt = c.Now // the gateway runs it: the task's "running"
		}
		nj.addEvent(Event{At: c.Now, Type: EventRouted, Actor: "control-plane", From: j.State.Code(), To: j.State.Code(),
			AttemptID: j.Lease.AttemptID, Text: "gateway " + c.Gateway + " accepted it"})
		a.put(j, nj, c.Now)
		return &Result{Job: nj}
	case DispatchRefused, DispatchUnreachable:
		if j.Extra().Route.acceptedAt != 0 {
			return &Result{Job: j, Err: refuse(ErrIllegalTransition, "dispatch", j, "gateway "+c.Gateway+" accepted it already")}
		}
		return a.dispatchFailed(c, j)
	}
	return fail(fmt.Errorf("dispatch: %w: unknown step %d", ErrInvalid, c.Step))
}

// dispatchLease leases queued task j to its push gateway, if it may be
// claimed now (claimRefusal) and the gateway is healthy.
func (a *applier) dispatchLease(c *DispatchCommand, j *Job) *Result {
	g := a.t.gateway(c.Gateway)
	if g == nil || !g.Pushes() || g.Health != HealthHealthy {
		return &Result{Job: j, Err: refuse(ErrNoHealthyGateway, "dispatch", j, "gateway "+c.Gateway+" is not a healthy push gateway")}
	}
	if err := a.claimRefusal(j); err != nil {
		return &Result{Job: j, Err: err}
	}
	if j.Attempts >= j.MaxAttempts {
		d := a.kill(j, c.Now, "control-plane", "dispatch with no attempts left")
		return &Result{Job: d, Err: refuse(ErrMaxAttempts, "dispatch", d, fmt.Sprintf("attempts %d of %d used; job is dead", d.Attempts, d.MaxAttempts))}
	}
	gr := grant{Now: c.Now, Actor: Actor{Role: g.Role}, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken, LeaseNanos: c.LeaseNanos}
	if err := gr.check(); err != nil {
		return fail(err)
	}
	nj := a.start(j, gr)
	// nj is this entry's own copy: the delivery's marks go on it before
	// anyone reads it.
	route := *j.Extra().Route
	route.dispatchedAt, route.acceptedAt = c.Now, 0
	nj.extraMut().Route = &route
	ev := nj.lastEvent()
	ev.Actor = "control-plane"
	ev.Text += ": delivered to gateway " + g.ID
	return &Result{Job: nj, Gateway: g, Claimed: true}
}

// dispatchFailed gives the attempt of a delivery the gateway did not
// accept back and routes the task on (cancelled instead, if head asked).
func (a *applier) dispatchFailed(c *DispatchCommand, j *Job) *Result {
	why := "gateway " + c.Gateway + " refused it"
	if c.Step == DispatchUnreachable {
		why = "gateway " + c.Gateway + " did not accept it in time"
	}
	if c.Reason != "" {
		why += ": " + c.Reason
	}
	res := a.releaseUntil(&ReleaseCommand{Now: c.Now, Ref: LeaseRef{JobID: j.ID, Token: c.LeaseToken}, Actor: Actor{Role: j.Lease.Owner}, Reason: why}, 0, false)
	if res.Err != nil || res.Job.State != StateQueued {
		return res
	}
	nj := res.Job
	route := *nj.Extra().Route
	route.dispatchedAt = 0
	if c.Step == DispatchRefused && !slices.Contains(route.refused, c.Gateway) {
		route.refused = append(slices.Clone(route.refused[max(0, len(route.refused)-MaxRefused+1):]), c.Gateway)
	}
	nj.extraMut().Route = &route
	out := &Result{Job: nj, Requeued: true}
	if c.Step == DispatchUnreachable {
		if g := a.t.gateway(c.Gateway); g != nil && g.Health == HealthHealthy {
			ng := *g
			ng.Health, ng.HealthAt = HealthSuspect, c.Now
			a.putGateway(&ng)
			a.emit(FeedEvent{At: c.Now, Kind: FeedGateway, ID: g.ID, Type: FeedHealth, Actor: "control-plane", From: g.Health, To: ng.Health, Text: why})
			out.Gateways = append(out.Gateways, &ng)
		}
		out.Jobs = a.rerouteFrom(c.Gateway, c.Now, "gateway "+c.Gateway+" did not accept a task in time")
	} else if ng := a.pickGateway(route, nj, route.refused); ng != nil {
		out.Jobs = []*Job{a.routeTo(nj, ng, route, c.Now, "control-plane", "routed to gateway "+ng.ID+": "+why)}
	}
	for _, r := range out.Jobs {
		if r.ID == nj.ID {
			out.Job = r
		}
	}
	return out
}

// expireDispatches ends the leases gateway id's deliveries hold (it was
// declared dead), as their running out would.
func (a *applier) expireDispatches(id string, now int64) []*Job {
	var out []*Job
	for _, j := range a.t.gatewayJobs(id) {
		if j.State == StateRunning && j.Lease != nil && j.Extra().Route != nil && j.Extra().Route.dispatchedAt != 0 {
			out = append(out, a.expireDead(j, now, "", id))
		}
	}
	return out
}

// Dispatching reports whether j is leased to its gateway by a delivery
// the gateway has not accepted yet.
func (j *Job) Dispatching() bool {
	r := j.Extra().Route
	return j.State == StateRunning && j.Lease != nil && r != nil && r.dispatchedAt != 0 && r.acceptedAt == 0
}

// PushJobs returns the queued and running tasks routed to push gateway id,
// in id order (what the leader's deliverer looks at).
func (r *Reader) PushJobs(id string) []*Job {
	var out []*Job
	r.point(func(t *tables) { out = t.gatewayJobs(id) })
	return out
}
