package fsm

import (
	"fmt"
	"slices"
)

// HealthSetCommand commits changes of health the leader derived from the
// gossiped heartbeats of gateways and workers (queue.Service's health
// monitor). Only changes are written: a heartbeat itself never is. An
// entry whose gateway or worker is gone, or already has that health,
// changes nothing. A worker declared dead (itself, or its gateway) loses
// its leases at once.
type HealthSetCommand struct {
	Now     int64
	Changes []HealthChange
}

// HealthChange sets the health of one gateway (Gateway true) or worker.
type HealthChange struct {
	Gateway bool
	ID      string
	Health  string
}

func init() {
	register(CmdHealthSet, "health-set", func() command { return new(HealthSetCommand) })
}

func (c *HealthSetCommand) encode(e *enc) {
	e.varint(c.Now)
	e.uvarint(uint64(len(c.Changes)))
	for _, ch := range c.Changes {
		e.bool(ch.Gateway)
		e.str(ch.ID)
		e.str(ch.Health)
	}
}

func (c *HealthSetCommand) decode(d *dec) {
	c.Now = d.varint()
	n := d.count(3)
	if n > 0 {
		c.Changes = make([]HealthChange, n)
	}
	for i := range c.Changes {
		c.Changes[i] = HealthChange{Gateway: d.bool(), ID: d.str(), Health: d.istr()}
	}
}

// apply answers the changed gateways and workers, as they now are, and in
// Jobs the running jobs whose leases a death ended (a dead worker's, or the
// workers' of a dead gateway: leases naming them as worker id). A change
// to an unknown health refuses the whole command.
func (c *HealthSetCommand) apply(a *applier) *Result {
	for _, ch := range c.Changes {
		switch ch.Health {
		case HealthHealthy, HealthSuspect, HealthDead:
		default:
			return fail(fmt.Errorf("health set: %w: unknown health %q", ErrInvalid, ch.Health))
		}
	}
	res := &Result{}
	// dead: the workers whose leases end now, each with the gateway whose
	// death ended them ("" for the worker's own death, which wins).
	dead := map[string]string{}
	var deadGateways []string
	revived := false
	for _, ch := range c.Changes {
		if ch.Gateway {
			if old := a.t.gateway(ch.ID); old != nil && old.Health != ch.Health {
				g := *old
				g.Health, g.HealthAt = ch.Health, c.Now
				a.putGateway(&g)
				a.emit(FeedEvent{At: c.Now, Kind: FeedGateway, ID: g.ID, Type: FeedHealth, Actor: "health", From: old.Health, To: g.Health})
				res.Gateways = append(res.Gateways, &g)
				revived = revived || g.Health == HealthHealthy
				if g.Health == HealthDead {
					deadGateways = append(deadGateways, g.ID)
					a.t.workers.ascend(func(w *Worker) bool {
						if _, ok := dead[w.ID]; w.Gateway == g.ID && !ok {
							dead[w.ID] = g.ID
						}
						return true
					})
				}
			}
			continue
		}
		if old := a.t.worker(ch.ID); old != nil && old.Health != ch.Health {
			w := *old
			w.Health, w.HealthAt = ch.Health, c.Now
			a.putWorker(&w)
			a.emit(FeedEvent{At: c.Now, Kind: FeedWorker, ID: w.ID, Type: FeedHealth, Actor: "health", From: old.Health, To: w.Health})
			res.Workers = append(res.Workers, &w)
			if w.Health == HealthDead {
				dead[w.ID] = ""
			}
		}
	}
	if len(dead) > 0 {
		// A dead worker's leases end now, not when they run out: its jobs
		// go back (or die, or fail, as an expiry does). Collect first: the
		// lease index changes as they are written.
		var gone []*Job
		a.t.lease.Ascend(func(it timeItem) bool {
			if it.j.Lease != nil {
				if _, ok := dead[it.j.Lease.WorkerID]; ok {
					gone = append(gone, it.j)
				}
			}
			return true
		})
		for _, j := range gone {
			res.Jobs = append(res.Jobs, a.expireDead(j, c.Now, j.Lease.WorkerID, dead[j.Lease.WorkerID]))
		}
	}
	// A dead gateway's queued jobs go to another; a gateway back to health
	// takes the jobs left on gateways that are not.
	for _, id := range deadGateways {
		if a.t.level >= LevelDelivery {
			// The tasks delivered to it are lost with it: their leases end
			// now, and they are routed on with its queued ones.
			res.Jobs = append(res.Jobs, a.expireDispatches(id, c.Now)...)
		}
		res.Jobs = append(res.Jobs, a.rerouteFrom(id, c.Now, "gateway "+id+" is dead")...)
	}
	if revived {
		res.Jobs = append(res.Jobs, a.rerouteOrphans(c.Now)...)
	}
	return res
}

// rerouteOrphans routes again the queued routed jobs whose gateway is not
// healthy (or gone), as far as healthy gateways can take them.
func (a *applier) rerouteOrphans(now int64) []*Job {
	var targets []string
	a.t.routed.Ascend(func(it idItem) bool {
		if id := gatewayOf(it.j); !slices.Contains(targets, id) {
			if g := a.t.gateway(id); g == nil || g.Health != HealthHealthy {
				targets = append(targets, id)
			}
		}
		return true
	})
	var out []*Job
	for _, id := range targets {
		out = append(out, a.rerouteFrom(id, now, "gateway "+id+" is not healthy")...)
	}
	return out
}
