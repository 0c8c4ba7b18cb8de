package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func (h *harness) step(op TaskOp, j *Job) *Result {
	h.t.Helper()
	ref := LeaseRef{JobID: j.ID}
	if j.Lease != nil {
		ref.AttemptID, ref.Token = j.Lease.AttemptID, j.Lease.Token
	}
	return h.apply(CmdTaskStep, &TaskStepCommand{Op: op, Now: h.now, Ref: ref, Actor: left, Result: []byte(`{"ok":true}`),
		Error: JobError{Message: "broke"}, Reason: "not mine"})
}

func wantRefused(t *testing.T, r *Result, from, to TaskState) {
	t.Helper()
	var te *TransitionError
	if !errors.As(r.Err, &te) || !errors.Is(r.Err, ErrIllegalTransition) || te.From != from || te.To != to {
		t.Fatalf("want illegal %s → %s, got %v (%+v)", from, to, r.Err, te)
	}
}

// The seed's state machine: claimed → running only by an explicit start,
// complete only from running, nothing out of a finished task; a refusal
// names the seed's from and to and changes nothing; repeats are answered
// without a second transition.
func TestTaskStateMachine(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{})
	if s := j.TaskState(); s != TaskQueued {
		t.Fatalf("new job: %s", s)
	}
	j = h.claim(j.ID, left).Job
	if s := j.TaskState(); s != TaskClaimed {
		t.Fatalf("claimed job: %s", s)
	}
	before := h.f.AppliedIndex()
	wantRefused(t, h.step(TaskComplete, j), TaskClaimed, TaskSucceeded)
	if got := h.job(j.ID); got.ModifyIndex > before || got.State != StateRunning {
		t.Fatalf("a refused complete changed the job: %+v", got)
	}
	r := h.step(TaskStart, j)
	if r.Err != nil || r.Job.TaskState() != TaskRunning || r.Job.CurrentAttempt().RunningAt != h.now {
		t.Fatalf("start: %+v", r)
	}
	if r := h.step(TaskStart, j); r.Err != nil || !r.Duplicate || r.Job.ModifyIndex != h.idx-1 {
		t.Fatalf("repeated start: %+v", r)
	}
	done := h.step(TaskComplete, j)
	if done.Err != nil || done.Job.TaskState() != TaskSucceeded {
		t.Fatalf("complete: %+v", done)
	}
	if r := h.step(TaskComplete, j); r.Err != nil || !r.Duplicate {
		t.Fatalf("repeated complete: %+v", r)
	}
	wantRefused(t, h.step(TaskRelease, j), TaskSucceeded, TaskReleased)
	wantRefused(t, h.step(TaskStart, j), TaskSucceeded, TaskRunning)
	wantRefused(t, h.step(TaskFail, j), TaskSucceeded, TaskFailed)
	if got := h.job(j.ID); got.ModifyIndex != done.Job.ModifyIndex {
		t.Fatal("a refused step changed a finished task")
	}
	for from, tos := range map[TaskState][]TaskState{TaskSucceeded: {TaskReleased, TaskRunning}, TaskClaimed: {TaskSucceeded}} {
		for _, to := range tos {
			if TaskTransitionLegal(from, to) {
				t.Fatalf("%s → %s is legal", from, to)
			}
		}
	}

	// claimed → released → claimed, and a release does not use up an attempt.
	k := h.claim(h.create(CreateCommand{MaxAttempts: 1}).ID, left).Job
	if r := h.step(TaskRelease, k); r.Err != nil || r.Job.TaskState() != TaskReleased {
		t.Fatalf("release: %+v", r)
	}
	k = h.claim(k.ID, right).Job
	if k == nil || k.TaskState() != TaskClaimed {
		t.Fatalf("released → claimed: %+v", k)
	}
	// claimed → failed (no requeue: the seed's failed is final).
	if r := h.step(TaskFail, k); r.Err != nil || r.Job.State != StateFailed || r.Job.TaskState() != TaskFailed {
		t.Fatalf("fail: %+v", r)
	}
	// A stale lease is the core's refusal, not a transition.
	m := h.claim(h.create(CreateCommand{}).ID, left).Job
	stale := *m
	stale.Lease = &Lease{AttemptID: m.Lease.AttemptID, Token: "not-it"}
	if r := h.step(TaskStart, &stale); !errors.Is(r.Err, ErrStaleLease) {
		t.Fatalf("stale start: %v", r.Err)
	}
}

// The reaper's side: a lease that runs out with attempts left sends the
// task back (released); on its last attempt it ends failed_timeout. A
// task whose worker was declared dead is released at once.
func TestTaskTimeouts(t *testing.T) {
	h := newHarness(t)
	retry := h.claim(h.create(CreateCommand{MaxAttempts: 2}).ID, left).Job
	last := h.claim(h.create(CreateCommand{MaxAttempts: 1}).ID, left).Job
	h.step(TaskStart, last)
	h.now += lease + 1
	r := h.apply(CmdReap, &ReapCommand{Now: h.now, Max: 10})
	if r.Err != nil || len(r.Jobs) != 2 {
		t.Fatalf("reap: %+v", r)
	}
	if s := h.job(retry.ID).TaskState(); s != TaskReleased {
		t.Fatalf("timed out with an attempt left: %s", s)
	}
	if j := h.job(last.ID); j.State != StateDead || j.TaskState() != TaskFailedTimeout {
		t.Fatalf("timed out on its last attempt: %s / %s", j.State, j.TaskState())
	}

	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g", Address: "http://g", Capacity: 4, Actor: head})
	h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "w", Gateway: "g", Capacity: 1, Actor: head})
	w := Actor{Role: "left_claw", WorkerID: "w"}
	held := h.claim(h.create(CreateCommand{}).ID, w).Job
	h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{ID: "w", Health: HealthDead}}})
	if s := h.job(held.ID).TaskState(); s != TaskReleased {
		t.Fatalf("dead worker's task: %s", s)
	}
}

