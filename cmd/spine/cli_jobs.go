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

var jobVerbs = []verb{
	{"create", "[-]", "Create a job (head). The payload is JSON from --payload, --payload-file, or stdin with '-'.", jobsCreate},
	{"list", "", "List jobs one page at a time; --dlq lists failed and dead jobs, --local reads the answering node only.", jobsList},
	{"get", "ID", "Show one job.", jobsGet},
	{"events", "ID", "Show a job's event history.", jobsEvents},
	{"attempts", "ID", "Show a job's attempts.", jobsAttempts},
	{"claim", "ID", "Claim a queued job (claws). Prints the job with its leaseToken and attemptId.", jobsClaim},
	{"heartbeat", "ID", "Extend the lease of a running job.", jobsHeartbeat},
	{"complete", "ID", "Complete a running job with an optional JSON result.", jobsComplete},
	{"fail", "ID", "Fail a running job; it is requeued while it has attempts left unless --requeue=false.", jobsFail},
	{"release", "ID", "Give a running job back to the queue without counting the attempt.", jobsRelease},
	{"comment", "ID [TEXT]", "Attach a note to a job.", jobsComment},
	{"cancel", "ID [--reason TEXT]", "Cancel a job (head): a queued one at once; a running one's worker is told on its next heartbeat, and the job ends cancelled when it stops.", jobsCancel},
	{"redrive", "ID", "Put a failed, dead or cancelled job back in the queue with its attempts reset (head).", jobsRedrive},
}

func jobsCreate(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobCreateParams
	payload := fs.String("payload", "", "job payload as JSON ('-': read stdin)")
	payloadFile := fs.String("payload-file", "", "read the payload from this file ('-': stdin)")
	fs.StringVar(&p.Stream, "stream", "", "stream (server default: default)")
	fs.StringVar(&p.Target, "target", "", "role or worker id the job is meant for")
	fs.IntVar(&p.MaxAttempts, "max-attempts", 0, "attempts before the job is dead (server default when 0)")
	fs.IntVar(&p.LeaseSeconds, "lease-seconds", 0, "lease length override in seconds")
	fs.StringVar(&p.TaskClass, "task-class", "", "optional label, e.g. LLM_HEAVY")
	fs.IntVar(&p.Priority, "priority", 0, "-100 to 100: higher is handed out first within the stream (aged: none starves)")
	delay := fs.Duration("delay", 0, "no claim takes the job before this long from now (e.g. 90s, 2h)")
	runAt := fs.String("run-at", "", "no claim takes the job before this time (RFC 3339)")
	backoffBase := fs.Duration("backoff", 0, "retry backoff: a fail with requeue waits this, doubling each attempt (e.g. 5s; 0: retry at once; default: the cluster's SPINE_RETRY_BACKOFF)")
	backoffMax := fs.Duration("backoff-max", 0, "the most a retry backoff waits")
	fs.StringVar(&p.ConcurrencyKey, "concurrency-key", "", "at most --concurrency-limit jobs of this key run at once, cluster-wide")
	fs.IntVar(&p.ConcurrencyLimit, "concurrency-limit", 0, "with --concurrency-key: how many of its jobs may run at once (default: the stream's default limit, or 1)")
	rate := rateFlags(fs)
	fs.StringSliceVar(&p.Requires, "requires", nil, "capabilities a worker must have to be handed the job (comma-separated labels, e.g. gpu,lang:python)")
	fs.StringSliceVar(&p.DependsOn, "depends-on", nil, "job ids (comma-separated, or the flag repeated) that must be done before this job can be claimed")
	fs.StringVar(&p.OnDependencyFailure, "on-dependency-failure", "", `with --depends-on: "fail" (default: a dependency that does not end done fails this job) or "run" (run once every dependency has ended, however)`)
	fs.StringVar(&p.IdempotencyKey, "idempotency-key", "", "repeating a create with the same key answers the first job (default: a fresh UUID)")
	schema := fs.String("result-schema", "", "the job's result contract: "+resultSchemaUsage+" (default: the stream's, if any)")
	c.nargs(0, 1)
	return func(pos []string) int {
		if len(pos) == 1 {
			if pos[0] != "-" {
				return c.usageError("unexpected argument " + pos[0])
			}
			*payload = "-"
		}
		raw, err := readJSONArg(env, "payload", *payload, *payloadFile)
		if err != nil {
			return c.usageError(err.Error())
		}
		if raw == nil {
			return c.usageError("a payload is required: --payload JSON, --payload-file PATH or -")
		}
		p.Payload = raw
		if p.ResultSchema, err = readSchemaArg(env, *schema); err != nil {
			return c.usageError(err.Error())
		}
		if *runAt != "" {
			t, err := time.Parse(time.RFC3339, *runAt)
			if err != nil {
				return c.usageError("--run-at: " + err.Error())
			}
			p.RunAt = t
		}
		p.DelaySeconds = int64(delay.Seconds())
		if p.RateLimit, err = rate.rate(); err != nil {
			return c.usageError(err.Error())
		}
		if fs.Changed("backoff") || fs.Changed("backoff-max") {
			p.Backoff = &client.Backoff{Base: int64(backoffBase.Seconds()), Max: int64(backoffMax.Seconds())}
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			job, err := cl.JobCreate(ctx, &p)
			if err == nil && job.Duplicate {
				fmt.Fprintln(env.stderr, "spine: note: idempotency key already used; this is the first job")
			}
			return job, err
		}, jobTable)
	}
}

