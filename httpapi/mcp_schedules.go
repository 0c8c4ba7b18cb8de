package httpapi

import (
	"context"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/mcpserver"
)

// The schedule tools' operations (mcpserver.ScheduleBackend), under the
// route table's permissions of /v1/schedules.

var _ mcpserver.ScheduleBackend = (*mcpBackend)(nil)

func (b *mcpBackend) Schedules(ctx context.Context) ([]api.Schedule, error) {
	var out []api.Schedule
	err := b.run(ctx, b.read("GET /v1/schedules", "", func() error {
		list, err := b.s.queue.Schedules(b.caller.Actor(""))
		for i := range list {
			out = append(out, viewSchedule(&list[i]))
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.Schedules(ctx)
		return err
	}))
	return out, err
}

func (b *mcpBackend) Schedule(ctx context.Context, name string) (*api.Schedule, error) {
	var out *api.Schedule
	err := b.run(ctx, b.read("GET /v1/schedules/{name}", "", func() error {
		v, err := b.s.queue.Schedule(b.caller.Actor(""), name)
		if err == nil {
			sc := viewSchedule(v)
			out = &sc
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.Schedule(ctx, name)
		return err
	}))
	return out, err
}

func (b *mcpBackend) ScheduleCreate(ctx context.Context, req api.ScheduleRequest) (*api.Schedule, error) {
	var out *api.Schedule
	err := b.run(ctx, write("POST /v1/schedules", "", func(ctx context.Context) error {
		in, err := scheduleInput(b.caller, &req)
		if err != nil {
			return err
		}
		v, _, err := b.s.queue.CreateSchedule(ctx, in)
		if err == nil {
			sc := viewSchedule(v)
			out = &sc
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.ScheduleCreate(ctx, req)
		return err
	}))
	return out, err
}

func (b *mcpBackend) schedulePause(ctx context.Context, name string, pause bool) (*api.Schedule, error) {
	route, call := "POST /v1/schedules/{name}/resume", (*client.Client).ScheduleResume
	if pause {
		route, call = "POST /v1/schedules/{name}/pause", (*client.Client).SchedulePause
	}
	var out *api.Schedule
	err := b.run(ctx, write(route, "", func(ctx context.Context) error {
		v, _, err := b.s.queue.PauseSchedule(ctx, name, pause, b.caller.Actor(""))
		if err == nil {
			sc := viewSchedule(v)
			out = &sc
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = call(c, ctx, name)
		return err
	}))
	return out, err
}

func (b *mcpBackend) SchedulePause(ctx context.Context, name string) (*api.Schedule, error) {
	return b.schedulePause(ctx, name, true)
}

func (b *mcpBackend) ScheduleResume(ctx context.Context, name string) (*api.Schedule, error) {
	return b.schedulePause(ctx, name, false)
}

func (b *mcpBackend) ScheduleTrigger(ctx context.Context, name string) (*api.ScheduleTrigger, error) {
	var out *api.ScheduleTrigger
	err := b.run(ctx, write("POST /v1/schedules/{name}/trigger", "", func(ctx context.Context) error {
		v, j, _, err := b.s.queue.TriggerSchedule(ctx, name, b.caller.Actor(""))
		if err == nil {
			out = &api.ScheduleTrigger{Job: *viewJob(j), Schedule: viewSchedule(v)}
		}
		return err
	}, func(ctx context.Context, c *client.Client) (err error) {
		out, err = c.ScheduleTrigger(ctx, name)
		return err
	}))
	return out, err
}

func (b *mcpBackend) ScheduleDelete(ctx context.Context, name string) error {
	return b.run(ctx, write("DELETE /v1/schedules/{name}", "", func(ctx context.Context) error {
		_, err := b.s.queue.DeleteSchedule(ctx, name, b.caller.Actor(""))
		return err
	}, func(ctx context.Context, c *client.Client) error {
		return c.ScheduleDelete(ctx, name)
	}))
}
