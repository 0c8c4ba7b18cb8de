package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// devqHarness is a harness with a registry, a session and an active stream.
func devqHarness(t *testing.T) *harness {
	h := newHarness(t)
	mustOK(t, h.apply(CmdRegistrySet, &RegistrySetCommand{Now: h.now, Actor: head, Registry: Registry{
		Classes: DefaultTaskClasses,
		Tools: []Tool{{Name: "llm", TaskClass: "LLM_HEAVY"}, {Name: "migrate", TaskClass: "MEDIUM_SCRIPT", Timeout: 1800},
			{Name: "run-bash", TaskClass: "FAST_SCRIPT"}},
	}}))
	mustOK(t, h.apply(CmdSessionCreate, &SessionCreateCommand{Now: h.now, ID: "ses_1", Name: "api-v2", Actor: head}))
	mustOK(t, h.apply(CmdStreamCreate, &StreamCreateCommand{Now: h.now, ID: "str_1", Name: "auth", Session: "api-v2",
		Instructions: "JWT per PRD 4.2", Actor: head}))
	return h
}

func (h *harness) enqueue(stream, tool string, timeout int64) *Result {
	h.t.Helper()
	return h.apply(CmdTaskCreate, &TaskCreateCommand{Now: h.now, ID: h.nextID("tsk"), Stream: stream, ToolName: tool,
		Timeout: timeout, Payload: []byte(`{"n":1}`), Actor: head})
}

func TestTaskTimeoutComesFromOverrideToolOrClass(t *testing.T) {
	h := devqHarness(t)
	for _, c := range []struct {
		tool    string
		timeout int64
		want    int64
		class   string
	}{{"run-bash", 0, 30, "FAST_SCRIPT"}, {"migrate", 0, 1800, "MEDIUM_SCRIPT"}, {"llm", 0, 900, "LLM_HEAVY"}, {"llm", 5, 5, "LLM_HEAVY"}} {
		r := h.enqueue("auth", c.tool, c.timeout)
		mustOK(t, r)
		if j := r.Job; j.Extra().Timeout != c.want || j.Extra().TaskClass != c.class || j.Extra().LeaseSeconds != 2*c.want || j.Extra().ToolName != c.tool || !j.IsTask() {
			t.Errorf("%s --timeout %d: timeout %d class %s lease %d, want %d %s %d", c.tool, c.timeout, j.Extra().Timeout, j.Extra().TaskClass, j.Extra().LeaseSeconds, c.want, c.class, 2*c.want)
		}
	}
	r := h.enqueue("auth", "nope", 0)
	if !errors.Is(r.Err, ErrInvalid) || !strings.Contains(r.Err.Error(), "known tools: llm, migrate, run-bash") {
		t.Fatalf("unknown tool: %v", r.Err)
	}
	if r := h.enqueue("nowhere", "llm", 0); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("unknown stream: %v", r.Err)
	}
}

func TestCatalogNamesAreUniqueAndEndingCascades(t *testing.T) {
	h := devqHarness(t)
	if r := h.apply(CmdSessionCreate, &SessionCreateCommand{Now: h.now, ID: "ses_2", Name: "api-v2", Actor: head}); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("second session api-v2: %v", r.Err)
	}
	if r := h.apply(CmdStreamCreate, &StreamCreateCommand{Now: h.now, ID: "str_2", Name: "auth", Session: "api-v2", Actor: head}); !errors.Is(r.Err, ErrExists) {
		t.Fatalf("second stream auth: %v", r.Err)
	}
	mustOK(t, h.apply(CmdStreamCreate, &StreamCreateCommand{Now: h.now, ID: "str_3", Name: "ui", Session: "api-v2", Actor: head}))
	r := h.apply(CmdSessionEnd, &SessionEndCommand{Now: h.now + 5, Name: "api-v2", Actor: head})
	mustOK(t, r)
	if r.Session.Status != StatusEnded || r.Session.EndedAt != h.now+5 || len(r.Streams) != 2 {
		t.Fatalf("session end: %+v, %d streams ended", r.Session, len(r.Streams))
	}
	for _, s := range h.f.Read().Streams("api-v2") {
		if !s.Ended() {
			t.Errorf("stream %s still %s after its session ended", s.Name, s.Status)
		}
	}
	if r := h.apply(CmdStreamCreate, &StreamCreateCommand{Now: h.now, ID: "str_4", Name: "late", Session: "api-v2", Actor: head}); !errors.Is(r.Err, ErrEnded) {
		t.Fatalf("stream in an ended session: %v", r.Err)
	}
}

