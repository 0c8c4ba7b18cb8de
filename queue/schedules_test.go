package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/internal/memcluster"
	"github.com/spine-queue/spine/queue"
)

// The scheduler on a real cluster with a clock the test moves: each tick
// makes one job, keyed by its tick, even with two schedulers racing (a
// deposed leader's and the new one's); a pause makes none and a resume
// goes on from the next tick; a trigger makes one at once.
func TestSchedulerFiresEachTickOnce(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	other := service(leader, cl, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A bad template or spec is refused and writes nothing.
	before := leader.Raft.AppliedIndex()
	for _, in := range []queue.ScheduleInput{
		{Name: "x", Interval: 10 * time.Second, Job: queue.CreateInput{Payload: payload(1), Delay: time.Second}},
		{Name: "x", Interval: 10 * time.Second, Job: queue.CreateInput{Payload: payload(1), Priority: 1000}},
		{Name: "x", Interval: 10 * time.Second, Job: queue.CreateInput{}},
		{Name: "x", Cron: "nope", Job: queue.CreateInput{Payload: payload(1)}},
		{Name: "bad name!", Interval: 10 * time.Second, Job: queue.CreateInput{Payload: payload(1)}},
	} {
		in.Actor = head
		var ie *queue.InputError
		if _, _, err := svc.CreateSchedule(ctx, in); !errors.As(err, &ie) {
			t.Fatalf("%+v: %v, want an input error", in, err)
		}
	}
	if _, _, err := svc.CreateSchedule(ctx, queue.ScheduleInput{Name: "x", Interval: time.Minute, Job: queue.CreateInput{Payload: payload(1)}, Actor: claw}); err == nil {
		t.Fatal("a claw created a schedule")
	}
	if after := leader.Raft.AppliedIndex(); after > before+1 { // the level raise, at most
		t.Fatalf("refused schedules wrote %d entries", after-before)
	}

	v, _, err := svc.CreateSchedule(ctx, queue.ScheduleInput{Name: "every10", Interval: 10 * time.Second, Overlap: fsm.OverlapAllow,
		Catchup: fsm.CatchupAll, Job: queue.CreateInput{Payload: payload(7), Stream: ptr("sched"), Priority: 3}, Actor: head})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSchedule(ctx, queue.ScheduleInput{Name: "every10", Interval: 10 * time.Second, Job: queue.CreateInput{Payload: payload(7)}, Actor: head}); !errors.Is(err, fsm.ErrExists) {
		t.Fatalf("a second schedule of the name: %v", err)
	}
	first := v.Next
	if first <= cl.now().UnixNano() || first%10e9 != 0 {
		t.Fatalf("next tick %d", first)
	}
	go svc.Scheduler()(ctx)
	go other.Scheduler()(ctx)

	jobsOf := func() map[string]*fsm.Job {
		out := map[string]*fsm.Job{}
		js, _, _ := svc.List(queue.RoleCaller(fsm.HeadRole), fsm.ListFilter{Stream: "sched", Limit: 1000})
		for _, j := range js {
			if prev := out[j.IdempotencyKey]; prev != nil {
				t.Fatalf("two jobs for one key %s: %s and %s", j.IdempotencyKey, prev.ID, j.ID)
			}
			out[j.IdempotencyKey] = j
		}
		return out
	}
	// 25s pass at once (an outage, as the schedulers see it): catch-up all
	// makes the three ticks' jobs (the clock starts 3s before a tick).
	cl.add(25 * time.Second)
	waitFor(t, "three ticks", func() bool { return len(jobsOf()) == 3 })
	for k := range 3 {
		tick := first + int64(k)*10e9
		j := jobsOf()[fsm.ScheduleKey("every10", tick, false)]
		if j == nil || j.Priority != 3 || j.Extra().Schedule != "every10" {
			t.Fatalf("tick %d: %+v", k, j)
		}
	}
	sc, _ := svc.Schedule(head, "every10")
	if sc.LastTick != first+20e9 || sc.Runs != 3 || len(sc.Recent) != 3 || sc.Next != first+30e9 {
		t.Fatalf("schedule after three ticks: %+v next %d", sc.Schedule, sc.Next)
	}

	// Paused: no job however long; resumed: the next tick after the resume.
	if _, _, err := svc.PauseSchedule(ctx, "every10", true, head); err != nil {
		t.Fatal(err)
	}
	cl.add(60 * time.Second)
	time.Sleep(3 * queue.SchedulerInterval) // a paused schedule fires nothing: give it passes to misbehave
	if n := len(jobsOf()); n != 3 {
		t.Fatalf("%d jobs while paused", n)
	}
	tv, tj, _, err := svc.TriggerSchedule(ctx, "every10", head)
	if err != nil || tj == nil || !strings.HasPrefix(tj.IdempotencyKey, "schedule:every10:trigger:") || tv.LastTick != sc.LastTick {
		t.Fatalf("trigger while paused: %v %+v", err, tj)
	}
	rv, _, err := svc.PauseSchedule(ctx, "every10", false, head)
	if err != nil {
		t.Fatal(err)
	}
	resumed := cl.now().UnixNano()
	if rv.Next <= resumed || rv.Next > resumed+10e9 {
		t.Fatalf("next after resume %d, resumed at %d", rv.Next, resumed)
	}
	cl.add(10 * time.Second)
	waitFor(t, "the tick after the resume", func() bool { return len(jobsOf()) == 5 })
	if jobsOf()[fsm.ScheduleKey("every10", rv.Next, false)] == nil {
		t.Fatal("the first tick after the resume made no job")
	}

	if _, err := svc.DeleteSchedule(ctx, "every10", head); err != nil {
		t.Fatal(err)
	}
	var nf *queue.ScheduleNotFound
	if _, err := svc.DeleteSchedule(ctx, "every10", head); !errors.As(err, &nf) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := svc.Schedule(head, "every10"); !errors.As(err, &nf) {
		t.Fatalf("read after delete: %v", err)
	}
}

// Overlap: skip makes no job while the last is unfinished; queue makes one
// that waits for it.
func TestSchedulerOverlap(t *testing.T) {
	c := memcluster.Start(t, memcluster.Options{})
	leader := c.Leader(5 * time.Second)
	cl := &clock{}
	svc := service(leader, cl, queue.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, o := range []string{fsm.OverlapSkip, fsm.OverlapQueue} {
		if _, _, err := svc.CreateSchedule(ctx, queue.ScheduleInput{Name: o, Interval: 10 * time.Second, Overlap: o, Catchup: fsm.CatchupAll,
			Job: queue.CreateInput{Payload: payload(1), Stream: ptr(o)}, Actor: head}); err != nil {
			t.Fatal(err)
		}
	}
	go svc.Scheduler()(ctx)
	cl.add(15 * time.Second)
	waitFor(t, "two ticks each", func() bool {
		a, _ := svc.Schedule(head, fsm.OverlapSkip)
		b, _ := svc.Schedule(head, fsm.OverlapQueue)
		return a.LastTick != 0 && b.LastTick != 0 && a.Runs+a.Skipped == 2 && b.Runs == 2
	})
	a, _ := svc.Schedule(head, fsm.OverlapSkip)
	if a.Runs != 1 || a.Skipped != 1 {
		t.Fatalf("skip: %d runs %d skipped", a.Runs, a.Skipped)
	}
	b, _ := svc.Schedule(head, fsm.OverlapQueue)
	second, _ := svc.Job(queue.RoleCaller(fsm.HeadRole), b.Recent[1].JobID)
	if second.Extra().DepsPending != 1 || second.Extra().DependsOn[0] != b.Recent[0].JobID {
		t.Fatalf("queue: the second run does not wait for the first: %+v", second.Extra())
	}
}
