package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
)

// ScheduleBackend is what head's schedule tools need of the cluster (the
// API's /v1/schedules). Both backends have it: the Go client and a node's
// /mcp.
type ScheduleBackend interface {
	Schedules(ctx context.Context) ([]api.Schedule, error)
	Schedule(ctx context.Context, name string) (*api.Schedule, error)
	ScheduleCreate(ctx context.Context, req api.ScheduleRequest) (*api.Schedule, error)
	SchedulePause(ctx context.Context, name string) (*api.Schedule, error)
	ScheduleResume(ctx context.Context, name string) (*api.Schedule, error)
	ScheduleTrigger(ctx context.Context, name string) (*api.ScheduleTrigger, error)
	ScheduleDelete(ctx context.Context, name string) error
}

var _ ScheduleBackend = (*client.Client)(nil)

// ScheduleView is a schedule as the tools show it.
type ScheduleView struct {
	Name          string            `json:"name"`
	Cron          string            `json:"cron,omitempty"`
	Timezone      string            `json:"timezone,omitempty"`
	Interval      int64             `json:"interval_seconds,omitempty"`
	Overlap       string            `json:"overlap"`
	Catchup       string            `json:"catchup"`
	CatchupWindow int64             `json:"catchup_window_seconds"`
	Paused        bool              `json:"paused"`
	Note          string            `json:"note,omitempty"`
	NextFireAt    time.Time         `json:"next_fire_at,omitzero"`
	LastFireAt    time.Time         `json:"last_fire_at,omitzero"`
	Runs          int64             `json:"runs"`
	Skipped       int64             `json:"skipped"`
	Recent        []ScheduleRunView `json:"recent"`
	Job           map[string]any    `json:"job"`
}

// ScheduleRunView is one run: its tick and the job it made.
type ScheduleRunView struct {
	Tick    time.Time `json:"tick"`
	JobID   string    `json:"job_id,omitempty"`
	Trigger bool      `json:"trigger,omitempty"`
	Error   string    `json:"error,omitempty"`
}

func scheduleView(s *api.Schedule) ScheduleView {
	var job map[string]any
	if raw, err := json.Marshal(s.Job); err == nil {
		_ = json.Unmarshal(raw, &job)
	}
	v := ScheduleView{Name: s.Name, Cron: s.Cron, Timezone: s.Timezone, Interval: s.IntervalSeconds, Overlap: s.Overlap, Catchup: s.Catchup,
		CatchupWindow: s.CatchupWindowSeconds, Paused: s.Paused, Note: s.Note, NextFireAt: s.NextFireAt, LastFireAt: s.LastFireAt,
		Runs: s.Runs, Skipped: s.Skipped, Recent: make([]ScheduleRunView, 0, len(s.Recent)), Job: job}
	for _, r := range s.Recent {
		v.Recent = append(v.Recent, ScheduleRunView{Tick: r.Tick, JobID: r.JobID, Trigger: r.Trigger, Error: r.Error})
	}
	return v
}

type listSchedulesOut struct {
	Schedules []ScheduleView `json:"schedules"`
}

type scheduleNameIn struct {
	Name string `json:"name" jsonschema:"the schedule's name"`
}

type createScheduleIn struct {
	Name          string         `json:"name" jsonschema:"the schedule's name: 1-128 letters, digits, '_', '.', ':' or '-'"`
	Cron          string         `json:"cron,omitempty" jsonschema:"a cron expression: [seconds] minutes hours day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly, @yearly (give cron or interval_seconds)"`
	Timezone      string         `json:"timezone,omitempty" jsonschema:"the cron expression's IANA time zone, e.g. Europe/Paris (default UTC)"`
	Interval      int64          `json:"interval_seconds,omitempty" range:"1,31622400" jsonschema:"fire every this many seconds (at multiples of it since 1970-01-01 UTC) instead of cron"`
	Overlap       string         `json:"overlap,omitempty" jsonschema:"while the previous run's job is unfinished: skip (default), queue (a job that waits for it) or allow (a job that may run alongside)"`
	Catchup       string         `json:"catchup,omitempty" jsonschema:"ticks missed while the cluster had no leader: none, latest (default) or all (within catchup_window_seconds)"`
	CatchupWindow int64          `json:"catchup_window_seconds,omitempty" range:"1,604800" jsonschema:"how far back catchup all reaches, in seconds (default 3600)"`
	Paused        bool           `json:"paused,omitempty" jsonschema:"create it paused"`
	Note          string         `json:"note,omitempty" jsonschema:"a note for the operators"`
	Job           map[string]any `json:"job" jsonschema:"the job every run creates, as POST /jobs takes it: payload (required), stream, priority, target, requires, maxAttempts, leaseSeconds, backoff, concurrencyKey..."`
}

type triggerScheduleOut struct {
	Job      JobView      `json:"job"`
	Schedule ScheduleView `json:"schedule"`
}

type deleteScheduleOut struct {
	Deleted string `json:"deleted"`
}