func jobsList(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobListParams
	status := fs.String("status", "", "only jobs in this state: queued, running, done, failed, dead")
	fs.StringVar(&p.Stream, "stream", "", "only jobs of this stream")
	fs.StringVar(&p.Target, "target", "", "only jobs targeted at this role or worker")
	fs.StringVar(&p.Schedule, "schedule", "", "only the jobs this recurring schedule made")
	fs.IntVar(&p.Limit, "limit", 0, "page size, 1-1000 (server default 100)")
	fs.StringVar(&p.Cursor, "cursor", "", "nextCursor of the previous page")
	fs.BoolVar(&p.Stale, "local", false, "read the answering node's own state without going to the leader: faster, and may lag the latest writes")
	// --stale was this flag's name; the developer queue's "stale tasks"
	// (spine tasks --stale) mean something else.
	stale := fs.Bool("stale", false, "deprecated: use --local")
	_ = fs.MarkHidden("stale")
	dlq := fs.Bool("dlq", false, "list the dead-letter queue (failed and dead jobs, head) instead")
	c.nargs(0, 0)
	return func(_ []string) int {
		if fs.Changed("stale") {
			fmt.Fprintln(env.stderr, "spine: note: jobs list --stale is deprecated and will be removed; use --local (a read from the answering node)")
			p.Stale = p.Stale || *stale
		}
		p.Status = client.JobStatus(*status)
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			if *dlq {
				return cl.DLQList(ctx, &client.DLQListParams{Stream: p.Stream, Limit: p.Limit, Cursor: p.Cursor})
			}
			return cl.JobList(ctx, &p)
		}, jobListTable)
	}
}

func jobsGet(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobGet(ctx, pos[0])
		}, jobTable)
	}
}

func jobsRedrive(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.DLQRedrive(ctx, pos[0])
		}, jobTable)
	}
}

type jobEventsOut struct {
	JobID  string             `json:"jobId"`
	Events []*client.JobEvent `json:"events"`
}

type jobAttemptsOut struct {
	JobID    string               `json:"jobId"`
	Attempts []*client.JobAttempt `json:"attempts"`
}

func jobsEvents(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			ev, err := cl.JobEvents(ctx, pos[0])
			return &jobEventsOut{JobID: pos[0], Events: ev}, err
		}, func(w io.Writer, v any) {
			fmt.Fprintln(w, "SEQ\tAT\tTYPE\tACTOR\tFROM\tTO\tATTEMPT\tWORKER\tTEXT")
			for _, e := range v.(*jobEventsOut).Events {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, fmtTime(e.At), e.Type, dash(e.Actor),
					dash(string(e.From)), dash(string(e.To)), dash(e.AttemptID), dash(e.WorkerID), dash(e.Text))
			}
		})
	}
}

func jobsAttempts(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			at, err := cl.JobAttempts(ctx, pos[0])
			return &jobAttemptsOut{JobID: pos[0], Attempts: at}, err
		}, func(w io.Writer, v any) {
			fmt.Fprintln(w, "ID\tOWNER\tWORKER\tOUTCOME\tSTARTED\tENDED\tERROR")
			for _, a := range v.(*jobAttemptsOut).Attempts {
				errText := "-"
				if a.Error != nil {
					errText = a.Error.Error()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, dash(a.Owner), dash(a.WorkerID), a.Outcome,
					fmtTime(a.StartedAt), fmtTime(a.EndedAt), errText)
			}
		})
	}
}

