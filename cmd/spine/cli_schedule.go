package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/spine-queue/spine/client"
)

// spine schedule: recurring schedules (head).
var scheduleVerbs = []verb{
	{"create", "NAME [-]", "Create a schedule (head): the job --job describes (as jobs create's body) made at each tick of --cron or --every.", scheduleCreate},
	{"replace", "NAME [-]", "Replace a schedule's definition (head), keeping its runs and last tick; the same flags as create.", scheduleReplace},
	{"list", "", "List the schedules (head), with their next and last fire times.", scheduleList},
	{"get", "NAME", "Show one schedule (head), with its recent runs and the jobs they made.", scheduleGet},
	{"pause", "NAME", "Pause a schedule (head): no tick fires until it is resumed.", schedulePause},
	{"resume", "NAME", "Resume a schedule (head) from its next tick; the ticks of the pause are not caught up.", scheduleResume},
	{"trigger", "NAME", "Make one job of the schedule now (head), paused or not.", scheduleTrigger},
	{"delete", "NAME", "Delete a schedule (head); the jobs it made stay.", scheduleDelete},
}

func scheduleCreate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	return scheduleSet(env, c, fs, false)
}

func scheduleReplace(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	return scheduleSet(env, c, fs, true)
}

func scheduleSet(env *cliEnv, c *command, fs *pflag.FlagSet, replace bool) func(pos []string) int {
	var p client.ScheduleRequest
	job := fs.String("job", "", `the job every run creates, as JSON: the body of jobs create (e.g. '{"stream":"reports","payload":{"kind":"daily"}}'; '-': stdin)`)
	jobFile := fs.String("job-file", "", "read the job template from this file ('-': stdin)")
	fs.StringVar(&p.Cron, "cron", "", `cron expression: [seconds] minutes hours day-of-month month day-of-week, or @hourly, @daily, @weekly, @monthly, @yearly (e.g. "0 30 2 * * *")`)
	fs.StringVar(&p.Timezone, "timezone", "", "the cron expression's IANA time zone, e.g. Europe/Paris (default UTC)")
	every := fs.Duration("every", 0, "fire every this long instead of --cron, at multiples of it since 1970-01-01 UTC (e.g. 30s, 1h; whole seconds)")
	fs.StringVar(&p.Overlap, "overlap", "", "while the previous run's job is unfinished: skip (default: no job), queue (a job that waits for it), allow (a job that may run alongside)")
	fs.StringVar(&p.Catchup, "catchup", "", "ticks missed while the cluster had no leader: none, latest (default: only the latest), all (every one within --catchup-window)")
	window := fs.Duration("catchup-window", 0, "how far back --catchup all reaches (default 1h, at most 168h)")
	fs.BoolVar(&p.Paused, "paused", false, "create it paused")
	fs.StringVar(&p.Note, "note", "", "a note for the operators")
	c.nargs(1, 2)
	return func(pos []string) int {
		p.Name = pos[0]
		if len(pos) == 2 {
			if pos[1] != "-" {
				return c.usageError("unexpected argument " + pos[1])
			}
			*job = "-"
		}
		raw, err := readJSONArg(env, "job", *job, *jobFile)
		if err != nil {
			return c.usageError(err.Error())
		}
		if raw == nil {
			return c.usageError("a job template is required: --job JSON, --job-file PATH or -")
		}
		if err := json.Unmarshal(raw, &p.Job); err != nil {
			return c.usageError("--job: " + strings.TrimPrefix(err.Error(), "json: "))
		}
		if *every%time.Second != 0 || *window%time.Second != 0 {
			return c.usageError("--every and --catchup-window are whole seconds")
		}
		p.IntervalSeconds, p.CatchupWindowSeconds = int64(every.Seconds()), int64(window.Seconds())
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			if replace {
				return cl.ScheduleReplace(ctx, p.Name, p)
			}
			return cl.ScheduleCreate(ctx, p)
		}, scheduleTable)
	}
}

func scheduleList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(0, 0)
	return func(_ []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			list, err := cl.Schedules(ctx)
			out := make([]*client.Schedule, len(list))
			for i := range list {
				out[i] = &list[i]
			}
			return out, err
		}, schedulesTable)
	}
}

func scheduleGet(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.Schedule(ctx, pos[0])
		}, scheduleTable)
	}
}

func schedulePause(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.SchedulePause(ctx, pos[0])
		}, scheduleTable)
	}
}

func scheduleResume(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.ScheduleResume(ctx, pos[0])
		}, scheduleTable)
	}
}

func scheduleTrigger(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.ScheduleTrigger(ctx, pos[0])
		}, func(w io.Writer, v any) {
			t := v.(*client.ScheduleTrigger)
			jobTable(w, &t.Job)
		})
	}
}

func scheduleDelete(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return map[string]any{"deleted": pos[0]}, cl.ScheduleDelete(ctx, pos[0])
		}, func(w io.Writer, v any) { fmt.Fprintf(w, "DELETED\t%s\n", pos[0]) })
	}
}

// scheduleSpec is a schedule's spec in one column.
func scheduleSpec(s *client.Schedule) string {
	if s.Cron != "" {
		if s.Timezone != "" {
			return s.Cron + " (" + s.Timezone + ")"
		}
		return s.Cron
	}
	return "every " + (time.Duration(s.IntervalSeconds) * time.Second).String()
}

func schedulesTable(w io.Writer, v any) {
	fmt.Fprintln(w, "NAME\tSPEC\tSTATE\tNEXT\tLAST\tRUNS\tSKIPPED")
	for _, s := range oneOrMany[client.Schedule](v) {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", s.Name, scheduleSpec(s), state, fmtTime(s.NextFireAt), fmtTime(s.LastFireAt), s.Runs, s.Skipped)
	}
}

func scheduleTable(w io.Writer, v any) {
	s := v.(*client.Schedule)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("NAME", s.Name)
	row("SPEC", scheduleSpec(s))
	row("PAUSED", fmt.Sprint(s.Paused))
	row("OVERLAP", s.Overlap)
	row("CATCHUP", fmt.Sprintf("%s (window %s)", s.Catchup, time.Duration(s.CatchupWindowSeconds)*time.Second))
	row("NEXT", fmtTime(s.NextFireAt))
	row("LAST", fmtTime(s.LastFireAt))
	row("RUNS", fmt.Sprintf("%d (%d skipped)", s.Runs, s.Skipped))
	if s.Note != "" {
		row("NOTE", s.Note)
	}
	job, _ := json.Marshal(s.Job)
	row("JOB", string(job))
	for _, r := range s.Recent {
		what := r.JobID
		if r.Error != "" {
			what = "no job: " + r.Error
		}
		if r.Trigger {
			what += " (trigger)"
		}
		row("RUN "+fmtTime(r.Tick), what)
	}
}
