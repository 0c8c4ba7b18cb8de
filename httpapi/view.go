package httpapi

import (
	"net/http"
	"strconv"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/fsm"
)

// The API's views of the state machine's jobs (package api declares them).

func viewError(e *fsm.JobError) *api.JobError {
	if e == nil {
		return nil
	}
	return (*api.JobError)(e)
}

func viewJob(j *fsm.Job) *api.Job {
	v := new(api.Job)
	viewJobInto(v, j)
	return v
}

// viewJobInto fills v with the view of j: a handler that only writes the
// answer keeps v on its stack.
func viewJobInto(v *api.Job, j *fsm.Job) {
	kind, target := j.TargetOf()
	x := j.Extra()
	*v = api.Job{
		ID: j.ID, Stream: j.Stream, Target: api.NullableString(target), TargetKind: kind, Payload: j.Payload, Status: api.JobStatus(j.State),
		Attempts: int(j.Attempts), MaxAttempts: int(j.MaxAttempts), Priority: int(j.Priority), RunAt: api.Time(j.NotBefore), LeaseSeconds: int(x.LeaseSeconds), TaskClass: x.TaskClass,
		Result: j.Result, Error: viewError(j.Error), Stdout: x.Stdout, Stderr: x.Stderr, IdempotencyKey: j.IdempotencyKey,
		CreatedAt: api.Time(j.CreatedAt), UpdatedAt: api.Time(j.UpdatedAt), StartedAt: api.Time(j.StartedAt),
		FinishedAt:  api.Time(j.FinishedAt),
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex,
		Comments: make([]api.Comment, 0, len(x.Comments)),
		Cancel:   j.CancelRequested(), CancelRequestedAt: api.Time(x.CancelRequestedAt), CancelReason: x.CancelReason,
		Progress: x.Progress, ProgressAt: api.Time(x.ProgressAt), Checkpoint: x.Checkpoint, CheckpointAt: api.Time(x.CheckpointAt),
		Schedule: x.Schedule,
	}
	if x.ConcurrencyKey != "" {
		v.ConcurrencyKey, v.ConcurrencyLimit = x.ConcurrencyKey, max(x.ConcurrencyLimit, 1)
	}
	v.RateLimit = viewRate(x.Rate)
	v.DependsOn, v.WaitingOn = x.DependsOn, x.DepsPending
	if x.RunOnDepFailure {
		v.OnDependencyFailure = "run"
	}
	v.Requires, v.NotFor = fsm.Labels(x.Requires), x.NotFor
	v.ResultSchema = resultSchema(j)
	if j.BackoffBase > 0 {
		v.Backoff = &api.Backoff{Base: int64(j.BackoffBase), Max: int64(j.BackoffMax)}
	}
	if l := j.Lease; l != nil {
		v.ClaimedBy, v.WorkerID, v.AttemptID, v.LeaseExpiresAt = l.Owner, l.WorkerID, l.AttemptID, api.Time(l.ExpiresAt)
	}
	for _, c := range x.Comments {
		v.Comments = append(v.Comments, api.Comment{At: api.Time(c.At), Actor: c.Actor, Text: c.Text})
	}
}

func viewEvents(j *fsm.Job) api.JobEventList {
	h := j.History()
	out := api.JobEventList{JobID: j.ID, Events: make([]*api.JobEvent, 0, len(h))}
	for _, e := range h {
		actor, token := e.Who()
		out.Events = append(out.Events, &api.JobEvent{Seq: int(e.Seq), At: api.Time(e.At), Type: e.Type.String(), Actor: actor,
			From: api.JobStatus(e.From.String()), To: api.JobStatus(e.To.String()), AttemptID: e.AttemptID, WorkerID: e.WorkerID, Text: e.Text, Token: token})
	}
	return out
}

func viewAttempts(j *fsm.Job) api.JobAttemptList {
	log := j.AttemptLog()
	out := api.JobAttemptList{JobID: j.ID, Attempts: make([]*api.JobAttempt, 0, len(log))}
	for _, a := range log {
		out.Attempts = append(out.Attempts, &api.JobAttempt{ID: a.ID, Owner: a.Owner, WorkerID: a.WorkerID,
			StartedAt: api.Time(a.StartedAt), EndedAt: api.Time(a.EndedAt), Outcome: string(a.Outcome), Error: viewError(a.Error)})
	}
	return out
}

func viewList(jobs []*fsm.Job, next uint64) api.JobList {
	out := api.JobList{Jobs: make([]*api.Job, 0, len(jobs))}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, viewJob(j))
	}
	out.NextCursor = pageCursor(next)
	return out
}

// pageCursor is a page's nextCursor: "" (null) on the last page.
func pageCursor(next uint64) api.NullableString {
	if next == 0 {
		return ""
	}
	return api.NullableString(strconv.FormatUint(next, 10))
}

// writeJobPage writes the page viewList(jobs, next) encodes, with the same
// bytes, but a job at a time through one pooled buffer sent every
// pageChunk bytes: a page of 1,000 finished jobs is over a megabyte of
// JSON and a thousand views, which built whole would be garbage of that
// size on every page a client walks.
func writeJobPage(w http.ResponseWriter, jobs []*fsm.Job, next uint64) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(http.StatusOK)
	bp := answerBufs.Get().(*[]byte)
	b := append((*bp)[:0], `{"jobs":[`...)
	var v api.Job
	for i, j := range jobs {
		if i > 0 {
			b = append(b, ',')
		}
		viewJobInto(&v, j)
		b = v.AppendJSON(b)
		if len(b) >= pageChunk {
			_, _ = w.Write(b)
			b = b[:0]
		}
	}
	b = append(b, ']')
	b = append(api.AppendJobListEnd(b, pageCursor(next)), '\n')
	_, _ = w.Write(b)
	if cap(b) <= maxPooledAnswer {
		*bp = b
		answerBufs.Put(bp)
	}
}

// pageChunk is how much of a page is encoded before it is sent on.
const pageChunk = 32 << 10
