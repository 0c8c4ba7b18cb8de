package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func (h *harness) createRequiring(stream string, requires ...string) *Result {
	h.t.Helper()
	return h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: h.nextID("job"), Stream: stream, Payload: []byte(`{}`), Actor: head, Requires: requires})
}

func (h *harness) claimNextWith(streams []string, a Actor, caps ...string) *Result {
	h.t.Helper()
	return h.apply(CmdClaim, &ClaimCommand{Now: h.now, Streams: streams, Targets: []string{a.Role, a.WorkerID}, Actor: a, AttemptID: h.nextID("att"), LeaseToken: h.nextID("tok"), LeaseNanos: lease, Capabilities: caps})
}

// A claim is handed only jobs whose requirements its capabilities cover,
// oldest first among those; a claim without capabilities only jobs that
// require nothing; a claim by id of a job it cannot take is refused with
// the job.
func TestCapabilitiesMatchClaims(t *testing.T) {
	h := newHarness(t)
	gpu := h.createRequiring("s", "gpu").Job
	plain := h.create(CreateCommand{Stream: "s"})
	both := h.createRequiring("s", "lang:python", "gpu", "gpu").Job
	py := h.createRequiring("s", "lang:python").Job
	if gpu.Extra().Requires != "gpu" || both.Extra().Requires != "gpu,lang:python" {
		t.Fatalf("requirement keys %q, %q", gpu.Extra().Requires, both.Extra().Requires)
	}
	if r := h.claim(gpu.ID, left); !errors.Is(r.Err, ErrMissingCapability) || r.Job == nil || r.Job.State != StateQueued {
		t.Fatalf("claim by id without the capability: %+v", r)
	}
	if r := h.claimNext([]string{"s"}, left); !r.Claimed || r.Job.ID != plain.ID {
		t.Fatalf("a claim without capabilities took %+v, want %s", r.Job, plain.ID)
	}
	if r := h.claimNext([]string{"s"}, left); r.Claimed {
		t.Fatalf("a claim without capabilities took %s (requires %q)", r.Job.ID, r.Job.Extra().Requires)
	}
	if r := h.claimNextWith([]string{"s"}, left, "lang:python"); !r.Claimed || r.Job.ID != py.ID || r.Job.Extra().ClaimCaps != "lang:python" {
		t.Fatalf("a python claim took %+v, want %s", r.Job, py.ID)
	}
	// FIFO among what it covers: the gpu job, then the one needing both.
	for _, want := range []string{gpu.ID, both.ID} {
		if r := h.claimNextWith([]string{"s"}, left, "gpu", "lang:python", "cuda"); !r.Claimed || r.Job.ID != want {
			t.Fatalf("a gpu+python claim took %+v, want %s", r.Job, want)
		}
	}
	// Bad lists are refused and change nothing.
	if r := h.createRequiring("s", "has space"); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a bad label: %v", r.Err)
	}
	if r := h.apply(CmdClaim, &ClaimCommand{Now: h.now, Capabilities: []string{"has space"}, Probe: true}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a probe with a bad capability: %v", r.Err)
	}
	if r := h.apply(CmdClaim, &ClaimCommand{Now: h.now, Probe: true}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a probe with no capabilities: %v", r.Err)
	}
	checkIndexes(t, h.f)
}

// The capability sets claims were made with are remembered with when they
// were heard from (a heartbeat of a job such a claim runs counts); queued
// jobs whose requirements no set seen since a time covers are unmatched.
// All of it, and the jobs' requirements, survive a snapshot (version 7,
// written only once capabilities were used).
func TestCapabilitiesSeenAndSnapshot(t *testing.T) {
	h := newHarness(t)
	h.create(CreateCommand{Stream: "s"})
	if v := snapVersion(t, writeSnap(t, h.f)); v >= 7 {
		t.Fatalf("a state without capabilities written as version %d", v)
	}
	t0 := h.now
	h.createRequiring("s", "gpu")
	h.createRequiring("s", "gpu")
	h.createRequiring("s", "tpu")
	if u := h.f.Read().Unmatched(t0)["s"]; len(u) != 2 || u[0] != (Unmatched{"gpu", 2}) || u[1] != (Unmatched{"tpu", 1}) {
		t.Fatalf("unmatched before any worker: %+v", u)
	}
	h.now += 1e9
	r := h.claimNextWith([]string{"s"}, left, "gpu")
	if !r.Claimed || r.Job.Extra().Requires != "" { // the oldest it may take: one requiring nothing
		t.Fatalf("the gpu claim took %+v", r.Job)
	}
	if u := h.f.Read().Unmatched(t0)["s"]; len(u) != 1 || u[0] != (Unmatched{"tpu", 1}) {
		t.Fatalf("unmatched after a gpu worker claimed: %+v", u)
	}
	if r := h.f.Read(); r.CapsSeenAt("gpu") != h.now || r.CapsSeenAt("tpu") != 0 {
		t.Fatalf("gpu seen at %d (want %d), tpu at %d (want never)", r.CapsSeenAt("gpu"), h.now, r.CapsSeenAt("tpu"))
	}
	// A heartbeat two minutes on refreshes the gpu set.
	h.now += 120e9
	mustOK(t, h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: LeaseRef{JobID: r.Job.ID, AttemptID: r.Job.Lease.AttemptID, Token: r.Job.Lease.Token}, Actor: left, LeaseNanos: lease}))
	if h.f.Read().CapsSeenAt("gpu") != h.now {
		t.Fatal("a heartbeat of a gpu claim's job did not refresh the set")
	}

	raw := writeSnap(t, h.f)
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if v := snapVersion(t, writeSnap(t, h.f)); v != 7 {
		t.Fatalf("written as version %d, want 7", v)
	}
	if got, want := f2.Read().CapsSeen(), h.f.Read().CapsSeen(); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("restored sets %+v, want %+v", got, want)
	}
	j2, _ := f2.Read().Job(r.Job.ID)
	if j2.Extra().ClaimCaps != "gpu" {
		t.Fatalf("restored job %+v", j2)
	}
	checkIndexes(t, f2)
	h2 := &harness{t: t, f: f2, idx: h.idx, now: h.now, ids: h.ids}
	if r := h2.claimNext([]string{"s"}, left); r.Claimed {
		t.Fatalf("after a restore a claim without capabilities took %s", r.Job.ID)
	}
	if r := h2.claimNextWith([]string{"s"}, left, "gpu"); !r.Claimed || r.Job.Extra().Requires != "gpu" {
		t.Fatalf("after a restore the gpu claim took %+v", r.Job)
	}
}

