package httpapi

import (
	"context"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/fsm"
)

// The writes of a /mcp session's tools (mcpBackend): each runs its
// route's code on the leader, or sends the call there.

func (b *mcpBackend) JobCreate(ctx context.Context, p *api.JobCreateRequest) (*api.Job, error) {
	var out *api.Job
	err := b.run(ctx, write("POST /jobs", "", func(ctx context.Context) (err error) {
		out, _, err = b.s.createJob(ctx, b.caller, p)
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.JobCreate(ctx, p)
		return err
	}))
	return out, err
}

// jobWrite runs a write of job id whose answer is the job as it now is.
func (b *mcpBackend) jobWrite(ctx context.Context, route, id string, here func(ctx context.Context, actor fsm.Actor) (*fsm.Result, uint64, error),
	leader func(ctx context.Context, c *client.Client) (*api.Job, error)) (*api.Job, error) {
	var out *api.Job
	err := b.run(ctx, write(route, id, func(ctx context.Context) error {
		res, _, err := here(ctx, b.caller.Actor(""))
		if err == nil {
			out = viewJob(res.Job)
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = leader(ctx, c)
		return err
	}))
	return out, err
}

func (b *mcpBackend) JobComment(ctx context.Context, id, text string) (*api.Job, error) {
	return b.jobWrite(ctx, "POST /jobs/{id}/comment", id, func(ctx context.Context, actor fsm.Actor) (*fsm.Result, uint64, error) {
		return b.s.queue.Comment(ctx, id, actor, text)
	}, func(ctx context.Context, c *client.Client) (*api.Job, error) { return c.JobComment(ctx, id, text) })
}

func (b *mcpBackend) JobCancel(ctx context.Context, id, reason string) (*api.Job, error) {
	return b.jobWrite(ctx, "POST /jobs/{id}/cancel", id, func(ctx context.Context, actor fsm.Actor) (*fsm.Result, uint64, error) {
		return b.s.queue.Cancel(ctx, id, reason, actor)
	}, func(ctx context.Context, c *client.Client) (*api.Job, error) { return c.JobCancel(ctx, id, reason) })
}

func (b *mcpBackend) DLQRedrive(ctx context.Context, id string) (*api.Job, error) {
	return b.jobWrite(ctx, "POST /dlq/{id}/redrive", id, func(ctx context.Context, actor fsm.Actor) (*fsm.Result, uint64, error) {
		return b.s.queue.Redrive(ctx, id, actor)
	}, func(ctx context.Context, c *client.Client) (*api.Job, error) { return c.DLQRedrive(ctx, id) })
}

func (b *mcpBackend) TaskRequeue(ctx context.Context, id, stream string) (*api.Task, error) {
	var out *api.Task
	err := b.run(ctx, write("POST /api/tasks/{id}/requeue", id, func(ctx context.Context) error {
		j, _, err := b.s.queue.Requeue(ctx, id, stream, b.caller.Actor(""))
		if err == nil {
			out = viewTask(j, nil, b.s.queue.Now())
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.TaskRequeue(ctx, id, stream)
		return err
	}))
	return out, err
}

func (b *mcpBackend) WorkerClaim(ctx context.Context, p *client.WorkerClaimParams) (*api.WorkerClaim, error) {
	req := &api.WorkerClaimRequest{WorkerID: p.WorkerID, Streams: p.Streams, MaxWaitMS: p.MaxWait.Milliseconds(), MaxJobs: p.MaxJobs,
		Capabilities: p.Capabilities}
	var out *api.WorkerClaim
	err := b.run(ctx, write("POST /internal/worker/claim", "", func(ctx context.Context) (err error) {
		out, _, err = b.s.workerClaim(ctx, b.caller, req)
		return err
	}, func(ctx context.Context, c *client.Client) error {
		// This node stopping gracefully ends the wait, as it ends a
		// forwarded long poll: the caller is told nothing was claimed (a
		// claim the leader commits meanwhile is given back there).
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(b.s.draining, stop)()
		var err error
		out, err = c.WorkerClaim(wctx, p)
		if err != nil && b.s.draining.Err() != nil && ctx.Err() == nil {
			out, err = &api.WorkerClaim{Claimed: false}, nil
		}
		return err
	}))
	return out, err
}

func (b *mcpBackend) WorkerHeld(ctx context.Context, worker string) ([]api.WorkerClaim, error) {
	var out []api.WorkerClaim
	err := b.run(ctx, b.read("GET /internal/worker/held", "", func() error {
		h, err := b.s.workerHeld(b.caller, worker)
		if err == nil {
			out = h.Jobs
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.WorkerHeld(ctx, worker)
		return err
	}))
	return out, err
}

func (b *mcpBackend) WorkerHeartbeat(ctx context.Context, p *api.WorkerHeartbeatRequest) (*api.WorkerHeartbeatResult, error) {
	var out *api.WorkerHeartbeatResult
	o := write("POST /internal/worker/heartbeat", p.JobID, func(ctx context.Context) (err error) {
		// A follower answers a heartbeat on a fresh lease from its own
		// state, as the route does (queue.HeartbeatInput.Local).
		c := &call{caller: b.caller, role: b.role, local: !b.s.cluster.IsLeader()}
		out, _, err = b.s.workerHeartbeat(ctx, c, p)
		return b.workerRefusal(p.JobID, err)
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.WorkerHeartbeat(ctx, p)
		return err
	})
	o.tryHere = true
	return out, b.run(ctx, o)
}

func (b *mcpBackend) WorkerComplete(ctx context.Context, p *api.WorkerCompleteRequest) (*api.WorkerAck, error) {
	return b.workerEnd(ctx, "complete", p.JobID, func(ctx context.Context) (*api.WorkerAck, uint64, error) {
		return b.s.workerComplete(ctx, b.caller, p)
	}, func(ctx context.Context, c *client.Client) (*api.WorkerAck, error) { return c.WorkerComplete(ctx, p) })
}

func (b *mcpBackend) WorkerFail(ctx context.Context, p *api.WorkerFailRequest) (*api.WorkerAck, error) {
	return b.workerEnd(ctx, "fail", p.JobID, func(ctx context.Context) (*api.WorkerAck, uint64, error) {
		return b.s.workerFail(ctx, b.caller, p)
	}, func(ctx context.Context, c *client.Client) (*api.WorkerAck, error) { return c.WorkerFail(ctx, p) })
}

func (b *mcpBackend) WorkerRelease(ctx context.Context, p *api.WorkerReleaseRequest) (*api.WorkerAck, error) {
	return b.workerEnd(ctx, "release", p.JobID, func(ctx context.Context) (*api.WorkerAck, uint64, error) {
		return b.s.workerRelease(ctx, b.caller, p)
	}, func(ctx context.Context, c *client.Client) (*api.WorkerAck, error) { return c.WorkerRelease(ctx, p) })
}

// workerEnd runs the worker contract's complete, fail or release (verb)
// of job id.
func (b *mcpBackend) workerEnd(ctx context.Context, verb, id string, here func(ctx context.Context) (*api.WorkerAck, uint64, error),
	leader func(ctx context.Context, c *client.Client) (*api.WorkerAck, error)) (*api.WorkerAck, error) {
	var out *api.WorkerAck
	err := b.run(ctx, write("POST /internal/worker/"+verb, id, func(ctx context.Context) (err error) {
		out, _, err = here(ctx)
		return b.workerRefusal(id, err)
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = leader(ctx, c)
		return err
	}))
	return out, err
}

func (b *mcpBackend) TokenCreate(ctx context.Context, p *api.TokenCreateRequest) (*api.TokenCreated, error) {
	var out *api.TokenCreated
	err := b.run(ctx, write("POST /v1/tokens", "", func(ctx context.Context) error {
		created, _, err := b.s.createToken(b.req.WithContext(ctx), b.caller, p)
		out = created
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.TokenCreate(ctx, p)
		return err
	}))
	return out, err
}

func (b *mcpBackend) Tokens(ctx context.Context) ([]api.Token, error) {
	var out []api.Token
	err := b.run(ctx, b.read("GET /v1/tokens", "", func() error {
		now := b.s.queue.Now()
		out = []api.Token{}
		for _, tk := range b.s.queue.Tokens() {
			out = append(out, viewToken(tk, now))
		}
		return nil
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.Tokens(ctx)
		return err
	}))
	return out, err
}

func (b *mcpBackend) TokenRevoke(ctx context.Context, name string) (*api.Token, error) {
	var out *api.Token
	err := b.run(ctx, write("DELETE /v1/tokens/{name}", "", func(ctx context.Context) error {
		tk, _, err := b.s.queue.RevokeToken(ctx, name, b.caller.Actor(""))
		if err == nil {
			v := viewToken(tk, b.s.queue.Now())
			out = &v
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.TokenRevoke(ctx, name)
		return err
	}))
	return out, err
}
