package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spine-queue/spine/client"
)

// The tools both roles have (list_streams, peek, get_job, comment) and
// head's (enqueue, list_jobs, redrive, requeue, cancel, cluster_status).
// The claws' lease tools are in claw.go and clawheld.go.

func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: new(false)}
}

func writes(title string, idempotent, destructive bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, IdempotentHint: idempotent, DestructiveHint: new(destructive), OpenWorldHint: new(false)}
}

// noInput is the input of a tool that takes no arguments.
type noInput struct{}

type listStreamsOut struct {
	Streams []StreamView `json:"streams"`
}

type peekIn struct {
	Stream string `json:"stream,omitempty" jsonschema:"the stream to look at (default \"default\")"`
	Limit  int    `json:"limit,omitempty" range:"1,100" jsonschema:"at most this many jobs, 1 to 100 (default 10)"`
}

type peekOut struct {
	Stream string    `json:"stream"`
	Jobs   []JobView `json:"jobs"`
	// More is set when more queued jobs than Limit wait.
	More bool   `json:"more"`
	Next string `json:"next"`
}

type getJobIn struct {
	JobID   string `json:"job_id" jsonschema:"the job's id"`
	History bool   `json:"history,omitempty" jsonschema:"also list the job's history (every event) and its attempts"`
}

type commentIn struct {
	JobID string `json:"job_id" jsonschema:"the job's id"`
	Text  string `json:"text" jsonschema:"the note, shown on the job to head and every worker"`
}

