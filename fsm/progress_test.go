package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Progress lives for its attempt; a checkpoint outlives it and is there
// for the next claim; a progress without a checkpoint keeps the last one.
func TestProgressAndCheckpoint(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{Stream: "s", MaxAttempts: 3})
	cl := h.claimNext([]string{"s"}, left)
	ref := LeaseRef{JobID: j.ID, AttemptID: cl.Job.Lease.AttemptID, Token: cl.Job.Lease.Token}
	before := cl.Job.Lease.ExpiresAt
	h.now += 1e9
	r := h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: lease, Progress: []byte(`{"pct":40}`), Checkpoint: []byte(`{"page":7}`)})
	mustOK(t, r)
	if string(r.Job.Extra().Progress) != `{"pct":40}` || string(r.Job.Extra().Checkpoint) != `{"page":7}` || r.Job.Extra().ProgressAt != h.now || r.Job.Lease.ExpiresAt <= before {
		t.Fatalf("after progress: %+v", r.Job)
	}
	r = h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: lease, Progress: []byte(`{"pct":60}`)})
	mustOK(t, r)
	if string(r.Job.Extra().Progress) != `{"pct":60}` || string(r.Job.Extra().Checkpoint) != `{"page":7}` {
		t.Fatalf("progress without a checkpoint: %+v", r.Job)
	}
	// A stale lease cannot report.
	if r := h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, Token: "old"}, Actor: left, LeaseNanos: lease, Checkpoint: []byte(`{"page":99}`)}); r.Err == nil {
		t.Fatal("a stale lease saved a checkpoint")
	}
	mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: true, Error: JobError{Message: "oom"}}))
	cl = h.claimNext([]string{"s"}, right)
	if !cl.Claimed || cl.Job.Extra().Progress != nil || string(cl.Job.Extra().Checkpoint) != `{"page":7}` {
		t.Fatalf("next claim: %+v", cl.Job)
	}
}

// A batch claim takes the jobs claim-next would take one by one, each
// under its own lease, and fewer when fewer wait.
func TestClaimBatch(t *testing.T) {
	h := newHarness(t)
	var want []string
	for _, s := range []string{"a", "a", "b", "a", "b"} {
		want = append(want, h.create(CreateCommand{Stream: s}).ID)
	}
	batch := func(n int) *Result {
		c := &ClaimCommand{Now: h.now, Streams: []string{"a", "b"}, Targets: []string{"left_claw"}, Actor: left, LeaseNanos: lease}
		for range n {
			c.AttemptIDs = append(c.AttemptIDs, h.nextID("att"))
			c.LeaseTokens = append(c.LeaseTokens, h.nextID("tok"))
		}
		return h.apply(CmdClaim, c)
	}
	r := batch(3)
	mustOK(t, r)
	// Stream a first (its three jobs in order), then b.
	order := []string{want[0], want[1], want[3], want[2], want[4]}
	if !r.Claimed || len(r.Jobs) != 3 || r.Job != r.Jobs[0] {
		t.Fatalf("batch of 3: %+v", r)
	}
	for i, j := range r.Jobs {
		if j.ID != order[i] || j.State != StateRunning || j.Lease.Token == "" {
			t.Fatalf("job %d: %s %s", i, j.ID, j.State)
		}
	}
	// Each lease is its own: completing one with another's token is refused.
	bad := LeaseRef{JobID: r.Jobs[0].ID, AttemptID: r.Jobs[1].Lease.AttemptID, Token: r.Jobs[1].Lease.Token}
	if res := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: bad, Actor: left}); res.Err == nil {
		t.Fatal("a lease of the batch completed another job of it")
	}
	r = batch(10)
	if len(r.Jobs) != 2 || r.Jobs[0].ID != order[3] || r.Jobs[1].ID != order[4] {
		t.Fatalf("batch of 10 with 2 left: %+v", r.Jobs)
	}
	if r := batch(4); r.Claimed || len(r.Jobs) != 0 || r.Err != nil {
		t.Fatalf("batch with nothing queued: %+v", r)
	}
	if r := h.apply(CmdClaim, &ClaimCommand{Now: h.now, Streams: []string{"a"}, Actor: left, LeaseNanos: lease, AttemptIDs: []string{"x"}, LeaseTokens: nil}); r.Err == nil {
		t.Fatal("a batch without its lease tokens was taken")
	}
}