func jobsClaim(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobClaimParams
	fs.StringVar(&p.WorkerID, "worker-id", "", "worker identity recorded with the attempt")
	fs.StringSliceVar(&p.Capabilities, "capabilities", nil, "what this worker has (comma-separated labels, e.g. gpu,lang:python): a job that requires others is refused")
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobClaim(ctx, pos[0], &p)
		}, jobTable)
	}
}

// leaseFlags registers --lease-token and --attempt-id.
func leaseFlags(fs *pflag.FlagSet, token, attempt *string) {
	fs.StringVar(token, "lease-token", "", "lease token from the claim (with --attempt-id, makes retries safe)")
	fs.StringVar(attempt, "attempt-id", "", "attempt id from the claim")
}

func jobsHeartbeat(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobLeaseParams
	leaseFlags(fs, &p.LeaseToken, &p.AttemptID)
	progress := fs.String("progress", "", `progress to show on the job, as JSON (e.g. '{"pct":40}'), at most 4 KiB`)
	checkpoint := fs.String("checkpoint", "", "a checkpoint to keep across attempts, as JSON, at most 64 KiB")
	c.nargs(1, 1)
	return func(pos []string) int {
		for _, f := range []struct {
			name, v string
			dst     *json.RawMessage
		}{{"progress", *progress, &p.Progress}, {"checkpoint", *checkpoint, &p.Checkpoint}} {
			if f.v == "" {
				continue
			}
			if !json.Valid([]byte(f.v)) {
				return c.usageError("--" + f.name + " is not valid JSON")
			}
			*f.dst = json.RawMessage(f.v)
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobHeartbeat(ctx, pos[0], &p)
		}, jobTable)
	}
}

func jobsComplete(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobCompleteParams
	result := fs.String("result", "", "result as JSON ('-': read stdin)")
	resultFile := fs.String("result-file", "", "read the result from this file ('-': stdin)")
	fs.StringVar(&p.Stdout, "stdout", "", "captured standard output to record")
	fs.StringVar(&p.Stderr, "stderr", "", "captured standard error to record")
	leaseFlags(fs, &p.LeaseToken, &p.AttemptID)
	c.nargs(1, 1)
	return func(pos []string) int {
		raw, err := readJSONArg(env, "result", *result, *resultFile)
		if err != nil {
			return c.usageError(err.Error())
		}
		p.Result = raw
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			j, err := cl.JobComplete(ctx, pos[0], &p)
			return j, withMismatches(err)
		}, jobTable)
	}
}

func jobsFail(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobFailParams
	var je client.JobError
	fs.StringVar(&je.Message, "message", "", "what went wrong")
	fs.StringVar(&je.Code, "code", "", "machine-readable error code")
	fs.StringVar(&je.Stack, "stack", "", "stack trace or log excerpt")
	fs.BoolVar(&je.Retryable, "retryable", true, "whether the failure is worth retrying")
	requeue := fs.Bool("requeue", true, "requeue while attempts remain (false: the job becomes failed)")
	leaseFlags(fs, &p.LeaseToken, &p.AttemptID)
	c.nargs(1, 1)
	return func(pos []string) int {
		if je.Message != "" || je.Code != "" || je.Stack != "" || fs.Changed("retryable") {
			p.Error = &je
		}
		if fs.Changed("requeue") {
			p.Requeue = requeue
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobFail(ctx, pos[0], &p)
		}, jobTable)
	}
}

func jobsRelease(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	var p client.JobReleaseParams
	fs.StringVar(&p.Reason, "reason", "", "why the job is given back")
	leaseFlags(fs, &p.LeaseToken, &p.AttemptID)
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobRelease(ctx, pos[0], &p)
		}, jobTable)
	}
}

func jobsComment(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	text := fs.String("text", "", "the note (or give it as the second argument)")
	c.nargs(1, 2)
	return func(pos []string) int {
		if len(pos) == 2 {
			if *text != "" {
				return c.usageError("give the text as an argument or with --text, not both")
			}
			*text = pos[1]
		}
		if *text == "" {
			return c.usageError("comment text is required")
		}
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobComment(ctx, pos[0], *text)
		}, jobTable)
	}
}

