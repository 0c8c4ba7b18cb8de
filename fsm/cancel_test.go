package fsm

import (
	"errors"
	"testing"
)

func (h *harness) cancel(id string) *Result {
	h.t.Helper()
	return h.apply(CmdCancel, &CancelCommand{Now: h.now, JobID: id, Reason: "not needed", Actor: head})
}

// A queued job is cancelled at once and never handed out; a repeat is a
// duplicate; a done job cannot be cancelled; a cancelled job can be
// re-driven; retention deletes cancelled jobs as it does done ones.
func TestCancelQueued(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{Stream: "s"})
	r := h.cancel(j.ID)
	mustOK(t, r)
	if r.Job.State != StateCancelled || r.Job.FinishedAt != h.now || r.Job.Extra().CancelReason != "not needed" {
		t.Fatalf("cancelled job %+v", r.Job)
	}
	if ev := r.Job.History()[len(r.Job.History())-1]; ev.Type != EventCancelled || ev.From.State() != StateQueued || ev.To.State() != StateCancelled {
		t.Fatalf("last event %+v", ev)
	}
	if r := h.claimNext([]string{"s"}, left); r.Claimed {
		t.Fatal("a cancelled job was handed out")
	}
	if r := h.cancel(j.ID); r.Err != nil || !r.Duplicate || r.Job.State != StateCancelled {
		t.Fatalf("second cancel: %+v", r)
	}
	if c, _ := h.f.Read().Counts(); c[StateCancelled] != 1 || c[StateQueued] != 0 {
		t.Fatalf("counts %v", c)
	}

	done := h.create(CreateCommand{Stream: "s"})
	cl := h.claimNext([]string{"s"}, left)
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: done.ID, AttemptID: cl.Job.Lease.AttemptID, Token: cl.Job.Lease.Token}, Actor: left}))
	if r := h.cancel(done.ID); !errors.Is(r.Err, ErrIllegalTransition) || r.Job.State != StateDone {
		t.Fatalf("cancel of a done job: %+v", r)
	}
	if r := h.cancel("nope"); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("cancel of an unknown job: %v", r.Err)
	}

	r = h.apply(CmdRedrive, &RedriveCommand{Now: h.now, JobID: j.ID, Actor: head})
	mustOK(t, r)
	if r.Job.State != StateQueued || r.Job.Extra().CancelReason != "" {
		t.Fatalf("redriven %+v", r.Job)
	}
	mustOK(t, h.cancel(j.ID))
	h.now += 10e9
	p := h.apply(CmdPurge, &PurgeCommand{Now: h.now, Before: h.now, Max: 10})
	if len(p.Jobs) != 2 {
		t.Fatalf("purge deleted %d jobs, want the done and the cancelled one", len(p.Jobs))
	}
}

// A running job is marked: its heartbeat answers carry the request, and
// however the attempt ends but by a complete, the job ends cancelled, not
// queued again; a complete still completes it.
func TestCancelRunning(t *testing.T) {
	for _, end := range []string{"fail", "release", "reap", "complete", "fail-repeat"} {
		t.Run(end, func(t *testing.T) {
			h := newHarness(t)
			j := h.create(CreateCommand{Stream: "s", MaxAttempts: 5})
			cl := h.claimNext([]string{"s"}, left)
			ref := LeaseRef{JobID: j.ID, AttemptID: cl.Job.Lease.AttemptID, Token: cl.Job.Lease.Token}
			r := h.cancel(j.ID)
			mustOK(t, r)
			if r.Job.State != StateRunning || !r.Job.CancelRequested() || r.Job.Extra().CancelRequestedAt != h.now {
				t.Fatalf("cancel of a running job: %+v", r.Job)
			}
			if r := h.cancel(j.ID); !r.Duplicate {
				t.Fatal("a second cancel was not a duplicate")
			}
			hb := h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: lease})
			mustOK(t, hb)
			if !hb.Job.CancelRequested() {
				t.Fatal("the heartbeat answer lost the cancel")
			}
			var res *Result
			switch end {
			case "fail", "fail-repeat":
				res = h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: true, Error: JobError{Code: CancelCode, Message: "stopped"}})
			case "release":
				res = h.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: ref, Actor: left, Reason: "stopping"})
			case "reap":
				h.now += 2 * lease
				res = h.apply(CmdReap, &ReapCommand{Now: h.now, Max: 10})
				res.Job = res.Jobs[0]
			case "complete":
				res = h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left, Result: []byte(`1`)})
			}
			mustOK(t, res)
			want := StateCancelled
			if end == "complete" {
				want = StateDone
			}
			if res.Job.State != want || res.Requeued || res.Job.Lease != nil {
				t.Fatalf("after %s: %+v (requeued %v)", end, res.Job, res.Requeued)
			}
			if end == "fail-repeat" {
				again := h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: true, Error: JobError{Code: CancelCode, Message: "stopped"}})
				if again.Err != nil || !again.Duplicate || again.Job.State != StateCancelled {
					t.Fatalf("repeated fail: %+v", again)
				}
			}
			if r := h.claimNext([]string{"s"}, right); r.Claimed {
				t.Fatalf("claimed %s after the cancel", r.Job.ID)
			}
		})
	}
}

// Cancels are in snapshots (version 6): the state and the request.
func TestCancelSnapshot(t *testing.T) {
	h := newHarness(t)
	q := h.create(CreateCommand{Stream: "s"})
	run := h.create(CreateCommand{Stream: "s"})
	mustOK(t, h.cancel(q.ID))
	h.claim(run.ID, left)
	mustOK(t, h.cancel(run.ID))
	f2 := restoredCopy(t, h.f)
	got, _ := f2.Read().Job(run.ID)
	if !got.CancelRequested() || got.Extra().CancelReason != "not needed" {
		t.Fatalf("restored running job %+v", got)
	}
	if got, _ := f2.Read().Job(q.ID); got.State != StateCancelled {
		t.Fatalf("restored cancelled job %+v", got)
	}
}
