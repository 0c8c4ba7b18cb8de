package fsm

import (
	"strings"
	"testing"
)

// A lease a gateway's death ended is reaped naming the gateway, not the
// worker (which may be healthy): "gateway g1 of worker w2 declared dead",
// and a task's auto-fail message says the same. A worker's own death
// still names the worker, and wins when both die in one entry. Event text
// is replicated state: below LevelDelivery every replica writes the old
// words ("worker w2 declared dead"), as older builds do.
func TestDeadGatewayIsNamedInTheReap(t *testing.T) {
	setup := func(level int) (*harness, map[string]*Job) {
		h := devqHarness(t)
		if level > 0 {
			mustOK(t, h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: level}))
		}
		mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g1", Address: "http://g1", Capacity: 9, Actor: head}))
		mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g2", Address: "http://g2", Capacity: 9, Actor: head}))
		for _, w := range []struct{ id, gw string }{{"w1", "g1"}, {"w2", "g1"}, {"w3", "g2"}, {"w4", "g2"}} {
			mustOK(t, h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: w.id, Gateway: w.gw, Capacity: 4, Actor: left}))
		}
		jobs := map[string]*Job{}
		for _, w := range []string{"w1", "w2", "w3", "w4"} {
			r := h.claim(h.create(CreateCommand{}).ID, Actor{Role: left.Role, WorkerID: w})
			mustOK(t, r)
			jobs[w] = r.Job
		}
		// A task (auto-fails when its lease ends) held by w2, and a job
		// of w2's whose cancel was asked.
		tk := h.enqueue("auth", "run-bash", 0)
		mustOK(t, tk)
		r := h.claim(tk.Job.ID, Actor{Role: left.Role, WorkerID: "w2"})
		mustOK(t, r)
		jobs["task"] = r.Job
		r = h.claim(h.create(CreateCommand{}).ID, Actor{Role: left.Role, WorkerID: "w2"})
		mustOK(t, r)
		jobs["cancel"] = r.Job
		mustOK(t, h.cancel(r.Job.ID))
		h.now += 1e9
		return h, jobs
	}
	last := func(h *harness, j *Job) (*Job, string) {
		got := h.job(j.ID)
		return got, got.History()[len(got.History())-1].Text
	}

	for _, c := range []struct {
		level                        int
		w2, w2Task, w2Cancel, w1, w3 string
	}{
		{0, "worker w2 declared dead", "Auto-failed: its worker w2 was declared dead with no complete/fail reported.",
			"worker w2 declared dead after a cancel", "worker w1 declared dead", "worker w3 declared dead"},
		{LevelIdentity, "worker w2 declared dead", "Auto-failed: its worker w2 was declared dead with no complete/fail reported.",
			"worker w2 declared dead after a cancel", "worker w1 declared dead", "worker w3 declared dead"},
		{LevelDelivery, "gateway g1 of worker w2 declared dead", "Auto-failed: the gateway g1 of its worker w2 was declared dead with no complete/fail reported.",
			"gateway g1 of worker w2 declared dead after a cancel", "worker w1 declared dead", "worker w3 declared dead"},
	} {
		h, jobs := setup(c.level)
		// g1 dies, and in the same entry w1 itself: w1's reap names w1.
		r := h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{
			{Gateway: true, ID: "g1", Health: HealthDead}, {ID: "w1", Health: HealthDead}}})
		mustOK(t, r)
		if len(r.Jobs) != 4 {
			t.Fatalf("level %d: g1 dead ended %d leases", c.level, len(r.Jobs))
		}
		if j, text := last(h, jobs["w2"]); j.State != StateQueued || text != c.w2 {
			t.Errorf("level %d: w2's job %s, reaped %q (want %q)", c.level, j.State, text, c.w2)
		}
		if j, text := last(h, jobs["task"]); j.State != StateFailed || text != c.w2Task || j.Error == nil || j.Error.Message != c.w2Task {
			t.Errorf("level %d: w2's task %s, reaped %q, error %+v (want %q)", c.level, j.State, text, j.Error, c.w2Task)
		}
		if j := h.job(jobs["cancel"].ID); j.State != StateCancelled || !hasEventText(j, c.w2Cancel) {
			t.Errorf("level %d: w2's cancelled job %s, events %+v (want %q)", c.level, j.State, j.History(), c.w2Cancel)
		}
		if _, text := last(h, jobs["w1"]); text != c.w1 {
			t.Errorf("level %d: w1's job reaped %q (want %q)", c.level, text, c.w1)
		}
		if j := h.job(jobs["w3"].ID); j.State != StateRunning {
			t.Errorf("level %d: another gateway's job is %s", c.level, j.State)
		}
		// A worker's own death, its gateway healthy, names the worker.
		mustOK(t, h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{ID: "w3", Health: HealthDead}}}))
		if _, text := last(h, jobs["w3"]); text != c.w3 {
			t.Errorf("level %d: w3's job reaped %q (want %q)", c.level, text, c.w3)
		}
		if j := h.job(jobs["w4"].ID); j.State != StateRunning {
			t.Errorf("level %d: w4's job is %s", c.level, j.State)
		}
	}
}

func hasEventText(j *Job, text string) bool {
	for _, e := range j.History() {
		if e.Text == text || strings.HasSuffix(e.Text, text) {
			return true
		}
	}
	return false
}