// jobTable prints one job as FIELD/VALUE rows.
func jobTable(w io.Writer, v any) {
	j := v.(*client.Job)
	row := func(k, v string) { fmt.Fprintf(w, "%s\t%s\n", k, v) }
	row("ID", j.ID)
	row("STATUS", string(j.Status))
	row("STREAM", dash(j.Stream))
	row("TARGET", dash(string(j.Target)))
	row("ATTEMPTS", fmt.Sprintf("%d/%d", j.Attempts, j.MaxAttempts))
	if j.Priority != 0 {
		row("PRIORITY", fmt.Sprint(j.Priority))
	}
	if !j.RunAt.IsZero() {
		row("RUN AT", fmtTime(j.RunAt))
	}
	if len(j.DependsOn) > 0 {
		deps := fmt.Sprintf("%s (%d not done)", strings.Join(j.DependsOn, ", "), j.WaitingOn)
		if j.OnDependencyFailure == "run" {
			deps = fmt.Sprintf("%s (%d not ended; runs whatever they did)", strings.Join(j.DependsOn, ", "), j.WaitingOn)
		}
		row("DEPENDS ON", deps)
	}
	if j.RateLimit != nil {
		row("RATE LIMIT", rateText(j.RateLimit))
	}
	if j.ConcurrencyKey != "" {
		row("CONCURRENCY", fmt.Sprintf("key %s, at most %d at once", j.ConcurrencyKey, max(j.ConcurrencyLimit, 1)))
	}
	if len(j.Requires) > 0 {
		row("REQUIRES", strings.Join(j.Requires, ", "))
	}
	if len(j.ResultSchema) > 0 {
		row("RESULT SCHEMA", schemaText(j.ResultSchema))
	}
	if b := j.Backoff; b != nil {
		row("BACKOFF", fmt.Sprintf("%ds doubling, at most %ds", b.Base, b.Max))
	}
	if j.TaskClass != "" {
		row("TASK CLASS", j.TaskClass)
	}
	if j.Status == client.JobStatusRunning || j.ClaimedBy != "" {
		row("CLAIMED BY", dash(j.ClaimedBy))
		row("WORKER", dash(j.WorkerID))
		row("ATTEMPT ID", dash(j.AttemptID))
		row("LEASE EXPIRES", fmtTime(j.LeaseExpiresAt))
	}
	if j.LeaseToken != "" {
		row("LEASE TOKEN", j.LeaseToken)
	}
	if len(j.Progress) > 0 {
		row("PROGRESS", compact(j.Progress, 120)+" at "+fmtTime(j.ProgressAt))
	}
	if len(j.Checkpoint) > 0 {
		row("CHECKPOINT", compact(j.Checkpoint, 120)+" at "+fmtTime(j.CheckpointAt))
	}
	if !j.CancelRequestedAt.IsZero() {
		row("CANCEL", fmt.Sprintf("asked %s: %s", fmtTime(j.CancelRequestedAt), dash(j.CancelReason)))
	}
	row("PAYLOAD", compact(j.Payload, 120))
	if len(j.Result) > 0 {
		row("RESULT", compact(j.Result, 120))
	}
	if j.Error != nil {
		row("ERROR", fmt.Sprintf("%s (retryable=%v)", j.Error.Error(), j.Error.Retryable))
	}
	for _, cm := range j.Comments {
		row("COMMENT", fmt.Sprintf("%s %s: %s", fmtTime(cm.At), cm.Actor, cm.Text))
	}
	row("CREATED", fmtTime(j.CreatedAt))
	row("UPDATED", fmtTime(j.UpdatedAt))
	if !j.FinishedAt.IsZero() {
		row("FINISHED", fmtTime(j.FinishedAt))
	}
}

// jobListTable prints a page of jobs, one per row.
func jobListTable(w io.Writer, v any) {
	res := v.(*client.JobListResult)
	fmt.Fprintln(w, "ID\tSTATUS\tSTREAM\tTARGET\tATTEMPTS\tCLAIMED BY\tCREATED")
	for _, j := range res.Jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", j.ID, j.Status, dash(j.Stream), dash(string(j.Target)),
			j.Attempts, j.MaxAttempts, dash(j.ClaimedBy), fmtTime(j.CreatedAt))
	}
	if res.NextCursor != "" {
		fmt.Fprintf(w, "\nnext page: --cursor %s\n", res.NextCursor)
	}
}

func jobsCancel(env *cliEnv, c *command, fs *pflag.FlagSet) func(pos []string) int {
	reason := fs.String("reason", "", "why, kept on the job")
	c.nargs(1, 1)
	return func(pos []string) int {
		return c.do(func(ctx context.Context, cl *client.Client) (any, error) {
			return cl.JobCancel(ctx, pos[0], *reason)
		}, jobTable)
	}
}