// Priorities: higher first, FIFO within one, and a lower one is passed
// over only by jobs that entered the queue within PriorityAging entries
// per level after it.
func TestPriorityOrderAndAging(t *testing.T) {
	h := newHarness(t)
	create := func(p int) string {
		id := h.nextID("job")
		r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: id, Stream: "s", Payload: []byte(`1`), Actor: head, Priority: p})
		mustOK(t, r)
		return id
	}
	low1, mid, high1, high2, low2 := create(0), create(5), create(10), create(10), create(0)
	var got []string
	for range 5 {
		r := h.claimNext([]string{"s"}, left)
		got = append(got, r.Job.ID)
	}
	want := []string{high1, high2, mid, low1, low2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claim order %v, want %v", got, want)
		}
	}
	// Aging: a priority-0 job queued long enough before is not passed
	// over by a priority-1 job.
	old := create(0)
	h.idx += PriorityAging + 1 // that many entries later
	create(1)
	if r := h.claimNext([]string{"s"}, left); r.Job.ID != old {
		t.Fatalf("an old job was passed over by a newer one of higher priority: took %s", r.Job.ID)
	}
	if r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: "bad", Stream: "s", Payload: []byte(`1`), Actor: head, Priority: MaxPriority + 1}); r.Err == nil {
		t.Fatal("a priority out of range was taken")
	}
}

// A scheduled job waits for its time: no claim takes it, a claim by id is
// refused, the promote command makes it claimable once its time has come
// (not before); a fail with requeue of a job with a backoff waits out
// base*2^(attempts-1) seconds (less jitter) the same way.
func TestScheduledAndBackoff(t *testing.T) {
	h := newHarness(t)
	r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: "later", Stream: "s", Payload: []byte(`1`), Actor: head, RunAt: h.now + 60e9, BackoffBase: 10, BackoffMax: 15})
	mustOK(t, r)
	if r.Job.NotBefore != h.now+60e9 || r.Job.State != StateQueued {
		t.Fatalf("scheduled job %+v", r.Job)
	}
	now := h.create(CreateCommand{Stream: "s"})
	if c := h.claimNext([]string{"s"}, left); c.Job.ID != now.ID {
		t.Fatalf("claimed %v, want the job due now", c.Job)
	}
	if c := h.claim("later", left); c.Err == nil {
		t.Fatal("a claim by id took a job before its time")
	}
	if at := h.f.Read().NextScheduled(); at != h.now+60e9 {
		t.Fatalf("next scheduled %d", at)
	}
	if p := h.apply(CmdPromote, &PromoteCommand{Now: h.now + 59e9, Max: 10}); len(p.Jobs) != 0 {
		t.Fatal("promoted before its time")
	}
	_, ws := h.f.Read().NextClaimable([]string{"s"}, []string{"left_claw"}, nil, "")
	h.now += 60e9
	if p := h.apply(CmdPromote, &PromoteCommand{Now: h.now, Max: 10}); len(p.Jobs) != 1 || p.Jobs[0].NotBefore != 0 {
		t.Fatalf("promote at its time: %+v", p)
	}
	if !fired(ws) {
		t.Fatal("the promotion did not wake a waiting claimant")
	}
	c := h.claimNext([]string{"s"}, left)
	if !c.Claimed || c.Job.ID != "later" {
		t.Fatalf("after the promotion: %+v", c)
	}
	// Fail with requeue: back in 10 s less up to 20 %, then 15 s (the max).
	for attempt, want := range []int64{10e9, 15e9} {
		ref := LeaseRef{JobID: "later", AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}
		f := h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: true, Error: JobError{Message: "flaky"}})
		mustOK(t, f)
		wait := f.Job.NotBefore - h.now
		if !f.Requeued || wait > want || wait < want*8/10 {
			t.Fatalf("attempt %d: requeued %v, waits %v, want %v less at most 20%%", attempt+1, f.Requeued, wait, want)
		}
		if c := h.claimNext([]string{"s"}, left); c.Claimed {
			t.Fatal("claimed during the backoff")
		}
		h.now = f.Job.NotBefore
		mustOK(t, h.apply(CmdPromote, &PromoteCommand{Now: h.now, Max: 10}))
		c = h.claimNext([]string{"s"}, left)
		if !c.Claimed {
			t.Fatal("not claimable after the backoff")
		}
	}
}

