package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomScheduleCommand is one schedule command of the random log: sets,
// pauses, fires (stale ones now and then) and deletes of a few schedules.
func randomScheduleCommand(rng *rand.Rand, now int64, i int, ids []string) []byte {
	name := []string{"s1", "s2", "s3"}[rng.IntN(3)]
	switch rng.IntN(6) {
	case 0:
		s := Schedule{Name: name, Template: &CreateCommand{Stream: []string{"a", "b"}[rng.IntN(2)], Payload: []byte(`{"s":1}`),
			Priority: rng.IntN(5), Requires: [][]string{nil, {"gpu"}}[rng.IntN(2)]},
			Overlap: []string{OverlapSkip, OverlapQueue, OverlapAllow, "bogus"}[rng.IntN(4)], Catchup: CatchupAll, CatchupWindow: 60, Note: "n"}
		if rng.IntN(2) == 0 {
			s.Cron, s.Timezone = "*/5 * * * * *", "Europe/Paris"
		} else {
			s.Interval = int64(1 + rng.IntN(10))
		}
		s.Paused = rng.IntN(5) == 0
		return MustEncode(CmdScheduleSet, &ScheduleSetCommand{Now: now, Schedule: &s, Replace: rng.IntN(3) == 0, Actor: head})
	case 1:
		return MustEncode(CmdSchedulePause, &SchedulePauseCommand{Now: now, Name: name, Pause: rng.IntN(2) == 0, Actor: head})
	case 2:
		return MustEncode(CmdScheduleDelete, &ScheduleDeleteCommand{Now: now, Name: name, Actor: head})
	case 3:
		return MustEncode(CmdScheduleFire, &ScheduleFireCommand{Now: now, Name: name, Through: now, ID: fmt.Sprintf("st%d", i), Trigger: true})
	default:
		// The tick up to now (a stale fire now and then: its tick is in the
		// past), with a job or skipped.
		c := &ScheduleFireCommand{Now: now, Name: name, Through: now - int64(rng.IntN(3))*30e9, Dropped: int64(rng.IntN(2))}
		if rng.IntN(4) != 0 {
			c.ID = fmt.Sprintf("sf%d", i)
		}
		return MustEncode(CmdScheduleFire, c)
	}
}

func (h *harness) setSchedule(s Schedule) *Result {
	h.t.Helper()
	if s.Template == nil {
		s.Template = &CreateCommand{Stream: "sched", Payload: []byte(`{"x":1}`)}
	}
	if s.Overlap == "" {
		s.Overlap = OverlapAllow
	}
	if s.Catchup == "" {
		s.Catchup = CatchupAll
	}
	if s.Cron == "" && s.Interval == 0 {
		s.Interval = 10
	}
	return h.apply(CmdScheduleSet, &ScheduleSetCommand{Now: h.now, Schedule: &s, Actor: head})
}

func (h *harness) fire(name string, tick int64) *Result {
	h.t.Helper()
	return h.apply(CmdScheduleFire, &ScheduleFireCommand{Now: h.now, Name: name, Through: tick, ID: h.nextID("sj")})
}

func TestScheduleNeedsLevel(t *testing.T) {
	h := newHarness(t)
	if r := h.setSchedule(Schedule{Name: "a"}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("set below LevelPolicies: %v", r.Err)
	}
}