func (s *server) addCommonTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "list_streams",
		Title: "List streams",
		Description: "Every stream (a FIFO lane of jobs) with its jobs per status: queued ones wait to be claimed, " +
			"oldest_wait_seconds is how long the oldest has waited. A paused stream hands out nothing until an operator resumes it. " +
			"instructions say what the stream's jobs are for (also resource spine://streams/{name}/instructions).",
		Annotations: readOnly("List streams"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, listStreamsOut, error) {
		sts, err := s.c.Streams(ctx)
		if err != nil {
			return nil, listStreamsOut{}, s.advise(err, "list_streams", "")
		}
		out := listStreamsOut{Streams: make([]StreamView, 0, len(sts))}
		for i := range sts {
			out.Streams = append(out.Streams, streamView(&sts[i]))
		}
		return nil, out, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "peek",
		Title: "Peek at a stream's queue",
		Description: "The queued jobs of a stream that this token may take, in the order they were created, without claiming any " +
			"(a claim takes the highest priority first, then the job that has waited longest). " +
			"A job with run_at or waiting_on is not claimable yet.",
		Annotations: readOnly("Peek at a stream's queue"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in peekIn) (*mcp.CallToolResult, peekOut, error) {
		stream := in.Stream
		if stream == "" {
			stream = "default"
		}
		limit := in.Limit
		if limit <= 0 {
			limit = 10
		}
		limit = min(limit, 100)
		res, err := s.c.JobList(ctx, &client.JobListParams{Status: client.JobStatusQueued, Stream: stream, Limit: limit})
		if err != nil {
			return nil, peekOut{}, s.advise(err, "peek", "")
		}
		out := peekOut{Stream: stream, Jobs: make([]JobView, 0, len(res.Jobs)), More: res.NextCursor != ""}
		for _, j := range res.Jobs {
			out.Jobs = append(out.Jobs, jobView(j))
		}
		switch {
		case len(out.Jobs) == 0:
			out.Next = fmt.Sprintf("Nothing is queued in %s for you; list_streams shows where work waits.", stream)
		case s.role == RoleClaw:
			out.Next = fmt.Sprintf("Call claim with streams [%q] to take the first of them.", stream)
		default:
			out.Next = "Workers take these with claim."
		}
		return nil, out, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "get_job",
		Title: "Get a job",
		Description: "A job by id: its status (queued, running, done, failed, dead, cancelled), payload, attempts, " +
			"progress, result or error, and comments; with history, every event of its life and each attempt.",
		Annotations: readOnly("Get a job"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in getJobIn) (*mcp.CallToolResult, JobView, error) {
		if in.JobID == "" {
			return nil, JobView{}, errors.New("get_job: job_id is required")
		}
		j, err := s.c.JobGet(ctx, in.JobID)
		if err != nil {
			return nil, JobView{}, s.advise(err, "get_job", in.JobID)
		}
		v := jobView(j)
		if in.History {
			evs, err := s.c.JobEvents(ctx, in.JobID)
			if err != nil {
				return nil, JobView{}, s.advise(err, "get_job", in.JobID)
			}
			for _, e := range evs {
				v.History = append(v.History, EventRow{At: e.At, Type: e.Type, Actor: e.Actor, From: string(e.From), To: string(e.To),
					WorkerID: e.WorkerID, Text: e.Text})
			}
			atts, err := s.c.JobAttempts(ctx, in.JobID)
			if err != nil {
				return nil, JobView{}, s.advise(err, "get_job", in.JobID)
			}
			for _, a := range atts {
				v.AttemptList = append(v.AttemptList, AttemptRow{ID: a.ID, WorkerID: a.WorkerID, StartedAt: a.StartedAt, EndedAt: a.EndedAt,
					Outcome: a.Outcome, Error: errorView(a.Error)})
			}
		}
		return nil, v, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "comment",
		Title: "Comment on a job",
		Description: "Attach a note to a job (a question, a finding, why it is waiting), shown with the job to head and to every worker. " +
			"It changes nothing else.",
		Annotations: writes("Comment on a job", false, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in commentIn) (*mcp.CallToolResult, JobView, error) {
		if in.JobID == "" || strings.TrimSpace(in.Text) == "" {
			return nil, JobView{}, errors.New("comment: job_id and a non-blank text are required")
		}
		j, err := s.c.JobComment(ctx, in.JobID, in.Text)
		if err != nil {
			return nil, JobView{}, s.advise(err, opComment, in.JobID)
		}
		return nil, jobView(j), nil
	})
}

type enqueueIn struct {
	Stream  string `json:"stream,omitempty" jsonschema:"the stream (lane) to put the job in (default \"default\")"`
	Payload any    `json:"payload" jsonschema:"what the worker is to do: any JSON value but null, usually an object such as {\"task\": \"…\", \"url\": \"…\"}"`
	// The rest are optional.
	Priority          int            `json:"priority,omitempty" range:"-100,100" jsonschema:"-100 to 100 (default 0): a claim takes the highest first; aged so that none starves"`
	DelaySeconds      int64          `json:"delay_seconds,omitempty" range:"0,31536000" jsonschema:"no claim takes the job before this many seconds from now, 0 to 31536000 (a year)"`
	MaxAttempts       int            `json:"max_attempts,omitempty" range:"1,1000" jsonschema:"runs allowed before the job is dead, 1 to 1000 (default: the cluster's, 5)"`
	LeaseSeconds      int            `json:"lease_seconds,omitempty" range:"1,604800" jsonschema:"the lease of each claim, which heartbeats extend, 1 to 604800 (a week; default: the cluster's, 300)"`
	Target            string         `json:"target,omitempty" jsonschema:"only this role (left_claw or right_claw) or worker id may claim it (default: any claw)"`
	Requires          []string       `json:"requires,omitempty" jsonschema:"capabilities a worker must all have to be handed the job (labels such as gpu or lang:python)"`
	DependsOn         []string       `json:"depends_on,omitempty" jsonschema:"ids of jobs that must all be done first; if one fails, this one fails too (unless on_dependency_failure is run)"`
	OnDepFailure      string         `json:"on_dependency_failure,omitempty" jsonschema:"with depends_on: fail (default) or run: run once every dependency has ended, however (a report on the parts, a cleanup)"`
	ConcurrencyKey    string         `json:"concurrency_key,omitempty" jsonschema:"at most concurrency_limit jobs of this key run at once, cluster-wide (e.g. tenant-42)"`
	ConcurrencyLimit  int            `json:"concurrency_limit,omitempty" range:"1,10000" jsonschema:"1 to 10000, with concurrency_key (default: the stream's default limit, or 1)"`
	RateKey           string         `json:"rate_key,omitempty" jsonschema:"rate-limit the claims of this key's jobs, cluster-wide (e.g. vendor-api), with rate_limit and rate_period_ms; a job over the rate waits in the queue until the rate allows"`
	RateLimit         int            `json:"rate_limit,omitempty" range:"1,1000000" jsonschema:"with rate_key: at most this many claims of the key's jobs per rate_period_ms, 1 to 1000000"`
	RatePeriodMS      int64          `json:"rate_period_ms,omitempty" range:"1,604800000" jsonschema:"with rate_key: the period of rate_limit in milliseconds, 1 to 604800000 (a week), e.g. 60000 for a minute"`
	RateBurst         int            `json:"rate_burst,omitempty" range:"0,1000000" jsonschema:"with rate_key: claims allowed at once (default: rate_limit)"`
	BackoffSeconds    int64          `json:"backoff_seconds,omitempty" range:"0,31536000" jsonschema:"after a failed attempt, wait backoff_seconds × 2^(n-1) before the next, at most a year (default: the cluster's)"`
	BackoffMaxSeconds int64          `json:"backoff_max_seconds,omitempty" range:"0,31536000" jsonschema:"the longest such wait, at most a year"`
	IdempotencyKey    string         `json:"idempotency_key,omitempty" jsonschema:"a repeated enqueue with the same key answers the first job instead of making a second (default: a new key, shown in the answer)"`
	ResultSchema      map[string]any `json:"result_schema,omitempty" jsonschema:"the job's result contract: a JSON Schema (type, required, properties, additionalProperties, items, enum, const, minimum, maximum, minLength, maxLength, pattern, minItems, maxItems) its result must match; a complete that does not is refused with every mismatch (default: the stream's, if any)"`
}

type enqueueOut struct {
	Job JobView `json:"job"`
	// Duplicate: the key had been used; Job is the job made then.
	Duplicate      bool   `json:"duplicate"`
	IdempotencyKey string `json:"idempotency_key"`
}

type listJobsIn struct {
	Stream string `json:"stream,omitempty" jsonschema:"only this stream's jobs"`
	Status string `json:"status,omitempty" jsonschema:"only jobs in this status: queued, running, done, failed, dead or cancelled"`
	Limit  int    `json:"limit,omitempty" range:"1,1000" jsonschema:"at most this many, 1 to 1000 (default 20)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page"`
	// Schedule keeps a recurring schedule's jobs (schedules.go).
	Schedule string `json:"schedule,omitempty" jsonschema:"only the jobs the recurring schedule of this name made"`
}

type listJobsOut struct {
	Jobs []JobView `json:"jobs"`
	// NextCursor, when set, gives the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

type jobIn struct {
	JobID string `json:"job_id" jsonschema:"the job's id"`
}

type requeueIn struct {
	JobID  string `json:"job_id" jsonschema:"the failed job's id"`
	Stream string `json:"stream,omitempty" jsonschema:"put the copy in this stream (default: the failed job's)"`
}

type requeueOut struct {
	Job  JobView `json:"job"`
	From string  `json:"from"`
}

type cancelIn struct {
	JobID  string `json:"job_id" jsonschema:"the job's id"`
	Reason string `json:"reason,omitempty" jsonschema:"why, shown on the job"`
}

// ClusterView is the cluster as cluster_status shows it.
type ClusterView struct {
	LeaderID   string `json:"leader_id"`
	LeaderAddr string `json:"leader_addr"`
	// AnsweredBy is the node whose view this is.
	AnsweredBy   string     `json:"answered_by"`
	Term         uint64     `json:"term"`
	CommitIndex  uint64     `json:"commit_index"`
	AppliedIndex uint64     `json:"applied_index"`
	Nodes        []NodeView `json:"nodes"`
}

// NodeView is one member of the cluster.
type NodeView struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	Suffrage string `json:"suffrage"`
	Alive    bool   `json:"alive"`
	Leader   bool   `json:"leader"`
}

func (s *server) addHeadTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "enqueue",
		Title: "Enqueue a job",
		Description: "Create a job in a stream for a worker (claw) to claim: the payload says what to do. " +
			"It is committed on a majority of nodes before the answer. Optional: priority, a delay, dependencies, " +
			"required capabilities, a per-key concurrency limit, attempts, lease and retry backoff, a per-key rate limit, and a result contract (result_schema).",
		Annotations: writes("Enqueue a job", true, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in enqueueIn) (*mcp.CallToolResult, enqueueOut, error) {
		if in.Payload == nil {
			return nil, enqueueOut{}, errors.New("enqueue: payload is required: any JSON value but null, usually an object saying what to do")
		}
		payload, err := json.Marshal(in.Payload)
		if err != nil {
			return nil, enqueueOut{}, fmt.Errorf("enqueue: payload: %v", err)
		}
		key := in.IdempotencyKey
		if key == "" {
			key = uuid.NewString()
		}
		p := &client.JobCreateParams{Payload: payload, Stream: in.Stream, Priority: in.Priority, DelaySeconds: in.DelaySeconds,
			MaxAttempts: in.MaxAttempts, LeaseSeconds: in.LeaseSeconds, Target: in.Target, Requires: in.Requires, DependsOn: in.DependsOn,
			ConcurrencyKey: in.ConcurrencyKey, ConcurrencyLimit: in.ConcurrencyLimit, IdempotencyKey: key, OnDependencyFailure: in.OnDepFailure}
		if in.BackoffSeconds > 0 || in.BackoffMaxSeconds > 0 {
			p.Backoff = &client.Backoff{Base: in.BackoffSeconds, Max: in.BackoffMaxSeconds}
		}
		if p.ResultSchema, err = marshalObject("enqueue: result_schema", in.ResultSchema); err != nil {
			return nil, enqueueOut{}, err
		}
		switch {
		case in.RateKey != "":
			if in.RateLimit == 0 || in.RatePeriodMS == 0 {
				return nil, enqueueOut{}, errors.New("enqueue: rate_key needs rate_limit (1 to 1000000) and rate_period_ms (1 to 604800000)")
			}
			p.RateLimit = &client.RateLimit{Key: in.RateKey, Limit: in.RateLimit, PeriodSeconds: float64(in.RatePeriodMS) / 1000, Burst: in.RateBurst}
		case in.RateLimit != 0 || in.RatePeriodMS != 0 || in.RateBurst != 0:
			return nil, enqueueOut{}, errors.New("enqueue: rate_limit, rate_period_ms and rate_burst need rate_key")
		}
		j, err := s.c.JobCreate(ctx, p)
		if err != nil {
			advice := s.advise(err, opEnqueue, "")
			if isUncertain(err) {
				advice = fmt.Errorf("%w (idempotency_key %q)", advice, key)
			}
			return nil, enqueueOut{}, advice
		}
		return nil, enqueueOut{Job: jobView(j), Duplicate: j.Duplicate, IdempotencyKey: key}, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "list_jobs",
		Title: "List jobs",
		Description: "Jobs in the order they were created, filtered by stream and status (queued, running, done, failed, dead, cancelled), " +
			"a page at a time: pass next_cursor as cursor for the next page. Failed and dead jobs are the dead letters; " +
			"redrive or requeue puts them back.",
		Annotations: readOnly("List jobs"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in listJobsIn) (*mcp.CallToolResult, listJobsOut, error) {
		limit := in.Limit
		if limit <= 0 {
			limit = 20
		}
		res, err := s.c.JobList(ctx, &client.JobListParams{Stream: in.Stream, Status: client.JobStatus(in.Status), Limit: limit, Cursor: in.Cursor,
			Schedule: in.Schedule})
		if err != nil {
			return nil, listJobsOut{}, s.advise(err, "list_jobs", "")
		}
		out := listJobsOut{Jobs: make([]JobView, 0, len(res.Jobs)), NextCursor: string(res.NextCursor)}
		for _, j := range res.Jobs {
			out.Jobs = append(out.Jobs, jobView(j))
		}
		return nil, out, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "redrive",
		Title: "Redrive a job",
		Description: "Put a failed, dead or cancelled job back in its queue as it is (same id, attempts reset to 0) " +
			"so that a worker runs it again. requeue makes a new copy instead and keeps the failed one as it is.",
		Annotations: writes("Redrive a job", true, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in jobIn) (*mcp.CallToolResult, JobView, error) {
		if in.JobID == "" {
			return nil, JobView{}, errors.New("redrive: job_id is required")
		}
		j, err := s.c.DLQRedrive(ctx, in.JobID)
		if err != nil {
			return nil, JobView{}, s.advise(err, opRedrive, in.JobID)
		}
		return nil, jobView(j), nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "requeue",
		Title: "Requeue a failed job as a copy",
		Description: "Run a failed job again as a new job: a copy with a new id and the same payload, queued in the same stream " +
			"or the one given; the failed job stays as it is, for the record. Repeating it answers the same copy. " +
			"redrive reruns the job itself instead.",
		Annotations: writes("Requeue a failed job as a copy", true, false),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in requeueIn) (*mcp.CallToolResult, requeueOut, error) {
		if in.JobID == "" {
			return nil, requeueOut{}, errors.New("requeue: job_id is required")
		}
		j, err := s.requeue(ctx, in.JobID, in.Stream)
		if err != nil {
			return nil, requeueOut{}, err
		}
		return nil, requeueOut{Job: jobView(j), From: in.JobID}, nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:  "cancel",
		Title: "Cancel a job",
		Description: "Cancel a job: a queued one ends cancelled at once; a running one is marked (cancel_requested) and its worker " +
			"learns it from its next heartbeat, stops, and the job ends cancelled.",
		Annotations: writes("Cancel a job", true, true),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in cancelIn) (*mcp.CallToolResult, JobView, error) {
		if in.JobID == "" {
			return nil, JobView{}, errors.New("cancel: job_id is required")
		}
		j, err := s.c.JobCancel(ctx, in.JobID, in.Reason)
		if err != nil {
			return nil, JobView{}, s.advise(err, opCancel, in.JobID)
		}
		return nil, jobView(j), nil
	})

	addTool(s, srv, &mcp.Tool{
		Name:        "cluster_status",
		Title:       "Cluster status",
		Description: "The cluster's nodes (API address, voter or not, alive or not), which one leads, and the Raft term and indexes.",
		Annotations: readOnly("Cluster status"),
	}, func(ctx context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, ClusterView, error) {
		st, err := s.c.ClusterStatus(ctx)
		if err != nil {
			return nil, ClusterView{}, s.advise(err, "cluster_status", "")
		}
		v := ClusterView{LeaderID: st.Leader.ID, LeaderAddr: st.Leader.HTTPAddr, AnsweredBy: st.NodeID, Term: st.Term,
			CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, Nodes: make([]NodeView, 0, len(st.Nodes))}
		for _, n := range st.Nodes {
			v.Nodes = append(v.Nodes, NodeView{ID: n.ID, HTTPAddr: n.HTTPAddr, Suffrage: n.Suffrage, Alive: n.Alive, Leader: n.ID == st.Leader.ID})
		}
		return nil, v, nil
	})
}

// requeue copies the failed or dead job id into stream ("": its own): a
// developer-queue task (tsk_…) through the task API, which copies its tool,
// class and timeout, any other job as a new job with its payload and
// settings.
func (s *server) requeue(ctx context.Context, id, stream string) (*client.Job, error) {
	if strings.HasPrefix(id, "tsk_") {
		t, err := s.c.TaskRequeue(ctx, id, stream)
		if err != nil {
			return nil, s.advise(err, opRequeue, id)
		}
		j, err := s.c.JobGet(ctx, t.ID)
		if err != nil {
			return nil, s.advise(err, "get_job", t.ID)
		}
		return j, nil
	}
	src, err := s.c.JobGet(ctx, id)
	if err != nil {
		return nil, s.advise(err, opRequeue, id)
	}
	if src.Status != client.JobStatusFailed && src.Status != client.JobStatusDead {
		return nil, fmt.Errorf("requeue refused: job %s is %s; only a failed or dead job is requeued (a cancelled one is redriven)", id, src.Status)
	}
	if stream == "" {
		stream = src.Stream
	}
	// The copy's idempotency key names the failed job as it is now, so a
	// repeat (an answer lost on its way) answers the same copy.
	key := fmt.Sprintf("requeue:%s:%d:%s", id, src.ModifyIndex, stream)
	p := &client.JobCreateParams{Payload: src.Payload, Stream: stream, Priority: src.Priority, MaxAttempts: src.MaxAttempts,
		LeaseSeconds: src.LeaseSeconds, Target: string(src.Target), TaskClass: src.TaskClass, Requires: src.Requires,
		ConcurrencyKey: src.ConcurrencyKey, Backoff: src.Backoff, IdempotencyKey: key, RateLimit: src.RateLimit}
	if src.ConcurrencyKey != "" {
		p.ConcurrencyLimit = src.ConcurrencyLimit
	}
	j, err := s.c.JobCreate(ctx, p)
	if err != nil {
		return nil, s.advise(err, opRequeue, id)
	}
	return j, nil
}

// isUncertain reports whether a call's error leaves its outcome unknown.
func isUncertain(err error) bool {
	return errors.Is(err, client.ErrOutcomeUnknown) || (isNetError(err) && !notSent(err))
}
