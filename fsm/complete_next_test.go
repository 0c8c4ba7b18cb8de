package fsm

import (
	"errors"
	"reflect"
	"testing"
)

// completeNext completes running job j (as a) and carries a claim of the
// next job of stream "default" for a.
func (h *harness) completeNext(j *Job, a Actor, token string) *Result {
	h.t.Helper()
	next := &ClaimCommand{Now: h.now, Streams: []string{DefaultStream}, Targets: []string{a.Role, a.WorkerID}, Actor: a,
		AttemptID: h.nextID("att"), LeaseToken: h.nextID("tok"), LeaseNanos: lease}
	return h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, AttemptID: j.Lease.AttemptID, Token: token},
		Actor: a, Result: []byte(`{"ok":true}`), Next: next})
}

// A complete that carries the next claim ends one job and starts the next
// in one entry, the next job under the claim's own lease; refused, it
// claims nothing; repeated, it claims again (the worker wants work).
func TestCompleteCarriesTheNextClaim(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	w := Actor{Role: RoleLeftClaw, WorkerID: "w1"}
	a, b, c := h.create(CreateCommand{}), h.create(CreateCommand{}), h.create(CreateCommand{})
	first := h.claimNext([]string{DefaultStream}, w)
	if first.Job == nil || first.Job.ID != a.ID {
		t.Fatalf("first claim took %+v, want %s", first.Job, a.ID)
	}

	// A refused complete (a stale token) claims nothing.
	r := h.completeNext(first.Job, w, "not-the-token")
	if r.Err == nil || r.Next != nil {
		t.Fatalf("stale complete: err %v, next %+v", r.Err, r.Next)
	}
	if h.job(b.ID).State != StateQueued {
		t.Fatal("a refused complete claimed a job")
	}

	r = h.completeNext(first.Job, w, first.Job.Lease.Token)
	if r.Err != nil || r.Next == nil || !r.Next.Claimed || r.Next.Job.ID != b.ID {
		t.Fatalf("complete with next: err %v, next %+v", r.Err, r.Next)
	}
	if h.job(a.ID).State != StateDone || h.job(b.ID).State != StateRunning {
		t.Fatalf("after complete+next: %s is %s, %s is %s", a.ID, h.job(a.ID).State, b.ID, h.job(b.ID).State)
	}
	if l := h.job(b.ID).Lease; l.WorkerID != "w1" || l.Owner != RoleLeftClaw || l.Token == first.Job.Lease.Token {
		t.Fatalf("the next job's lease: %+v", l)
	}

	// The same complete again (its answer lost): a duplicate, and the next
	// job of the queue.
	r = h.completeNext(first.Job, w, first.Job.Lease.Token)
	if r.Err != nil || !r.Duplicate || r.Next == nil || !r.Next.Claimed || r.Next.Job.ID != c.ID {
		t.Fatalf("repeated complete with next: err %v, dup %v, next %+v", r.Err, r.Duplicate, r.Next)
	}

	// Nothing left: the complete is applied, the claim answers nothing.
	r = h.completeNext(h.job(b.ID), w, h.job(b.ID).Lease.Token)
	if r.Err != nil || r.Next == nil || r.Next.Claimed || h.job(b.ID).State != StateDone {
		t.Fatalf("complete with an empty queue: err %v, next %+v", r.Err, r.Next)
	}

	// A next claim for someone else is refused; the complete stands.
	d := h.create(CreateCommand{})
	cj := h.job(c.ID)
	r = h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: c.ID, AttemptID: cj.Lease.AttemptID, Token: cj.Lease.Token},
		Actor: w, Next: &ClaimCommand{Now: h.now, Streams: []string{DefaultStream}, Actor: Actor{Role: RoleLeftClaw, WorkerID: "w2"},
			AttemptID: "x1", LeaseToken: "x2", LeaseNanos: lease}})
	if r.Err != nil || r.Next == nil || !errors.Is(r.Next.Err, ErrInvalid) || h.job(d.ID).State != StateQueued || h.job(c.ID).State != StateDone {
		t.Fatalf("next claim for another worker: err %v, next %+v", r.Err, r.Next)
	}
}

// Below LevelCompleteNext a node applies the complete alone, as a build
// that does not know the field does (it skips it).
func TestCompleteNextWaitsForItsLevel(t *testing.T) {
	h := newHarness(t)
	h.atLevel(LevelCompleteNext - 1)
	w := Actor{Role: RoleLeftClaw, WorkerID: "w1"}
	h.create(CreateCommand{})
	b := h.create(CreateCommand{})
	first := h.claimNext([]string{DefaultStream}, w)
	r := h.completeNext(first.Job, w, first.Job.Lease.Token)
	if r.Err != nil || r.Next != nil || h.job(b.ID).State != StateQueued {
		t.Fatalf("below the level: err %v, next %+v, %s %s", r.Err, r.Next, b.ID, h.job(b.ID).State)
	}
}

// The next claim round-trips as a nested object of the complete.
func TestCompleteNextRoundTrip(t *testing.T) {
	cmd := &CompleteCommand{Now: 9, Ref: LeaseRef{JobID: "j", AttemptID: "a", Token: "t"}, Actor: Actor{Role: RoleLeftClaw, WorkerID: "w"},
		Result: []byte(`{}`), Next: &ClaimCommand{Now: 9, Streams: []string{"a", "b"}, Targets: []string{"w"}, Actor: Actor{Role: RoleLeftClaw, WorkerID: "w"},
			AttemptIDs: []string{"a1", "a2"}, LeaseTokens: []string{"t1", "t2"}, LeaseNanos: 5, Capabilities: []string{"gpu"}}}
	data, err := Encode(CmdComplete, cmd)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := DecodeCommand(data)
	if err != nil || !reflect.DeepEqual(got, cmd) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, got, cmd)
	}
}
