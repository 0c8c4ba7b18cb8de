package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// recount counts jobs per stream and state, tasks per state, and the
// oldest queued job per stream, by walking every job: what the stats index
// must agree with.
func recount(t *testing.T, f *FSM) (map[[2]string]int, map[string]int64) {
	t.Helper()
	counts := map[[2]string]int{}
	heads := map[[2]string]*Job{} // the job of each stream that entered its queue first
	f.Read().view().byID.Ascend(func(it idItem) bool {
		j := it.j
		counts[[2]string{j.Stream, string(j.State)}]++
		if j.IsTask() {
			counts[[2]string{"tasks", string(j.State)}]++ // no stream of the log is named so
		}
		if claimable(j) { // waiting in a queue: not scheduled, not waiting on other jobs
			k := [2]string{j.Stream, ""} // the stream's first in, whatever its lane and priority
			if h := heads[k]; h == nil || j.QueueIndex < h.QueueIndex || (j.QueueIndex == h.QueueIndex && j.CreateIndex < h.CreateIndex) {
				heads[k] = j
			}
		}
		return true
	})
	oldest := map[string]int64{}
	for k, j := range heads {
		if at, ok := oldest[k[0]]; !ok || j.UpdatedAt < at {
			oldest[k[0]] = j.UpdatedAt
		}
	}
	return counts, oldest
}

func statsOf(f *FSM) (map[[2]string]int, map[string]int64) {
	r := f.Read()
	counts := map[[2]string]int{}
	for _, sc := range r.StreamCounts() {
		counts[[2]string{sc.Stream, string(sc.State)}] = sc.N
	}
	for st, n := range r.TaskCounts() {
		counts[[2]string{"tasks", string(st)}] = n
	}
	return counts, r.OldestQueued()
}

// The per-stream counts, the task counts and the oldest queued times (the
// metrics', the dashboard's and /api/status's figures) agree with a walk
// of every job after a random log, and after a snapshot is restored on
// another node.
func TestStreamStatsAgreeWithTheJobs(t *testing.T) {
	f1, _ := New(Config{})
	log := randomLog(7, 3000)
	for i, d := range log {
		f1.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: d})
		if i%500 == 499 {
			wc, wo := recount(t, f1)
			gc, go_ := statsOf(f1)
			if !reflect.DeepEqual(wc, gc) || !reflect.DeepEqual(wo, go_) {
				t.Fatalf("after %d entries: stats %v %v, jobs say %v %v", i+1, gc, go_, wc, wo)
			}
		}
	}
	// A running and a done job too, whatever the random log left.
	h := &harness{t: t, f: f1, idx: uint64(len(log)), now: 1_700_000_000e9}
	done := h.create(CreateCommand{Stream: "metrics-c"})
	mustOK(t, h.claim(done.ID, left))
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: done.ID}, Actor: left, Result: []byte(`{}`)}))
	mustOK(t, h.claim(h.create(CreateCommand{Stream: "metrics-c"}).ID, left))
	// Tasks in every state but cancelled.
	mustOK(t, h.apply(CmdRegistrySet, &RegistrySetCommand{Now: h.now, Actor: head, Registry: Registry{
		Classes: DefaultTaskClasses, Tools: []Tool{{Name: "run-bash", TaskClass: "FAST_SCRIPT"}}}}))
	mustOK(t, h.apply(CmdSessionCreate, &SessionCreateCommand{Now: h.now, ID: "ses_m", Name: "metrics", Actor: head}))
	mustOK(t, h.apply(CmdStreamCreate, &StreamCreateCommand{Now: h.now, ID: "str_m", Name: "metrics-t", Session: "metrics", Actor: head}))
	for i := range 4 {
		tk := h.enqueue("metrics-t", "run-bash", 0)
		mustOK(t, tk)
		if i == 0 {
			continue // queued
		}
		c := h.claim(tk.Job.ID, left)
		mustOK(t, c)
		ref := LeaseRef{JobID: tk.Job.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}
		switch i {
		case 2:
			mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left, Result: []byte(`{"summary":"ok"}`)}))
		case 3:
			mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: ref, Actor: left, Error: JobError{Message: "no"}}))
		}
	}
	wc, wo := recount(t, f1)
	if gc, go_ := statsOf(f1); !reflect.DeepEqual(wc, gc) || !reflect.DeepEqual(wo, go_) {
		t.Fatalf("stats %v %v, jobs say %v %v", gc, go_, wc, wo)
	}
	if len(wc) < 5 {
		t.Fatalf("the random log left too few (stream, state) pairs to test: %v", wc)
	}
	taskStates := 0
	for k := range wc {
		if k[0] == "tasks" {
			taskStates++
		}
	}
	if taskStates < 4 {
		t.Fatalf("the random log left tasks in too few states to test: %v", wc)
	}
	snap, err := f1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	c1, o1 := statsOf(f1)
	c2, o2 := statsOf(f2)
	if !reflect.DeepEqual(c1, c2) || !reflect.DeepEqual(o1, o2) {
		t.Fatalf("restored stats differ: %v %v, want %v %v", c2, o2, c1, o1)
	}
	if wc, wo := recount(t, f2); !reflect.DeepEqual(wc, c2) || !reflect.DeepEqual(wo, o2) {
		t.Fatalf("restored stats %v %v, the restored jobs say %v %v", c2, o2, wc, wo)
	}
}

// Event counters count what was applied after the index a node starts
// counting from, and not the replay before it.
func TestEventCountsSkipReplay(t *testing.T) {
	h := newHarness(t)
	h.f.CountEventsAfter(2)
	h.create(CreateCommand{}) // indexes 1 and 2: a replay, not counted
	h.create(CreateCommand{})
	j := h.create(CreateCommand{})
	mustOK(t, h.claim(j.ID, left))
	got := h.f.EventCounts()
	if got[EventCreated.String()] != 1 || got[EventClaimed.String()] != 1 || got[EventCompleted.String()] != 0 {
		t.Fatalf("counts %v, want 1 created (the first two skipped) and 1 claimed", got)
	}
}
