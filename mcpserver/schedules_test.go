package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/spine-queue/spine/mcpserver"
)

// Head's schedule tools: create, read, pause, trigger, resume and delete
// a schedule; a bad one is refused saying what is wrong.
func TestScheduleTools(t *testing.T) {
	url := startAPI(t)
	cs := session(t, url, headTok)
	var sc mcpserver.ScheduleView
	call(t, cs, "create_schedule", map[string]any{"name": "hourly", "cron": "@hourly", "timezone": "Asia/Tokyo", "overlap": "queue",
		"job": map[string]any{"stream": "reports", "payload": map[string]any{"k": 1}, "priority": 2}}, &sc)
	if sc.Name != "hourly" || sc.NextFireAt.IsZero() || sc.Overlap != "queue" || sc.Job["stream"] != "reports" {
		t.Fatalf("created: %+v", sc)
	}
	if msg := callErr(t, cs, "create_schedule", map[string]any{"name": "bad", "cron": "61 * * * *", "job": map[string]any{"payload": 1}}); !strings.Contains(msg, "cron") {
		t.Fatalf("bad cron: %s", msg)
	}
	if msg := callErr(t, cs, "create_schedule", map[string]any{"name": "bad", "interval_seconds": 60, "job": map[string]any{"payload": 1, "colour": "red"}}); !strings.Contains(msg, "colour") {
		t.Fatalf("unknown job field: %s", msg)
	}
	var list struct {
		Schedules []mcpserver.ScheduleView `json:"schedules"`
	}
	call(t, cs, "list_schedules", nil, &list)
	if len(list.Schedules) != 1 {
		t.Fatalf("list: %+v", list)
	}
	call(t, cs, "pause_schedule", map[string]any{"name": "hourly"}, &sc)
	if !sc.Paused {
		t.Fatal("not paused")
	}
	var tr struct {
		Job      map[string]any         `json:"job"`
		Schedule mcpserver.ScheduleView `json:"schedule"`
	}
	call(t, cs, "trigger_schedule", map[string]any{"name": "hourly"}, &tr)
	if len(tr.Schedule.Recent) != 1 || tr.Schedule.Recent[0].JobID == "" {
		t.Fatalf("trigger: %+v", tr)
	}
	var jobs struct {
		Jobs []map[string]any `json:"jobs"`
	}
	call(t, cs, "list_jobs", map[string]any{"schedule": "hourly"}, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0]["id"] != tr.Schedule.Recent[0].JobID {
		t.Fatalf("list_jobs of the schedule: %+v", jobs)
	}
	call(t, cs, "resume_schedule", map[string]any{"name": "hourly"}, &sc)
	call(t, cs, "get_schedule", map[string]any{"name": "hourly"}, &sc)
	if sc.Paused || sc.NextFireAt.IsZero() {
		t.Fatalf("resumed: %+v", sc)
	}
	call(t, cs, "delete_schedule", map[string]any{"name": "hourly"}, nil)
	if msg := callErr(t, cs, "get_schedule", map[string]any{"name": "hourly"}); !strings.Contains(msg, "not found") {
		t.Fatalf("after delete: %s", msg)
	}
}
