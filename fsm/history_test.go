package fsm

import (
	"bytes"
	"reflect"
	"testing"
)

// TestCreatedEventKeptAsCreator: a plain create keeps its created event as
// the job's creator alone, so a queued job is one allocation (no event
// array; TestEventSizes pins the job's size class), and the history every
// reader gets is the same as if the event were stored: through claims and
// completes, a snapshot of every version and its restore.
func TestCreatedEventKeptAsCreator(t *testing.T) {
	h := newHarness(t)
	h.level(LevelPolicies)
	queued := h.create(CreateCommand{Stream: "s"})
	if queued.trail != nil || queued.creator.String() != "head" {
		t.Fatalf("a plain create stores its event: history %+v, creator %q", queued.events(), queued.creator)
	}
	want := []Event{{Seq: 1, At: h.now, Type: EventCreated, Actor: "head", To: codeQueued}}
	if got := queued.History(); !reflect.DeepEqual(got, want) || queued.NumEvents() != 1 || queued.EventAt(0) != want[0] {
		t.Fatalf("history %+v, want %+v", got, want)
	}

	// A token's name is stamped on the created event as on any other.
	tokened := h.createAs(Actor{Role: "head", Token: "ci"})
	if ev := tokened.History()[0]; ev.Actor != "head@ci" || tokened.creator.String() != "head@ci" {
		t.Fatalf("the created event's actor %q, creator %q: want head@ci", ev.Actor, tokened.creator)
	}

	done := h.create(CreateCommand{Stream: "s"})
	r := h.claim(done.ID, left)
	mustOK(t, r)
	c := h.apply(CmdComplete, &CompleteCommand{Now: h.now + 1, Ref: LeaseRef{JobID: done.ID, AttemptID: r.Job.Lease.AttemptID,
		Token: r.Job.Lease.Token}, Result: []byte(`1`), Actor: left})
	mustOK(t, c)
	got := c.Job.History()
	if len(got) != 3 || c.Job.NumEvents() != 3 || c.Job.numStored() != 2 {
		t.Fatalf("a finished job's history %+v (stored %d)", got, c.Job.numStored())
	}
	for i, typ := range []EventType{EventCreated, EventClaimed, EventCompleted} {
		if got[i].Seq != int32(i+1) || got[i].Type != typ || c.Job.EventAt(i) != got[i] {
			t.Fatalf("event %d: %+v, want seq %d %s", i, got[i], i+1, typ)
		}
	}

	// A task is created as a job is.
	dq := devqHarness(t)
	task := dq.enqueue("auth", "run-bash", 0)
	mustOK(t, task)
	if j := task.Job; j.creator.String() != "head" || j.trail != nil {
		t.Fatalf("a task's created event: creator %q, history %+v", j.creator, j.events())
	}
	// A created event the job's fields do not hold all of (a requeued
	// task's names the task it repeats; one without an actor) stays in
	// the history.
	created := Event{Seq: 1, At: h.now, Type: EventCreated, Actor: "head", To: codeQueued}
	var kept []*Job
	for _, change := range []func(e *Event){
		func(e *Event) { e.Text = "requeue of tsk-1" },
		func(e *Event) { e.Actor = "" },
		func(e *Event) { e.At++ },
		func(e *Event) { e.WorkerID = "w1" },
	} {
		e := created
		change(&e)
		j := &Job{ID: "kept", Stream: "s", State: StateQueued, CreatedAt: h.now}
		j.setCreated(e)
		if j.creator.String() != "" || len(j.events()) != 1 || j.events()[0] != e || !reflect.DeepEqual(j.History(), []Event{e}) {
			t.Fatalf("%+v kept as creator %q, history %+v", e, j.creator, j.events())
		}
		kept = append(kept, j)
	}

	// Every snapshot version writes the whole history and reads the
	// created event back as the creator.
	for _, j := range append([]*Job{queued, tokened, c.Job, task.Job}, kept...) {
		for v := 2; v < snapTagged; v++ {
			var e enc
			e.job(j, v)
			d := dec{b: e.b}
			back := d.job(v)
			var e2 enc
			e2.job(back, v)
			if d.err != nil || !bytes.Equal(e.b, e2.b) || !sameHistory(j, back) {
				t.Fatalf("version %d: %+v / %q read back as %+v / %q (%v)", v, j.events(), j.creator, back.events(), back.creator, d.err)
			}
		}
		b := writeFields(nil, j)
		var back Job
		if err := readFields(b, &back, nil, nil); err != nil {
			t.Fatal(err)
		}
		back.adoptHistory(back.events())
		if !bytes.Equal(b, writeFields(nil, &back)) || !sameHistory(j, &back) {
			t.Fatalf("tagged: %+v / %q read back as %+v / %q", j.events(), j.creator, back.events(), back.creator)
		}
	}

	// A snapshot written with the created event stored (as every build
	// before this one stored it) restores to the same state.
	stored := *queued
	stored.creator = Ident{}
	stored.setEvents(queued.History())
	var old enc
	old.job(&stored, snapTagged-1)
	if !bytes.Equal(old.b, func() []byte { var e enc; e.job(queued, snapTagged-1); return e.b }()) {
		t.Fatal("a job keeping its created event as its creator writes another record than one storing it")
	}
	f2 := restoredCopy(t, h.f)
	for _, j := range []*Job{queued, tokened, c.Job} {
		back, _ := f2.Read().Job(j.ID)
		if !sameHistory(j, back) || back.creator.String() == "" || !exactHistory(back) {
			t.Fatalf("restored %s: %+v / %q ", j.ID, back.events(), back.creator)
		}
	}
}

func sameHistory(a, b *Job) bool {
	return reflect.DeepEqual(a.History(), b.History()) && a.NumEvents() == b.NumEvents()
}

func (h *harness) createAs(a Actor) *Job {
	h.t.Helper()
	r := h.apply(CmdCreate, &CreateCommand{ID: h.nextID("job"), Stream: "s", Payload: []byte(`{}`), Now: h.now, Actor: a})
	mustOK(h.t, r)
	return r.Job
}

// The leader's loops look every 100 ms for something to do (the reaper,
// the promoter, the purgers, the scheduler, the health monitor): their
// looks are point reads, which take no view. A view taken while jobs
// arrive makes the writer copy a path of every tree it changes next: with
// random ids, about a leaf per create.
func TestLeaderLoopsTakeNoView(t *testing.T) {
	h := newHarness(t)
	h.create(CreateCommand{Stream: "s"})
	before := h.f.view.Load()
	h.create(CreateCommand{Stream: "s"})
	r := h.f.Peek()
	_ = r.NextLeaseExpiry() + r.NextScheduled() + r.NextRateDue() + r.OldestFinished() + r.OldestBinding() + r.OldestTaskEnded()
	_, _, _ = r.Registry(), r.ScheduleCount(), r.Level()
	_, _ = r.Gateways(), r.Workers("")
	if v := h.f.view.Load(); v != before {
		t.Fatalf("a point look published a view (index %d, was %d)", v.index, before.index)
	}
	if h.f.Read().NextLeaseExpiry(); h.f.view.Load() == before {
		t.Fatal("a view was not taken by Read")
	}
}

// exactHistory reports whether j's open history has no spare capacity (a
// sealed one has none).
func exactHistory(j *Job) bool {
	return j.trail == nil || cap(j.trail.history) == len(j.trail.history)
}