// An ended stream takes no new jobs (tasks or v0) and hands out none; its
// queued tasks stay.
func TestEndedStreamKeepsItsQueuedTasksUnclaimed(t *testing.T) {
	h := devqHarness(t)
	queued := h.enqueue("auth", "llm", 0).Job
	if j := h.f.Read().PeekTask("auth"); j == nil || j.ID != queued.ID {
		t.Fatalf("peek before the end: %v", j)
	}
	mustOK(t, h.apply(CmdStreamEnd, &StreamEndCommand{Now: h.now, Name: "auth", Actor: head}))
	if r := h.enqueue("auth", "llm", 0); !errors.Is(r.Err, ErrStreamEnded) {
		t.Fatalf("enqueue into an ended stream: %v", r.Err)
	}
	if r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: "v0", Stream: "auth", Payload: []byte(`1`), Actor: head}); !errors.Is(r.Err, ErrStreamEnded) {
		t.Fatalf("v0 create into an ended stream: %v", r.Err)
	}
	if r := h.claimNext([]string{"auth"}, left); r.Claimed {
		t.Fatalf("claimed %s from an ended stream", r.Job.ID)
	}
	if r := h.claim(queued.ID, left); !errors.Is(r.Err, ErrStreamEnded) {
		t.Fatalf("claim by id in an ended stream: %v", r.Err)
	}
	if j := h.f.Read().PeekTask("auth"); j != nil {
		t.Fatalf("peek of an ended stream: %s", j.ID)
	}
	if j := h.job(queued.ID); j.State != StateQueued {
		t.Fatalf("queued task is %s after its stream ended", j.State)
	}
}

func TestTaskCompleteNeedsSummaryAndAutoFailAtTwiceTimeout(t *testing.T) {
	h := devqHarness(t)
	task := h.enqueue("auth", "run-bash", 0).Job // 30 s
	c := h.claimNext([]string{"auth"}, left)
	if !c.Claimed || c.Job.ID != task.ID || c.Job.Lease.ExpiresAt != h.now+60e9 {
		t.Fatalf("claim: %+v", c)
	}
	ref := LeaseRef{JobID: task.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}
	for _, bad := range []string{`{"ok":1}`, `{"summary":5}`, `"summary"`, ``} {
		r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left, Result: []byte(bad)})
		if !errors.Is(r.Err, ErrInvalid) || h.job(task.ID).State != StateRunning {
			t.Fatalf("complete with result %q: %v, task %s", bad, r.Err, h.job(task.ID).State)
		}
	}
	// A heartbeat pushes the marks back; the reaper fails it at twice its
	// timeout after the last one.
	h.now += 50e9
	mustOK(t, h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: left, LeaseNanos: 300e9}))
	if r := h.apply(CmdReap, &ReapCommand{Now: h.now + 59e9, Max: 10}); len(r.Jobs) != 0 {
		t.Fatal("reaped before twice the timeout since the heartbeat")
	}
	r := h.apply(CmdReap, &ReapCommand{Now: h.now + 60e9, Max: 10})
	if len(r.Jobs) != 1 {
		t.Fatalf("reap at twice the timeout took %d", len(r.Jobs))
	}
	j := h.job(task.ID)
	want := "Auto-failed: task exceeded 2x timeout (30s) with no complete/fail reported. Likely worker crash or disconnect."
	if j.State != StateFailed || j.Error == nil || j.Error.Code != AutoFailCode || j.Error.Message != want {
		t.Fatalf("auto-failed task: %s %+v", j.State, j.Error)
	}

	// A task completes with a summary.
	t2 := h.enqueue("auth", "run-bash", 0).Job
	c = h.claimNext([]string{"auth"}, left)
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Actor: left, Result: []byte(`{"summary":"done","rows":3}`),
		Ref: LeaseRef{JobID: t2.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}}))
}

