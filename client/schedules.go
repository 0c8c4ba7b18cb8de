package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/spine-queue/spine/api"
)

type (
	// ScheduleRequest is a schedule's definition: a job template and a
	// cron expression or an interval (POST and PUT /v1/schedules).
	ScheduleRequest = api.ScheduleRequest
	// Schedule is a recurring schedule, with its next and last fire times
	// and its recent runs.
	Schedule = api.Schedule
	// ScheduleRun is one run of a schedule.
	ScheduleRun = api.ScheduleRun
	// ScheduleTrigger is a trigger's answer: the job made and the schedule.
	ScheduleTrigger = api.ScheduleTrigger
)

func schedulePath(name, verb string) string {
	p := "/v1/schedules"
	if name != "" {
		p += "/" + url.PathEscape(name)
	}
	if verb != "" {
		p += "/" + verb
	}
	return p
}

// Schedules lists every schedule, by name (head).
func (c *Client) Schedules(ctx context.Context) ([]Schedule, error) {
	var out api.ScheduleList
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: schedulePath("", "")}, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// Schedule returns one schedule (head).
func (c *Client) Schedule(ctx context.Context, name string) (*Schedule, error) {
	var s Schedule
	if _, _, err := c.call(ctx, &request{method: http.MethodGet, path: schedulePath(name, "")}, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// ScheduleCreate creates a schedule (head); a name in use is refused
// (already_exists).
func (c *Client) ScheduleCreate(ctx context.Context, req ScheduleRequest) (*Schedule, error) {
	return c.scheduleWrite(ctx, http.MethodPost, "", "", &req)
}

// ScheduleReplace replaces a schedule's definition (head), keeping its
// runs and last tick.
func (c *Client) ScheduleReplace(ctx context.Context, name string, req ScheduleRequest) (*Schedule, error) {
	return c.scheduleWrite(ctx, http.MethodPut, name, "", &req)
}

// SchedulePause pauses a schedule (head): it fires no tick until resumed.
func (c *Client) SchedulePause(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleWrite(ctx, http.MethodPost, name, "pause", nil)
}

// ScheduleResume resumes a schedule (head) from its next tick; the ticks
// of the pause are not caught up.
func (c *Client) ScheduleResume(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleWrite(ctx, http.MethodPost, name, "resume", nil)
}

// ScheduleTrigger makes one job of the schedule now (head), paused or not.
func (c *Client) ScheduleTrigger(ctx context.Context, name string) (*ScheduleTrigger, error) {
	req, err := jsonRequest(http.MethodPost, schedulePath(name, "trigger"), nil)
	if err != nil {
		return nil, err
	}
	req.write = true
	var out ScheduleTrigger
	if _, _, err := c.call(ctx, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleDelete deletes a schedule (head); the jobs it made stay.
func (c *Client) ScheduleDelete(ctx context.Context, name string) error {
	req, err := jsonRequest(http.MethodDelete, schedulePath(name, ""), nil)
	if err != nil {
		return err
	}
	req.write = true
	_, _, err = c.call(ctx, req, nil)
	return err
}

func (c *Client) scheduleWrite(ctx context.Context, method, name, verb string, body any) (*Schedule, error) {
	req, err := jsonRequest(method, schedulePath(name, verb), body)
	if err != nil {
		return nil, err
	}
	req.write = true
	var s Schedule
	if _, _, err := c.call(ctx, req, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
