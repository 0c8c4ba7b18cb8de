package fsm

import "testing"

// Progress lives for its attempt; a checkpoint outlives it and is there
// for the next claim; a progress without a checkpoint keeps the last one.
func TestProgressAndCheckpoint(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{Stream: "s", MaxAttempts: 3})
	cl := h.claimNext([]string{"s"}, left)
	ref := LeaseRef{JobID: j.ID, AttemptID: cl.Job.Lease.AttemptID, Token: cl.Job.Lease.Token}
	before := cl.Job.Lease.ExpiresAt
	h.now += 1e9
	r := h.apply(CmdProgress, &ProgressCommand{HeartbeatCommand: HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: lease},
		Progress: []byte(`{"pct":40}`), Checkpoint: []byte(`{"page":7}`)})
	mustOK(t, r)
	if string(r.Job.Progress) != `{"pct":40}` || string(r.Job.Checkpoint) != `{"page":7}` || r.Job.ProgressAt != h.now || r.Job.Lease.ExpiresAt <= before {
		t.Fatalf("after progress: %+v", r.Job)
	}
	r = h.apply(CmdProgress, &ProgressCommand{HeartbeatCommand: HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: lease},
		Progress: []byte(`{"pct":60}`)})
	mustOK(t, r)
	if string(r.Job.Progress) != `{"pct":60}` || string(r.Job.Checkpoint) != `{"page":7}` {
		t.Fatalf("progress without a checkpoint: %+v", r.Job)
	}
	// A stale lease cannot report.
	if r := h.apply(CmdProgress, &ProgressCommand{HeartbeatCommand: HeartbeatCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, Token: "old"}, Actor: left, LeaseNanos: lease},
		Checkpoint: []byte(`{"page":99}`)}); r.Err == nil {
		t.Fatal("a stale lease saved a checkpoint")
	}
	mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: true, Error: JobError{Message: "oom"}}))
	cl = h.claimNext([]string{"s"}, right)
	if !cl.Claimed || cl.Job.Progress != nil || string(cl.Job.Checkpoint) != `{"page":7}` {
		t.Fatalf("next claim: %+v", cl.Job)
	}
}