// addScheduleTools adds head's schedule tools, when the backend has them.
func (s *server) addScheduleTools(srv *mcp.Server) {
	b, ok := s.c.(ScheduleBackend)
	if !ok {
		return
	}
	addTool(s, srv, &mcp.Tool{
		Name:        "list_schedules",
		Title:       "List schedules",
		Description: "Every recurring schedule: its cron expression or interval, whether it is paused, its next and last fire times, and the jobs its latest runs made.",
		Annotations: readOnly("List schedules"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, listSchedulesOut, error) {
		list, err := b.Schedules(ctx)
		if err != nil {
			return nil, listSchedulesOut{}, s.advise(err, "list_schedules", "")
		}
		out := listSchedulesOut{Schedules: make([]ScheduleView, 0, len(list))}
		for i := range list {
			out.Schedules = append(out.Schedules, scheduleView(&list[i]))
		}
		return nil, out, nil
	})
	addTool(s, srv, &mcp.Tool{
		Name:        "get_schedule",
		Title:       "Show a schedule",
		Description: "One schedule, with its next and last fire times and the jobs its latest runs made (get_job shows each).",
		Annotations: readOnly("Show a schedule"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in scheduleNameIn) (*mcp.CallToolResult, ScheduleView, error) {
		sc, err := b.Schedule(ctx, in.Name)
		if err != nil {
			return nil, ScheduleView{}, s.advise(err, "get_schedule", "")
		}
		return nil, scheduleView(sc), nil
	})
	addTool(s, srv, &mcp.Tool{
		Name:  "create_schedule",
		Title: "Create a schedule",
		Description: "Create a recurring schedule: the job given is created at every tick of the cron expression (in its time zone) " +
			"or of the interval, by the cluster's leader, once per tick even across failovers. Overlap and catch-up policies say what " +
			"happens while a run is unfinished and after an outage.",
		Annotations: writes("Create a schedule", false, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in createScheduleIn) (*mcp.CallToolResult, ScheduleView, error) {
		if in.Job == nil {
			return nil, ScheduleView{}, errors.New("create_schedule: job is required: the job every run creates, with its payload")
		}
		raw, err := json.Marshal(in.Job)
		if err != nil {
			return nil, ScheduleView{}, fmt.Errorf("create_schedule: job: %v", err)
		}
		req := api.ScheduleRequest{Name: in.Name, Cron: in.Cron, Timezone: in.Timezone, IntervalSeconds: in.Interval, Overlap: in.Overlap,
			Catchup: in.Catchup, CatchupWindowSeconds: in.CatchupWindow, Paused: in.Paused, Note: in.Note}
		if err := json.Unmarshal(raw, &req.Job); err != nil {
			return nil, ScheduleView{}, fmt.Errorf("create_schedule refused: job: %v. Give the fields POST /jobs takes (payload, stream, priority, ...)", err)
		}
		sc, err := b.ScheduleCreate(ctx, req)
		if err != nil {
			return nil, ScheduleView{}, s.advise(err, "create_schedule", "")
		}
		return nil, scheduleView(sc), nil
	})
	for _, t := range []struct {
		name, title, desc string
		fn                func(ctx context.Context, name string) (*api.Schedule, error)
	}{
		{"pause_schedule", "Pause a schedule", "Pause a schedule: it fires no tick until resumed (trigger_schedule still makes a job).", b.SchedulePause},
		{"resume_schedule", "Resume a schedule", "Resume a paused schedule from its next tick; the ticks of the pause are not caught up.", b.ScheduleResume},
	} {
		addTool(s, srv, &mcp.Tool{Name: t.name, Title: t.title, Description: t.desc, Annotations: writes(t.title, true, false)},
			func(ctx context.Context, _ *mcp.CallToolRequest, in scheduleNameIn) (*mcp.CallToolResult, ScheduleView, error) {
				sc, err := t.fn(ctx, in.Name)
				if err != nil {
					return nil, ScheduleView{}, s.advise(err, t.name, "")
				}
				return nil, scheduleView(sc), nil
			})
	}
	addTool(s, srv, &mcp.Tool{
		Name:        "trigger_schedule",
		Title:       "Run a schedule now",
		Description: "Make one job of the schedule now, outside its ticks, paused or not. Each call makes a new job.",
		Annotations: writes("Run a schedule now", false, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in scheduleNameIn) (*mcp.CallToolResult, triggerScheduleOut, error) {
		tr, err := b.ScheduleTrigger(ctx, in.Name)
		if err != nil {
			return nil, triggerScheduleOut{}, s.advise(err, "trigger_schedule", "")
		}
		return nil, triggerScheduleOut{Job: jobView(&tr.Job), Schedule: scheduleView(&tr.Schedule)}, nil
	})
	addTool(s, srv, &mcp.Tool{
		Name:        "delete_schedule",
		Title:       "Delete a schedule",
		Description: "Delete a schedule: no more ticks; the jobs it made stay.",
		Annotations: writes("Delete a schedule", true, true),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in scheduleNameIn) (*mcp.CallToolResult, deleteScheduleOut, error) {
		if err := b.ScheduleDelete(ctx, in.Name); err != nil {
			return nil, deleteScheduleOut{}, s.advise(err, "delete_schedule", "")
		}
		return nil, deleteScheduleOut{Deleted: in.Name}, nil
	})
}