func feedOf(t *testing.T, f *FSM) []*FeedEvent {
	t.Helper()
	evs, _, _, _ := f.Read().Feed(0, FeedRetention)
	return evs
}

// The feed records once turned on, numbers events 1, 2, 3… in apply order,
// leaves heartbeats out, carries registry changes, and survives a snapshot
// (version 5, with the attempts' start times).
func TestFeed(t *testing.T) {
	h := newHarness(t)
	h.create(CreateCommand{})
	if evs := feedOf(t, h.f); len(evs) != 0 || h.f.Read().FeedOn() {
		t.Fatalf("feed recorded before it was on: %d", len(evs))
	}
	if v := snapVersion(t, writeSnap(t, h.f)); v != 2 {
		t.Fatalf("feed off: snapshot version %d", v)
	}
	sig := h.f.Read().FeedSignal()
	h.apply(CmdFeedOn, &FeedOnCommand{Now: h.now})
	j := h.create(CreateCommand{Stream: "s"})
	select {
	case <-sig:
	default:
		t.Fatal("a fed event did not wake the feed's readers")
	}
	j = h.claim(j.ID, left).Job
	h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID}, Actor: left, LeaseNanos: lease})
	h.step(TaskStart, j)
	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g", Address: "http://g", Capacity: 1, Actor: head})
	h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: "g", Health: HealthSuspect}}})
	h.step(TaskComplete, h.job(j.ID))

	evs := feedOf(t, h.f)
	want := []struct{ kind, typ string }{{FeedJob, EventCreated.String()}, {FeedJob, EventClaimed.String()}, {FeedJob, EventStarted.String()},
		{FeedGateway, FeedRegistered}, {FeedGateway, FeedHealth}, {FeedJob, EventCompleted.String()}}
	if len(evs) != len(want) {
		t.Fatalf("feed has %d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, w := range want {
		if e := evs[i]; e.Seq != uint64(i+1) || e.Kind != w.kind || e.Type != w.typ {
			t.Fatalf("event %d: %+v, want %s %s", i, e, w.kind, w.typ)
		}
	}
	if e := evs[5]; e.ID != j.ID || e.Stream != "s" || e.Task != TaskSucceeded || e.Index != h.idx {
		t.Fatalf("complete event: %+v", e)
	}
	if e := evs[4]; e.From != HealthHealthy || e.To != HealthSuspect {
		t.Fatalf("health event: %+v", e)
	}
	if after, _, latest, _ := h.f.Read().Feed(4, 10); len(after) != 2 || after[0].Seq != 5 || latest != 6 {
		t.Fatalf("feed after 4: %d events, latest %d", len(after), latest)
	}

	raw := writeSnap(t, h.f)
	if v := snapVersion(t, raw); v != 5 {
		t.Fatalf("feed on: snapshot version %d", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if stateHash(t, f2) != stateHash(t, h.f) || len(feedOf(t, f2)) != 6 || !f2.Read().FeedOn() {
		t.Fatal("restored feed differs")
	}
	if got, _ := f2.Read().Job(j.ID); got.AttemptLog()[0].RunningAt != h.now {
		t.Fatalf("restored attempt lost its start: %+v", got.AttemptLog()[0])
	}
}

// The feed keeps at least the latest FeedRetention events, dropping whole
// blocks; numbering goes on, and a snapshot holds the same.
func TestFeedRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 65,000 entries")
	}
	h := newHarness(t)
	h.apply(CmdFeedOn, &FeedOnCommand{Now: h.now})
	for range FeedRetention + 300 {
		h.create(CreateCommand{})
	}
	// The oldest block of 256 went once the events after it reached the
	// retention.
	evs, oldest, latest, _ := h.f.Read().Feed(0, 5)
	if oldest != 257 || latest != FeedRetention+300 || len(evs) != 5 || evs[0].Seq != 257 || evs[4].Seq != 261 {
		t.Fatalf("oldest %d latest %d first %d", oldest, latest, evs[0].Seq)
	}
	if evs, _, _, _ := h.f.Read().Feed(latest-1, 5); len(evs) != 1 || evs[0].Seq != latest {
		t.Fatalf("the last event: %+v", evs)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(writeSnap(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	if _, o, l, _ := f2.Read().Feed(0, 1); o != 257 || l != latest {
		t.Fatalf("restored: oldest %d latest %d", o, l)
	}
}

func writeSnap(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, _ := f.Snapshot()
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// The feed's memory is its retention: blocks it dropped do not stay
// reachable through its array, and a view taken before the drops still
// reads every event it held.
func TestFeedHoldsOnlyItsRetention(t *testing.T) {
	var l, view feedLog
	for s := uint64(1); s <= 4*FeedRetention; s++ {
		l.add(&feedRec{ID: "x", Index: s})
		if s == FeedRetention+5 {
			view = l // what a publish copies
		}
		if held := len(l.blocks) + l.dropped; held > FeedRetention/feedChunk*9/8+2 {
			t.Fatalf("after %d events the feed's array holds %d blocks, its retention is %d", s, held, FeedRetention/feedChunk)
		}
	}
	for s := view.oldest(); s <= view.latest; s++ {
		if e := view.get(s); e.Index != s {
			t.Fatalf("the old view lost event %d", s)
		}
	}
}
