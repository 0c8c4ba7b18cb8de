package httpapi

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// jobView is the v0 JSON shape of a job (docs/api.md).
type jobView struct {
	ID             string          `json:"id"`
	Stream         string          `json:"stream"`
	Target         *string         `json:"target"`
	Payload        json.RawMessage `json:"payload"`
	Status         fsm.State       `json:"status"`
	Attempts       int             `json:"attempts"`
	MaxAttempts    int             `json:"maxAttempts"`
	LeaseSeconds   int64           `json:"leaseSeconds,omitempty"`
	TaskClass      string          `json:"taskClass,omitempty"`
	ClaimedBy      string          `json:"claimedBy,omitempty"`
	WorkerID       string          `json:"workerId,omitempty"`
	AttemptID      string          `json:"attemptId,omitempty"`
	LeaseToken     string          `json:"leaseToken,omitempty"`
	LeaseExpiresAt string          `json:"leaseExpiresAt,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *fsm.JobError   `json:"error,omitempty"`
	Stdout         string          `json:"stdout,omitempty"`
	Stderr         string          `json:"stderr,omitempty"`
	Comments       []commentView   `json:"comments"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
	StartedAt      string          `json:"startedAt,omitempty"`
	FinishedAt     string          `json:"finishedAt,omitempty"`
	CreateIndex    uint64          `json:"createIndex"`
	ModifyIndex    uint64          `json:"modifyIndex"`
}

type commentView struct {
	At    string `json:"at"`
	Actor string `json:"actor"`
	Text  string `json:"text"`
}

type eventView struct {
	Seq       int       `json:"seq"`
	At        string    `json:"at"`
	Type      string    `json:"type"`
	Actor     string    `json:"actor"`
	From      fsm.State `json:"from,omitempty"`
	To        fsm.State `json:"to,omitempty"`
	AttemptID string    `json:"attemptId,omitempty"`
	WorkerID  string    `json:"workerId,omitempty"`
	Text      string    `json:"text,omitempty"`
}

type attemptView struct {
	ID        string        `json:"id"`
	Owner     string        `json:"owner"`
	WorkerID  string        `json:"workerId,omitempty"`
	StartedAt string        `json:"startedAt"`
	EndedAt   string        `json:"endedAt,omitempty"`
	Outcome   fsm.Outcome   `json:"outcome"`
	Error     *fsm.JobError `json:"error,omitempty"`
}

// ts renders a leader-stamped unix-nanosecond time; zero is "".
func ts(n int64) string {
	if n == 0 {
		return ""
	}
	return time.Unix(0, n).UTC().Format(time.RFC3339Nano)
}

func viewJob(j *fsm.Job) *jobView {
	v := &jobView{
		ID: j.ID, Stream: j.Stream, Payload: j.Payload, Status: j.State,
		Attempts: j.Attempts, MaxAttempts: j.MaxAttempts, LeaseSeconds: j.LeaseSeconds, TaskClass: j.TaskClass,
		Result: j.Result, Error: j.Error, Stdout: j.Stdout, Stderr: j.Stderr, IdempotencyKey: j.IdempotencyKey,
		CreatedAt: ts(j.CreatedAt), UpdatedAt: ts(j.UpdatedAt), StartedAt: ts(j.StartedAt), FinishedAt: ts(j.FinishedAt),
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex,
		Comments: make([]commentView, 0, len(j.Comments)),
	}
	if j.Target != "" {
		t := j.Target
		v.Target = &t
	}
	if l := j.Lease; l != nil {
		v.ClaimedBy, v.WorkerID, v.AttemptID, v.LeaseExpiresAt = l.Owner, l.WorkerID, l.AttemptID, ts(l.ExpiresAt)
	}
	for _, c := range j.Comments {
		v.Comments = append(v.Comments, commentView{At: ts(c.At), Actor: c.Actor, Text: c.Text})
	}
	return v
}

func viewEvents(j *fsm.Job) []eventView {
	out := make([]eventView, 0, len(j.History))
	for _, e := range j.History {
		out = append(out, eventView{Seq: e.Seq, At: ts(e.At), Type: e.Type, Actor: e.Actor, From: e.From, To: e.To,
			AttemptID: e.AttemptID, WorkerID: e.WorkerID, Text: e.Text})
	}
	return out
}

func viewAttempts(j *fsm.Job) []attemptView {
	out := make([]attemptView, 0, len(j.AttemptLog))
	for _, a := range j.AttemptLog {
		out = append(out, attemptView{ID: a.ID, Owner: a.Owner, WorkerID: a.WorkerID, StartedAt: ts(a.StartedAt),
			EndedAt: ts(a.EndedAt), Outcome: a.Outcome, Error: a.Error})
	}
	return out
}

type listView struct {
	Jobs       []*jobView `json:"jobs"`
	NextCursor *string    `json:"nextCursor"`
}

func viewList(jobs []*fsm.Job, next uint64) listView {
	out := listView{Jobs: make([]*jobView, 0, len(jobs))}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, viewJob(j))
	}
	if next != 0 {
		c := strconv.FormatUint(next, 10)
		out.NextCursor = &c
	}
	return out
}