func TestRequeueClonesAFailedTask(t *testing.T) {
	h := devqHarness(t)
	task := h.enqueue("auth", "migrate", 7).Job
	if r := h.apply(CmdTaskCreate, &TaskCreateCommand{Now: h.now, ID: "clone0", ClonedFrom: task.ID, Actor: head}); !errors.Is(r.Err, ErrIllegalTransition) {
		t.Fatalf("requeue of a queued task: %v", r.Err)
	}
	c := h.claimNext([]string{"auth"}, left)
	mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Actor: left, Error: JobError{Message: "boom"},
		Ref: LeaseRef{JobID: task.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}}))
	r := h.apply(CmdTaskCreate, &TaskCreateCommand{Now: h.now, ID: "clone1", ClonedFrom: task.ID, Actor: head})
	mustOK(t, r)
	cl := r.Job
	if cl.State != StateQueued || cl.Extra().ToolName != "migrate" || cl.Extra().Timeout != 7 || cl.Stream != "auth" || string(cl.Payload) != `{"n":1}` ||
		cl.Extra().ClonedFrom != task.ID || cl.Attempts != 0 {
		t.Fatalf("clone: %+v", cl)
	}
	if h.job(task.ID).State != StateFailed {
		t.Fatal("the original did not stay failed")
	}
}

func TestTaskPurgeTakesOnlyFinishedTasks(t *testing.T) {
	h := devqHarness(t)
	queued := h.enqueue("auth", "llm", 0).Job
	running := h.enqueue("auth", "llm", 0).Job
	done := h.enqueue("auth", "llm", 0).Job
	failed := h.enqueue("auth", "llm", 0).Job
	for _, j := range []*Job{queued, running, done, failed} {
		if j != queued {
			h.claim(j.ID, left)
		}
	}
	lease := func(id string) LeaseRef {
		l := h.job(id).Lease
		return LeaseRef{JobID: id, AttemptID: l.AttemptID, Token: l.Token}
	}
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: lease(done.ID), Actor: left, Result: []byte(`{"summary":"s"}`)}))
	mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: lease(failed.ID), Actor: left}))
	v0 := h.create(CreateCommand{Stream: "auth"}) // not a task: not the task purge's
	r := h.apply(CmdTaskPurge, &TaskPurgeCommand{Now: h.now + 1, Before: h.now + 1, Max: 100})
	if len(r.Jobs) != 2 {
		t.Fatalf("purged %d, want the done and the failed task", len(r.Jobs))
	}
	for _, id := range []string{queued.ID, running.ID, v0.ID} {
		h.job(id)
	}
	for _, id := range []string{done.ID, failed.ID} {
		if _, err := h.f.Read().Job(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("finished task %s not purged", id)
		}
	}
	checkIndexes(t, h.f)
}

func TestRegistryWithAnErrorChangesNothing(t *testing.T) {
	h := devqHarness(t)
	before := h.f.Read().Registry()
	r := h.apply(CmdRegistrySet, &RegistrySetCommand{Now: h.now, Actor: head, Registry: Registry{
		Tools: []Tool{{Name: "x", TaskClass: "GIGANTIC"}}}})
	if !errors.Is(r.Err, ErrInvalid) || !strings.Contains(r.Err.Error(), `unknown task class "GIGANTIC"`) {
		t.Fatalf("bad registry: %v", r.Err)
	}
	if h.f.Read().Registry() != before {
		t.Fatal("a refused registry replaced the one in force")
	}
}

// A state with developer-queue data is written as snapshot version 3 and
// restored whole; one without is still written as version 2.
func TestSnapshotVersions(t *testing.T) {
	write := func(f *FSM) []byte {
		s, _ := f.Snapshot()
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()
	}
	plain := newHarness(t)
	plain.create(CreateCommand{})
	if v := snapVersion(t, write(plain.f)); v != 2 {
		t.Fatalf("a state without the developer queue wrote version %d", v)
	}
	h := devqHarness(t)
	task := h.enqueue("auth", "migrate", 0).Job
	raw := write(h.f)
	if v := snapVersion(t, raw); v != 3 {
		t.Fatalf("version %d", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	rd := f2.Read()
	j, _ := rd.Job(task.ID)
	st, _ := rd.Stream("auth")
	if j == nil || j.Extra().ToolName != "migrate" || j.Extra().Timeout != 1800 || st == nil || st.Instructions != "JWT per PRD 4.2" ||
		rd.Registry().Tool("migrate") == nil || len(rd.Sessions()) != 1 {
		t.Fatalf("restored: job %+v stream %+v", j, st)
	}
	if stateHash(t, h.f) != stateHash(t, f2) {
		t.Fatal("restored state differs")
	}
}

func snapVersion(t *testing.T, raw []byte) int {
	t.Helper()
	_, h, err := readSnapshot(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return h.Version
}
