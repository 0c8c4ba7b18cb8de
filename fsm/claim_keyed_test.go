package fsm

import (
	"errors"
	"testing"
)

// A keyed claim repeated after its answer was lost hands back the job it
// took, with the same lease and no new attempt; another claimant's key
// clash is refused; once the attempt ends the key claims afresh.
func TestKeyedClaimRepeatFindsItsJob(t *testing.T) {
	h := newHarness(t)
	a := h.create(CreateCommand{})
	b := h.create(CreateCommand{})
	w := Actor{Role: left.Role, WorkerID: "w1"}
	keyed := func(key, token string, who Actor) *Result {
		t.Helper()
		return h.apply(CmdClaim, &ClaimCommand{Now: h.now, Streams: []string{a.Stream}, Targets: []string{who.Role, who.WorkerID}, Actor: who, AttemptID: key, LeaseToken: token, LeaseNanos: lease, Keyed: true})
	}
	first := keyed("k_1", "tok-1", w)
	if first.Err != nil || !first.Claimed || first.Job.ID != a.ID || first.Duplicate {
		t.Fatalf("first keyed claim: %+v", first)
	}
	again := keyed("k_1", "tok-2", w)
	if again.Err != nil || !again.Claimed || !again.Duplicate || again.Job.ID != a.ID ||
		again.Job.Lease.Token != "tok-1" || again.Job.Attempts != 1 {
		t.Fatalf("repeated keyed claim: %+v (lease %+v)", again, again.Job.Lease)
	}
	if j, _ := h.f.Read().Job(b.ID); j.State != StateQueued {
		t.Fatalf("the repeat took another job: %s is %s", b.ID, j.State)
	}
	for _, other := range []Actor{{Role: left.Role, WorkerID: "w2"}, {Role: right.Role, WorkerID: "w1"}} {
		if r := keyed("k_1", "tok-3", other); !errors.Is(r.Err, ErrExists) {
			t.Fatalf("%v reusing another claimant's key: %+v", other, r)
		}
	}
	if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: a.ID, AttemptID: "k_1", Token: "tok-1"},
		Actor: w, Result: []byte(`{}`)}); r.Err != nil {
		t.Fatalf("complete: %v", r.Err)
	}
	next := keyed("k_1", "tok-4", w)
	if next.Err != nil || !next.Claimed || next.Duplicate || next.Job.ID != b.ID || next.Job.Lease.Token != "tok-4" {
		t.Fatalf("the key after its attempt ended: %+v", next)
	}
}