// Per-key concurrency: at most the limit of a key's jobs run at once; the
// rest wait without blocking other keys or unkeyed jobs; a job of the key
// that stops running lets the next one in; a claim by id is refused while
// the key is full.
func TestConcurrencyKey(t *testing.T) {
	h := newHarness(t)
	create := func(key string, limit int) string {
		id := h.nextID("job")
		mustOK(t, h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: id, Stream: "s", Payload: []byte(`1`), Actor: head, ConcurrencyKey: key, ConcurrencyLimit: limit}))
		return id
	}
	a1, a2, a3, a4 := create("tenant-a", 2), create("tenant-a", 2), create("tenant-a", 2), create("tenant-a", 2)
	b1 := create("tenant-b", 1)
	plain := h.create(CreateCommand{Stream: "s"}).ID
	var got []string
	var leases []*Job
	for range 4 {
		r := h.claimNext([]string{"s"}, left)
		if !r.Claimed {
			break
		}
		got = append(got, r.Job.ID)
		leases = append(leases, r.Job)
	}
	want := []string{a1, a2, b1, plain}
	if len(got) != len(want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("claimed %v, want %v (two of tenant-a, then the others)", got, want)
		}
	}
	if r := h.claimNext([]string{"s"}, left); r.Claimed {
		t.Fatalf("claimed %s past the limits", r.Job.ID)
	}
	if r := h.claim(a3, left); r.Err == nil {
		t.Fatal("a claim by id ran a third job of tenant-a")
	}
	if n := h.f.Read().RunningOfKey("tenant-a"); n != 2 {
		t.Fatalf("tenant-a runs %d", n)
	}
	// One of tenant-a completes: the next comes in.
	l := leases[0].Lease
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: a1, AttemptID: l.AttemptID, Token: l.Token}, Actor: left}))
	if r := h.claimNext([]string{"s"}, left); !r.Claimed || r.Job.ID != a3 {
		t.Fatalf("after a complete: %+v, want %s", r.Job, a3)
	}
	// A release gives a2 back to the end of the queue and lets a4 in; a
	// cancel of a running one (ended by its lease) lets a2 in.
	l = leases[1].Lease
	mustOK(t, h.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: LeaseRef{JobID: a2, AttemptID: l.AttemptID, Token: l.Token}, Actor: left}))
	if r := h.claimNext([]string{"s"}, left); !r.Claimed || r.Job.ID != a4 {
		t.Fatalf("after a release: %+v, want %s", r.Job, a4)
	}
	if r := h.claimNext([]string{"s"}, left); r.Claimed {
		t.Fatalf("claimed %s with tenant-a full", r.Job.ID)
	}
	mustOK(t, h.cancel(a3))
	h.now += 2 * lease
	for _, id := range []string{a4} { // a4 heartbeats; a3 does not
		j, _ := h.f.Read().Job(id)
		mustOK(t, h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now - lease, Ref: LeaseRef{JobID: id, AttemptID: j.Lease.AttemptID, Token: j.Lease.Token}, Actor: left, LeaseNanos: 3 * lease}))
	}
	mustOK(t, h.apply(CmdReap, &ReapCommand{Now: h.now, Max: 10}))
	if j, _ := h.f.Read().Job(a3); j.State != StateCancelled {
		t.Fatalf("a3 is %s after its lease ran out with a cancel asked", j.State)
	}
	if r := h.claimNext([]string{"s"}, left); !r.Claimed || r.Job.ID != a2 {
		t.Fatalf("after the cancel: %+v, want %s", r.Job, a2)
	}
	checkIndexes(t, h.f)
}

// Dependencies: a job waits until every job it names is done; fan-in waits
// for all; a dependency that fails fails its waiting jobs, down the chain.
func TestDependencies(t *testing.T) {
	h := newHarness(t)
	create := func(deps ...string) *Result {
		id := h.nextID("job")
		return h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: id, Stream: "s", Payload: []byte(`1`), Actor: head, DependsOn: deps})
	}
	a := create().Job.ID
	b := create().Job.ID
	c := create(a).Job.ID    // after a
	d := create(a, b).Job.ID // after a and b
	e := create(c).Job.ID    // after c
	if r := create("nope"); r.Err == nil {
		t.Fatal("a dependency on an unknown job was taken")
	}
	finish := func(want string, ok bool) { t.Helper(); h.endNext("s", want, ok) }
	if r := h.claim(c, left); r.Err == nil {
		t.Fatal("a claim by id took a job waiting on another")
	}
	finish(a, true) // c is now claimable, d still waits for b
	finish(b, true) // d now too
	finish(c, true) // then e
	for _, want := range []string{d, e} {
		finish(want, true)
	}
	// A failure cascades down the chain.
	x := create().Job.ID
	y := create(x).Job.ID
	z := create(y).Job.ID
	finish(x, false)
	for _, id := range []string{y, z} {
		j, _ := h.f.Read().Job(id)
		if j.State != StateFailed || j.Error == nil || j.Error.Code != DependencyFailedCode {
			t.Fatalf("%s after its dependency failed: %s %+v", id, j.State, j.Error)
		}
	}
	if r := create(x); r.Err == nil {
		t.Fatal("a dependency on a failed job was taken")
	}
	checkIndexes(t, h.f)
}

