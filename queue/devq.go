package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// The developer queue's operations (fsm/devq.go): sessions, streams, the
// registry, tasks and their worker verbs.

// ErrUpgradeInProgress: the request needs a cluster level (fsm/level.go)
// that a node of the cluster, running an older build, does not support
// yet; nothing was proposed.
var ErrUpgradeInProgress = errors.New("a node of the cluster runs an older version that cannot apply this write; retry when every node is upgraded")

// StreamRequiredError is a claim that named no stream: nothing is claimed,
// and Queued lists the streams with queued tasks.
type StreamRequiredError struct {
	Queued []StreamCount
}

// StreamCount is a stream and how many tasks wait in it.
type StreamCount struct {
	Name   string
	Queued int
}

// Error words the refusal in the API's terms (the request's "stream"
// field): each surface words its own, and the CLI says --stream.
func (e *StreamRequiredError) Error() string {
	if len(e.Queued) == 0 {
		return "stream is required: name the stream to claim from (no stream has queued tasks)"
	}
	var b strings.Builder
	b.WriteString("stream is required: name the stream to claim from; streams with queued tasks:")
	for _, q := range e.Queued {
		fmt.Fprintf(&b, " %s (%d queued)", q.Name, q.Queued)
	}
	return b.String()
}

// devq checks that the cluster's level has the developer queue's commands.
func (s *Service) devq(ctx context.Context) error {
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return ErrUpgradeInProgress
	}
	return nil
}

func (s *Service) proposeDevq(ctx context.Context, t fsm.CommandType, cmd interface{}) (*fsm.Result, uint64, error) {
	if err := s.devq(ctx); err != nil {
		return nil, 0, err
	}
	return s.Propose(ctx, t, cmd)
}