// A fire creates its tick's job and advances the last tick in one entry;
// a fire at or before the last tick changes nothing; the job carries the
// tick in its idempotency key and the schedule's name.
func TestScheduleFireIsAtomicAndRefusesStaleTicks(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	mustOK(t, h.setSchedule(Schedule{Name: "n"}))
	h.now += 30e9
	t1, t2 := h.now-20e9, h.now-10e9
	for k, tick := range []int64{t1, t2} {
		r := h.fire("n", tick)
		mustOK(t, r)
		j := r.Job
		if j == nil || r.Schedule.LastTick != tick || r.Schedule.Runs != int64(k+1) || r.Schedule.LastJob() != j.ID {
			t.Fatalf("fire %d: job %v schedule %+v", k, j, r.Schedule)
		}
		if j.IdempotencyKey != ScheduleKey("n", tick, false) || j.Extra().Schedule != "n" || j.Stream != "sched" {
			t.Fatalf("job %d: key %q schedule %q stream %q", k, j.IdempotencyKey, j.Extra().Schedule, j.Stream)
		}
	}
	// Again (a new leader that did not see the fire): refused, nothing made.
	before, _ := h.f.Read().Counts()
	last := h.f.Read().Schedule("n")
	if r := h.fire("n", t2); !errors.Is(r.Err, ErrStaleTick) {
		t.Fatalf("a second fire of the same tick: %v", r.Err)
	}
	if r := h.fire("n", t1); !errors.Is(r.Err, ErrStaleTick) {
		t.Fatalf("a fire of an earlier tick: %v", r.Err)
	}
	after, _ := h.f.Read().Counts()
	if fmt.Sprint(before) != fmt.Sprint(after) || h.f.Read().Schedule("n") != last {
		t.Fatalf("a refused fire changed the state: %v -> %v", before, after)
	}
	// A tick whose job exists already (its key taken) is that job.
	h.now += 10e9
	t3 := h.now
	pre := h.create(CreateCommand{IdempotencyKey: ScheduleKey("n", t3, false)})
	r := h.fire("n", t3)
	mustOK(t, r)
	if len(r.Jobs) != 0 || r.Schedule.LastJob() != pre.ID || r.Schedule.LastTick != t3 {
		t.Fatalf("duplicate tick: %d jobs, last job %q", len(r.Jobs), r.Schedule.LastJob())
	}
	// Late ticks passed over (catch-up) count as skipped, as does a tick
	// fired without a job.
	h.now += 60e9
	r = h.apply(CmdScheduleFire, &ScheduleFireCommand{Now: h.now, Name: "n", Through: h.now, Dropped: 5})
	mustOK(t, r)
	if r.Schedule.Skipped != 6 || r.Schedule.LastTick != h.now || r.Job != nil {
		t.Fatalf("skipped %d", r.Schedule.Skipped)
	}
}

func TestSchedulePauseAndResume(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	mustOK(t, h.setSchedule(Schedule{Name: "p"}))
	h.now += 5e9
	r := h.apply(CmdSchedulePause, &SchedulePauseCommand{Now: h.now, Name: "p", Pause: true, Actor: head})
	mustOK(t, r)
	if !r.Schedule.Paused {
		t.Fatal("not paused")
	}
	h.now += 60e9
	if r := h.fire("p", h.now-1e9); r.Err == nil {
		t.Fatal("a paused schedule fired")
	}
	// A trigger makes a job while paused.
	tr := h.apply(CmdScheduleFire, &ScheduleFireCommand{Now: h.now, Name: "p", Through: h.now, ID: "trig", Trigger: true})
	mustOK(t, tr)
	if len(tr.Jobs) != 1 || tr.Jobs[0].IdempotencyKey != ScheduleKey("p", h.now, true) || tr.Schedule.LastTick != 0 {
		t.Fatalf("trigger: %+v", tr.Schedule)
	}
	resumeAt := h.now
	r = h.apply(CmdSchedulePause, &SchedulePauseCommand{Now: h.now, Name: "p", Pause: false, Actor: head})
	mustOK(t, r)
	if r.Schedule.Paused || r.Schedule.Anchor != resumeAt {
		t.Fatalf("resume: %+v", r.Schedule)
	}
	// The ticks of the pause are gone: one before the resume is refused.
	if r := h.fire("p", resumeAt-1e9); !errors.Is(r.Err, ErrStaleTick) {
		t.Fatalf("a tick of the pause: %v", r.Err)
	}
	h.now += 10e9
	mustOK(t, h.fire("p", h.now))
}