// A worker that releases a job as not for it is not handed it again by a
// claim-next (it gets the next job, or nothing), while another worker is;
// the job keeps the workers it is not for, across a snapshot.
func TestReleaseNotForThisWorker(t *testing.T) {
	h := newHarness(t)
	w1 := Actor{Role: "left_claw", WorkerID: "w1"}
	w2 := Actor{Role: "left_claw", WorkerID: "w2"}
	hard := h.create(CreateCommand{Stream: "s"})
	easy := h.create(CreateCommand{Stream: "s"})
	r := h.claimNext([]string{"s"}, w1)
	if !r.Claimed || r.Job.ID != hard.ID {
		t.Fatalf("first claim %+v", r.Job)
	}
	l := r.Job.Lease
	rel := h.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: LeaseRef{JobID: hard.ID, AttemptID: l.AttemptID, Token: l.Token}, Actor: w1, Reason: "no gpu", NotFor: true})
	mustOK(t, rel)
	if !rel.Requeued || len(rel.Job.Extra().NotFor) != 1 || rel.Job.Extra().NotFor[0] != "w1" || rel.Job.Attempts != 0 {
		t.Fatalf("released %+v", rel.Job)
	}
	if r := h.claimNext([]string{"s"}, w1); !r.Claimed || r.Job.ID != easy.ID {
		t.Fatalf("w1 after its release took %+v, want %s", r.Job, easy.ID)
	}
	if r := h.claimNext([]string{"s"}, w1); r.Claimed {
		t.Fatalf("w1 was handed %s again", r.Job.ID)
	}
	if j, _ := h.f.Read().NextClaimable([]string{"s"}, []string{"left_claw", "w1"}, nil, "w1"); j != nil {
		t.Fatalf("the peek offers w1 %s", j.ID)
	}
	// The same holds for a job that requires a capability.
	gpu := h.createRequiring("g", "gpu").Job
	r = h.claimNextWith([]string{"g"}, w1, "gpu")
	l = r.Job.Lease
	mustOK(t, h.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: LeaseRef{JobID: gpu.ID, AttemptID: l.AttemptID, Token: l.Token}, Actor: w1, NotFor: true}))
	if r := h.claimNextWith([]string{"g"}, w1, "gpu"); r.Claimed {
		t.Fatalf("w1 was handed the gpu job %s again", r.Job.ID)
	}
	checkIndexes(t, h.f)

	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(writeSnap(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	h2 := &harness{t: t, f: f2, idx: h.idx, now: h.now, ids: h.ids}
	if r := h2.claimNext([]string{"s"}, w1); r.Claimed {
		t.Fatalf("after a restore w1 was handed %s", r.Job.ID)
	}
	if r := h2.claimNext([]string{"s"}, w2); !r.Claimed || r.Job.ID != hard.ID {
		t.Fatalf("w2 took %+v, want %s", r.Job, hard.ID)
	}
	if r := h2.claimNextWith([]string{"g"}, w2, "gpu"); !r.Claimed || r.Job.ID != gpu.ID {
		t.Fatalf("w2 with gpu took %+v, want %s", r.Job, gpu.ID)
	}
	// A release not for a worker names one.
	if r := h2.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: LeaseRef{JobID: gpu.ID}, Actor: left, NotFor: true}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a release not for no worker: %v", r.Err)
	}
}

// withCaps is claim c made with capabilities caps.
func withCaps(c *ClaimCommand, caps []string) *ClaimCommand {
	cc := *c
	cc.Capabilities = caps
	return &cc
}