// CreateSession starts a session.
func (s *Service) CreateSession(ctx context.Context, name, description string, actor fsm.Actor) (*fsm.Session, uint64, error) {
	if !ValidName(name) {
		return nil, 0, invalid("session name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	if len(description) > MaxTextBytes {
		return nil, 0, invalid("description is larger than %d bytes", MaxTextBytes)
	}
	res, idx, err := s.proposeDevq(ctx, fsm.CmdSessionCreate, &fsm.SessionCreateCommand{Now: s.now(), ID: "ses_" + s.cfg.NewID(),
		Name: name, Description: description, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Session, idx, nil
}

// EndSession ends a session and its streams.
func (s *Service) EndSession(ctx context.Context, name string, actor fsm.Actor) (*fsm.Session, uint64, error) {
	res, idx, err := s.proposeDevq(ctx, fsm.CmdSessionEnd, &fsm.SessionEndCommand{Now: s.now(), Name: name, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Session, idx, nil
}

// CreateStream adds a stream to an active session.
func (s *Service) CreateStream(ctx context.Context, name, session, instructions string, actor fsm.Actor) (*fsm.Stream, uint64, error) {
	if !ValidName(name) {
		return nil, 0, invalid("stream name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	if session == "" {
		return nil, 0, invalid("session is required")
	}
	if len(instructions) > MaxTextBytes {
		return nil, 0, invalid("instructions are larger than %d bytes", MaxTextBytes)
	}
	res, idx, err := s.proposeDevq(ctx, fsm.CmdStreamCreate, &fsm.StreamCreateCommand{Now: s.now(), ID: "str_" + s.cfg.NewID(),
		Name: name, Session: session, Instructions: instructions, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Stream, idx, nil
}

// EndStream ends a stream: no new tasks, and its queued ones stay unclaimed.
func (s *Service) EndStream(ctx context.Context, name string, actor fsm.Actor) (*fsm.Stream, uint64, error) {
	res, idx, err := s.proposeDevq(ctx, fsm.CmdStreamEnd, &fsm.StreamEndCommand{Now: s.now(), Name: name, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Stream, idx, nil
}

// SetRegistry puts a registry in force (a reload). The registry is checked
// whole: with an error, the one in force stays.
func (s *Service) SetRegistry(ctx context.Context, reg fsm.Registry, actor fsm.Actor) (uint64, error) {
	sort.Slice(reg.Classes, func(i, j int) bool { return reg.Classes[i].Name < reg.Classes[j].Name })
	sort.Slice(reg.Tools, func(i, j int) bool { return reg.Tools[i].Name < reg.Tools[j].Name })
	sort.Slice(reg.Scripts, func(i, j int) bool { return reg.Scripts[i].Path < reg.Scripts[j].Path })
	for i := 1; i < len(reg.Tools); i++ {
		if reg.Tools[i].Name == reg.Tools[i-1].Name {
			return 0, invalid("tool %q is defined twice", reg.Tools[i].Name)
		}
	}
	for i := 1; i < len(reg.Classes); i++ {
		if reg.Classes[i].Name == reg.Classes[i-1].Name {
			return 0, invalid("task class %q is defined twice", reg.Classes[i].Name)
		}
	}
	for i := 1; i < len(reg.Scripts); i++ {
		if reg.Scripts[i].Path == reg.Scripts[i-1].Path {
			return 0, invalid("script %q is indexed twice", reg.Scripts[i].Path)
		}
	}
	// Checked here, before proposing, not in the state machine's apply: a
	// node of an older version would apply the same entry without the
	// check, and the replicas would disagree (the purgers clamp a larger
	// stored value instead, fsm.Registry.Retention).
	if reg.PurgeDays < 0 || reg.PurgeDays > fsm.MaxPurgeDays {
		return 0, invalid("purge_older_than_days must be 0 to %d days (0: the default, %d)", fsm.MaxPurgeDays, fsm.DefaultPurgeDays)
	}
	_, idx, err := s.proposeDevq(ctx, fsm.CmdRegistrySet, &fsm.RegistrySetCommand{Now: s.now(), Registry: reg, Actor: actor})
	return idx, err
}

// maxTaskTimeout caps a task's timeout (seconds): a week.
const maxTaskTimeout = 7 * 24 * 3600

// EnqueueInput is a new task.
type EnqueueInput struct {
	Stream         string
	ToolName       string
	Payload        json.RawMessage
	Timeout        int64 // seconds; 0: the tool's or its class's
	IdempotencyKey string
	Actor          fsm.Actor
}

// Enqueue adds a task to a stream (created false: an earlier enqueue with
// the same idempotency key made it).
func (s *Service) Enqueue(ctx context.Context, in EnqueueInput) (j *fsm.Job, created bool, index uint64, err error) {
	if in.Stream == "" || in.ToolName == "" {
		return nil, false, 0, invalid("stream and tool_name are required")
	}
	if in.Timeout < 0 || in.Timeout > maxTaskTimeout {
		return nil, false, 0, invalid("timeout must be between 1 and %d seconds (0: the tool's)", maxTaskTimeout)
	}
	if len(in.Payload) > 0 && !json.Valid(in.Payload) {
		return nil, false, 0, invalid("payload must be JSON")
	}
	if len(in.IdempotencyKey) > maxKeyBytes {
		return nil, false, 0, invalid("idempotency key is longer than %d bytes", maxKeyBytes)
	}
	if in.IdempotencyKey != "" {
		if j := s.state.Peek().JobByIdempotencyKey(in.IdempotencyKey); j != nil {
			return j, false, j.ModifyIndex, nil
		}
	}
	res, idx, err := s.proposeDevq(ctx, fsm.CmdTaskCreate, &fsm.TaskCreateCommand{Now: s.now(), ID: "tsk_" + s.cfg.NewID(),
		Stream: in.Stream, ToolName: in.ToolName, Timeout: in.Timeout, Payload: in.Payload,
		IdempotencyKey: in.IdempotencyKey, Actor: in.Actor})
	if err != nil {
		return nil, false, idx, err
	}
	return res.Job, !res.Duplicate, idx, nil
}

// Requeue clones a failed task under a new id, into stream if set.
func (s *Service) Requeue(ctx context.Context, id, stream string, actor fsm.Actor) (*fsm.Job, uint64, error) {
	res, idx, err := s.proposeDevq(ctx, fsm.CmdTaskCreate, &fsm.TaskCreateCommand{Now: s.now(), ID: "tsk_" + s.cfg.NewID(),
		Stream: stream, ClonedFrom: id, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Job, idx, nil
}

// activeStream returns the registered stream name, refusing an ended one.
func activeStream(r *fsm.Reader, name string) (*fsm.Stream, error) {
	st, err := r.Stream(name)
	if err != nil {
		return nil, err
	}
	if st.Ended() {
		return st, fmt.Errorf("stream %s: %w (its queued tasks stay, unclaimed)", name, fsm.ErrStreamEnded)
	}
	return st, nil
}

// Peek returns the task a claim of stream would take next (nil: none),
// changing nothing. With a wait it waits up to that long (capped by
// Config.MaxClaimWait) for a task to be queued, on a watch of the stream's
// lane: a watcher learns of a task as soon as its entry applies, and an
// idle one costs the cluster one open request.
func (s *Service) Peek(ctx context.Context, stream string, wait time.Duration) (*fsm.Job, *fsm.Stream, error) {
	wctx, cancel := context.WithTimeout(ctx, min(max(wait, 0), s.cfg.MaxClaimWait))
	defer cancel()
	defer context.AfterFunc(s.draining, cancel)()
	for {
		st, err := activeStream(s.state.Read(), stream)
		if err != nil {
			return nil, st, err
		}
		j, ws := s.state.Peek().NextClaimable([]string{stream}, nil, nil, "")
		if j != nil {
			return j, st, nil
		}
		if err := ws.WatchCtx(wctx); err != nil {
			return nil, st, ctx.Err()
		}
	}
}

// ClaimTask claims the next task of stream for caller c as worker
// workerID ("": the worker its token is bound to), nil when none came
// within wait, and returns the stream for its instructions. Without a
// stream it claims nothing and answers a *StreamRequiredError naming the
// streams in c's scope with tasks to take.
//
// A claimID makes the claim repeatable (ClaimNextInput.ClaimID).
func (s *Service) ClaimTask(ctx context.Context, c Caller, stream, workerID string, wait time.Duration, claimID string) (*fsm.Job, *fsm.Stream, uint64, error) {
	actor := c.Actor(workerID)
	r := s.state.Read()
	if stream == "" {
		return nil, nil, 0, streamRequired(r, c)
	}
	st, err := activeStream(r, stream)
	if err != nil {
		return nil, st, 0, err
	}
	j, idx, err := s.ClaimNext(ctx, ClaimNextInput{Streams: []string{stream}, Actor: actor, Wait: wait, ClaimID: claimID})
	return j, st, idx, err
}

// streamRequired is the answer to a task claim that named no stream: the
// streams the caller may claim from with tasks it could take now, that
// is queued and not held back by their key's rate (counts from the
// stream statistics: no walk of the jobs).
func streamRequired(r *fsm.Reader, c Caller) error {
	e := &StreamRequiredError{}
	role := c.ViewRole()
	counts := map[string]int{}
	for _, sc := range r.StreamCountsFor(role) {
		if sc.State == fsm.StateQueued && c.InScope(sc.Stream) {
			counts[sc.Stream] = sc.N
		}
	}
	for name, n := range r.RateWaiting(role, c.InScope) {
		counts[name] -= n
	}
	for _, st := range r.Streams("") {
		if n := counts[st.Name]; n > 0 && !st.Ended() {
			e.Queued = append(e.Queued, StreamCount{Name: st.Name, Queued: n})
		}
	}
	return e
}

// TaskFilter selects tasks.
type TaskFilter struct {
	fsm.ListFilter
	// Status, if set, is one of the developer queue's statuses (queued,
	// running, succeeded, failed).
	Status string
	Stale  bool
}

// Tasks pages through tasks; Stale keeps running tasks past their timeout.
func (s *Service) Tasks(c Caller, f TaskFilter) ([]*fsm.Job, uint64, error) {
	lf := f.ListFilter
	states := map[string][]fsm.State{"queued": {fsm.StateQueued}, "running": {fsm.StateRunning},
		"succeeded": {fsm.StateDone}, "failed": {fsm.StateFailed, fsm.StateDead}}
	if f.Status != "" {
		want, ok := states[f.Status]
		if !ok {
			return nil, 0, invalid("status must be one of queued, running, succeeded, failed")
		}
		lf.States = want
	}
	if f.Stale {
		if f.Status != "" && f.Status != "running" {
			return nil, 0, invalid("only running tasks can be stale")
		}
		lf.State = fsm.StateRunning
	}
	now := s.now()
	r := s.state.Read()
	lf.Visible = func(j *fsm.Job) bool {
		if !j.IsTask() || !c.SeesJob(r, j) {
			return false
		}
		return !f.Stale || Stale(j, now)
	}
	return r.List(s.bounded(lf))
}

// Task reads one task.
func (s *Service) Task(c Caller, id string) (*fsm.Job, *fsm.Stream, error) {
	r := s.state.Peek()
	j, err := Lookup(r, c, id)
	if err != nil {
		return nil, nil, err
	}
	if !j.IsTask() {
		return nil, nil, fmt.Errorf("task %s: %w (it is a job: GET /jobs/%s)", id, fsm.ErrNotFound, id)
	}
	st, _ := r.Stream(j.Stream)
	return j, st, nil
}

// Stale reports whether running task j is past its timeout at now: its
// lease (twice the timeout) has less than one timeout left.
func Stale(j *fsm.Job, now int64) bool {
	return j.IsTask() && j.State == fsm.StateRunning && j.Lease != nil && now > j.Lease.ExpiresAt-j.Extra().Timeout*int64(time.Second)
}

// Now is the service's clock, for views that depend on it (stale).
func (s *Service) Now() int64 { return s.now() }

// PurgeTasks deletes the finished tasks older than before (unix nanos),
// entry by entry, and returns how many it deleted.
func (s *Service) PurgeTasks(ctx context.Context, before int64) (int, error) {
	if err := s.devq(ctx); err != nil {
		return 0, err
	}
	n := 0
	for {
		res, _, err := s.Propose(ctx, fsm.CmdTaskPurge, &fsm.TaskPurgeCommand{Now: s.now(), Before: before, Max: sweepBatch})
		if err != nil {
			return n, err
		}
		n += len(res.Jobs)
		if len(res.Jobs) < sweepBatch {
			return n, nil
		}
	}
}

// Registry is the registry in force (nil: none loaded).
func (s *Service) Registry() *fsm.Registry { return s.state.Read().Registry() }

// Sessions lists the sessions.
func (s *Service) Sessions() []*fsm.Session { return s.state.Read().Sessions() }

// Streams lists the streams of session (all when "").
func (s *Service) Streams(session string) []*fsm.Stream { return s.state.Read().Streams(session) }

// Stream reads one stream.
func (s *Service) Stream(name string) (*fsm.Stream, error) { return s.state.Read().Stream(name) }

// StreamCounts counts each stream's queued and running jobs that a caller
// of role may see (from the per-stream counts: no walk of the jobs).
func (s *Service) StreamCounts(caller Caller) map[string][2]int {
	out := map[string][2]int{}
	for _, sc := range s.state.Read().StreamCountsFor(caller.ViewRole()) {
		if !caller.InScope(sc.Stream) {
			continue
		}
		c := out[sc.Stream]
		switch sc.State {
		case fsm.StateQueued:
			c[0] = sc.N
		case fsm.StateRunning:
			c[1] = sc.N
		default:
			continue
		}
		out[sc.Stream] = c
	}
	return out
}

// TaskCounts counts tasks by state (from the per-stream counts: no walk
// of the jobs).
func (s *Service) TaskCounts() map[fsm.State]int { return s.state.Read().TaskCounts() }