// Overlap skip makes no job while the previous one is unfinished; queue
// makes one that waits for it; allow makes a claimable one.
func TestScheduleOverlap(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	for _, o := range []string{OverlapSkip, OverlapQueue, OverlapAllow} {
		mustOK(t, h.setSchedule(Schedule{Name: o, Overlap: o, Template: &CreateCommand{Stream: o, Payload: []byte(`1`)}}))
	}
	h.now += 10e9
	first := map[string]*Job{}
	for _, o := range []string{OverlapSkip, OverlapQueue, OverlapAllow} {
		r := h.fire(o, h.now)
		mustOK(t, r)
		first[o] = r.Job
	}
	h.now += 10e9
	// skip, two ticks: neither makes a job.
	mustOK(t, h.fire(OverlapSkip, h.now-5e9))
	r := h.fire(OverlapSkip, h.now)
	mustOK(t, r)
	if len(r.Jobs) != 0 || r.Schedule.Skipped != 2 || r.Schedule.LastTick != h.now {
		t.Fatalf("skip: %d jobs, skipped %d", len(r.Jobs), r.Schedule.Skipped)
	}
	r = h.fire(OverlapQueue, h.now)
	mustOK(t, r)
	q := r.Job
	if q.Extra().DepsPending != 1 || q.Extra().DependsOn[0] != first[OverlapQueue].ID {
		t.Fatalf("queue: the second job waits for nothing: %+v", q.Extra())
	}
	r = h.fire(OverlapAllow, h.now)
	mustOK(t, r)
	if a := r.Job; a.Extra().DepsPending != 0 {
		t.Fatal("allow: the second job waits")
	}
	// Once the first skip job ends, the next tick makes one.
	c := h.claim(first[OverlapSkip].ID, left)
	mustOK(t, c)
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: c.Job.ID}, Actor: left, Result: []byte(`1`)}))
	h.now += 10e9
	r = h.fire(OverlapSkip, h.now)
	mustOK(t, r)
	if len(r.Jobs) != 1 {
		t.Fatal("skip: no job after the previous one finished")
	}
}

func TestScheduleSetDeleteAndBounds(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	mustOK(t, h.setSchedule(Schedule{Name: "d"}))
	if r := h.setSchedule(Schedule{Name: "d"}); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("a second set: %v", r.Err)
	}
	if r := h.setSchedule(Schedule{Name: "x", Cron: "* * * * *", Interval: 5}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("cron and interval: %v", r.Err)
	}
	if r := h.setSchedule(Schedule{Name: "x", Overlap: "sometimes"}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("bad overlap: %v", r.Err)
	}
	h.now += 10e9
	mustOK(t, h.fire("d", h.now))
	// Replace keeps the runs and the last tick.
	rep := h.apply(CmdScheduleSet, &ScheduleSetCommand{Now: h.now, Replace: true, Actor: head, Schedule: &Schedule{Name: "d", Interval: 60,
		Overlap: OverlapSkip, Catchup: CatchupNone, Template: &CreateCommand{Payload: []byte(`2`)}}})
	mustOK(t, rep)
	if rep.Schedule.Runs != 1 || rep.Schedule.LastTick != h.now || rep.Schedule.Interval != 60 {
		t.Fatalf("replace: %+v", rep.Schedule)
	}
	mustOK(t, h.apply(CmdScheduleDelete, &ScheduleDeleteCommand{Now: h.now, Name: "d", Actor: head}))
	if h.f.Read().Schedule("d") != nil {
		t.Fatal("deleted schedule still there")
	}
	if r := h.apply(CmdScheduleDelete, &ScheduleDeleteCommand{Now: h.now, Name: "d", Actor: head}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("delete of nothing: %v", r.Err)
	}
	if r := h.fire("d", h.now+1e9); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("fire of a deleted schedule: %v", r.Err)
	}
	// The recent list is bounded.
	mustOK(t, h.setSchedule(Schedule{Name: "r"}))
	for range ScheduleRecent + 5 {
		h.now += 10e9
		mustOK(t, h.fire("r", h.now))
	}
	if s := h.f.Read().Schedule("r"); len(s.Recent) != ScheduleRecent || s.Runs != ScheduleRecent+5 {
		t.Fatalf("recent %d runs %d", len(s.Recent), s.Runs)
	}
}

// A schedule survives a snapshot whole.
func TestScheduleSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	mustOK(t, h.apply(CmdFeedOn, &FeedOnCommand{Now: h.now}))
	h.raiseLevel()
	mustOK(t, h.setSchedule(Schedule{Name: "snap", Cron: "0 * * * * *", Timezone: "Asia/Tokyo", Note: "n",
		Template: &CreateCommand{Stream: "s", Payload: []byte(`{"a":1}`), Priority: 4, MaxAttempts: 2}}))
	h.now += 60e9
	mustOK(t, h.fire("snap", h.now))
	raw := writeSnapshot(t, h.f)
	if want, got := dumpState(h.f), restoreDump(t, raw); want != got {
		t.Fatalf("the restored state differs:\n%s", firstDiff(want, got))
	}
}
