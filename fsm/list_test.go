package fsm

import (
	"slices"
	"testing"
)

// ended creates a job in stream a, claims it and fails it: failed, or
// dead (a retry asked for with no attempt left).
func (h *harness) ended(dead bool) *Job {
	h.t.Helper()
	id := h.create(CreateCommand{Stream: "a", MaxAttempts: 1}).ID
	c := h.claim(id, left)
	mustOK(h.t, c)
	r := h.apply(CmdFail, &FailCommand{Now: h.now, Ref: LeaseRef{JobID: id, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token},
		Actor: left, Error: JobError{Message: "no"}, Requeue: dead})
	mustOK(h.t, r)
	return r.Job
}

// ids lists the jobs' ids.
func ids(jobs []*Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// A List of some states walks only their lanes: a few failed and dead
// jobs among many others come in creation order, a page at a time, and
// the page that ends them has no cursor; the jobs examined are those of
// the lanes walked, whatever the number of others.
func TestListWalksOnlyTheStatesAskedFor(t *testing.T) {
	h := newHarness(t)
	states := []State{StateFailed, StateDead}
	visits := func(f ListFilter) ([]*Job, uint64, uint64) {
		t.Helper()
		before := h.f.JobsVisited()
		jobs, next, err := h.f.Read().List(f)
		if err != nil {
			t.Fatal(err)
		}
		return jobs, next, h.f.JobsVisited() - before
	}
	for range 500 {
		h.create(CreateCommand{Stream: "a"})
	}
	if jobs, next, n := visits(ListFilter{States: states}); len(jobs) != 0 || next != 0 || n != 0 {
		t.Fatalf("no dead letters among 500 queued jobs: %d jobs, cursor %d, %d examined; want none, 0, 0", len(jobs), next, n)
	}
	var want []string
	for i := range 5 {
		j := h.ended(i%2 == 1)
		if j.State != []State{StateFailed, StateDead}[i%2] {
			t.Fatalf("job %d ended %s", i, j.State)
		}
		want = append(want, j.ID)
		for range 200 {
			h.create(CreateCommand{Stream: "a"})
		}
	}
	var got []string
	var after uint64
	for page := 0; ; page++ {
		jobs, next, n := visits(ListFilter{States: states, Limit: 2, After: after})
		if n > 3 {
			t.Fatalf("page %d examined %d jobs for a page of 2", page, n)
		}
		got = append(got, ids(jobs)...)
		if next == 0 {
			if page != 2 || len(jobs) != 1 {
				t.Fatalf("the last page is page %d with %d jobs, want page 2 with 1", page, len(jobs))
			}
			break
		}
		if page == 2 {
			t.Fatalf("page 2 (the last job) has cursor %d", next)
		}
		after = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
	// State narrows States; a state outside them matches nothing.
	if jobs, _, _ := visits(ListFilter{States: states, State: StateDead}); !slices.Equal(ids(jobs), []string{want[1], want[3]}) {
		t.Fatalf("dead of failed and dead: %v, want %v", ids(jobs), []string{want[1], want[3]})
	}
	if jobs, next, _ := visits(ListFilter{States: states, State: StateQueued}); len(jobs) != 0 || next != 0 {
		t.Fatalf("queued of failed and dead: %d jobs, cursor %d", len(jobs), next)
	}
}

// A page that takes the last job of its lanes has no cursor, even when it
// is full; a page cut short by MaxScan has one, and a negative MaxScan
// examines every job.
func TestListCursorEndsWithTheLanes(t *testing.T) {
	h := newHarness(t)
	for range 300 {
		h.create(CreateCommand{Stream: "a"})
	}
	last := h.create(CreateCommand{Stream: "b"})
	r := h.f.Read()
	if jobs, next, _ := r.List(ListFilter{Stream: "b", Limit: 1}); len(jobs) != 1 || jobs[0].ID != last.ID || next != 0 {
		t.Fatalf("the one job of b, the last: %v, cursor %d; want it and no cursor", ids(jobs), next)
	}
	if jobs, next, _ := r.List(ListFilter{Limit: 301}); len(jobs) != 301 || next != 0 {
		t.Fatalf("a full page of every job: %d jobs, cursor %d; want 301 and no cursor", len(jobs), next)
	}
	if jobs, next, _ := r.List(ListFilter{Limit: 300}); len(jobs) != 300 || next == 0 {
		t.Fatalf("a page of all but one: %d jobs, cursor %d; want 300 and a cursor", len(jobs), next)
	}
	jobs, next, _ := r.List(ListFilter{Stream: "b", MaxScan: 100})
	if len(jobs) != 0 || next == 0 {
		t.Fatalf("b with a scan bound of 100: %v, cursor %d; want an empty page and a cursor", ids(jobs), next)
	}
	if jobs, next, _ := r.List(ListFilter{Stream: "b", MaxScan: -1}); len(jobs) != 1 || next != 0 {
		t.Fatalf("b with no scan bound: %v, cursor %d; want its job and no cursor", ids(jobs), next)
	}
}