// A waiting job that is cancelled waits no more, and re-driven it runs at
// once: a redrive does not wait again for jobs that may be long gone.
func TestCancelAndRedriveOfAWaitingJob(t *testing.T) {
	h := newHarness(t)
	dep := h.create(CreateCommand{Stream: "s"}).ID
	id := h.nextID("job")
	mustOK(t, h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: id, Stream: "s", Payload: []byte(`1`), Actor: head, DependsOn: []string{dep}}))
	mustOK(t, h.cancel(id))
	if j, _ := h.f.Read().Job(id); j.State != StateCancelled || j.Extra().DepsPending != 0 {
		t.Fatalf("cancelled waiting job: %s waiting on %d", j.State, j.Extra().DepsPending)
	}
	mustOK(t, h.apply(CmdRedrive, &RedriveCommand{Now: h.now, JobID: id, Actor: head}))
	if r := h.claim(id, left); r.Err != nil {
		t.Fatalf("a re-driven job waited for its dependency again: %v", r.Err)
	}
	checkIndexes(t, h.f)
}

// A job that runs whatever its dependencies did (a fan-in that reports on
// its parts) waits until each has ended, done or not, then is claimable;
// a failed part fails it not, nor the jobs after it. It may name a job
// that already failed. Without dependencies the policy is refused.
func TestRunOnDependencyFailure(t *testing.T) {
	h := newHarness(t)
	create := func(anyway bool, deps ...string) *Result {
		ex := CreateCommand{Now: h.now, ID: h.nextID("job"), Stream: "s", Payload: []byte(`1`), Actor: head, DependsOn: deps}
		if !anyway {
			return h.apply(CmdCreate, &ex)
		}
		return h.apply(CmdCreate, func() *CreateCommand { c := ex; c.RunOnDepFailure = true; return &c }())
	}
	end := func(want string, ok bool) { t.Helper(); h.endNext("s", want, ok) }
	p1, p2 := create(false).Job.ID, create(false).Job.ID
	r := create(true, p1, p2)
	mustOK(t, r)
	report := r.Job.ID
	if !r.Job.Extra().RunOnDepFailure || r.Job.Extra().DepsPending != 2 {
		t.Fatalf("the fan-in: %+v", r.Job)
	}
	strict := create(false, p1).Job.ID // fails with p1
	after := create(false, report).Job.ID
	end(p1, false)
	if j := h.job(strict); j.State != StateFailed || j.Error.Code != DependencyFailedCode {
		t.Fatalf("a strict dependent of a failed part: %s", j.State)
	}
	if j := h.job(report); j.State != StateQueued || j.Extra().DepsPending != 1 {
		t.Fatalf("the fan-in after one part failed: %s waiting on %d", j.State, j.Extra().DepsPending)
	}
	if r := h.claim(report, left); r.Err == nil {
		t.Fatal("the fan-in was claimable before its last part ended")
	}
	end(p2, true)
	end(report, true)
	end(after, true)

	if r := create(true, p1); r.Err != nil || r.Job.Extra().DepsPending != 0 {
		t.Fatalf("naming a failed job with the policy: %+v", r)
	}
	if r := create(false, p1); r.Err == nil {
		t.Fatal("naming a failed job without the policy was taken")
	}
	if r := create(true); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("the policy without dependencies: %v", r.Err)
	}
	raw := snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != 8 {
		t.Fatalf("snapshot version %d with the policy", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if j, _ := f2.Read().Job(report); j == nil || !j.Extra().RunOnDepFailure {
		t.Fatalf("restored fan-in: %+v", j)
	}
	checkIndexes(t, h.f)
}

// endNext claims the next job of stream, which must be want, and completes
// it (ok) or fails it for good.
func (h *harness) endNext(stream, want string, ok bool) {
	h.t.Helper()
	r := h.claimNext([]string{stream}, left)
	if !r.Claimed || r.Job.ID != want {
		h.t.Fatalf("claimed %+v, want %s", r.Job, want)
	}
	ref := LeaseRef{JobID: want, AttemptID: r.Job.Lease.AttemptID, Token: r.Job.Lease.Token}
	if ok {
		mustOK(h.t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left}))
	} else {
		mustOK(h.t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Requeue: false, Error: JobError{Message: "broken"}}))
	}
}
