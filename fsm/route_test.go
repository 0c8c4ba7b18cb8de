package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Routing: the least loaded healthy gateway that meets the job's
// requirements and has free capacity, the lowest id on a tie; none is
// ErrNoHealthyGateway and changes nothing; a gateway's death sends its
// queued jobs to another, and a gateway back to health takes the jobs
// left on one that is not; a finished job drops its route.
func TestRoute(t *testing.T) {
	h := newHarness(t)
	gw := func(id string, capacity int, meta map[string]string) {
		if r := h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: id, Address: "http://" + id, Capacity: capacity,
			Metadata: meta, Actor: head}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	gw("gb", 2, map[string]string{"zone": "eu"})
	gw("ga", 2, map[string]string{"zone": "us"})
	h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "wb", Gateway: "gb", Capabilities: []string{"gpu"}, Capacity: 1, Actor: head})
	route := func(id string, spec RouteSpec) *Result {
		return h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: id, Spec: spec, Actor: head})
	}
	var jobs []*Job
	for range 5 {
		jobs = append(jobs, h.create(CreateCommand{}))
	}
	// Ties go to the lowest id, then the least loaded.
	for i, want := range []string{"ga", "gb", "ga"} {
		if r := route(jobs[i].ID, RouteSpec{}); r.Err != nil || r.Job.Target.String() != want || r.Gateway.ID != want {
			t.Fatalf("route %d: %+v, want %s", i, r, want)
		}
	}
	// ga is full (2); gb has one place, and the gpu worker.
	if r := route(jobs[3].ID, RouteSpec{Labels: map[string]string{"zone": "us"}}); !errors.Is(r.Err, ErrNoHealthyGateway) {
		t.Fatalf("a full gateway took a job: %+v", r)
	}
	if j, _ := h.f.Read().Job(jobs[3].ID); j.Target.String() != "" || j.Extra().Route != nil {
		t.Fatalf("a refused route changed the job: %+v", j)
	}
	if r := route(jobs[3].ID, RouteSpec{Capabilities: []string{"gpu"}, Key: "dispatch-3"}); r.Err != nil || r.Job.Target.String() != "gb" {
		t.Fatalf("gpu route: %+v", r)
	}
	// The same dispatch again: the first answer, nothing changed (without
	// the key, gb being full, it would be refused).
	before := h.f.AppliedIndex()
	if r := route(jobs[3].ID, RouteSpec{Key: "dispatch-3"}); r.Err != nil || !r.Duplicate || r.Job.Target.String() != "gb" || r.Gateway.ID != "gb" ||
		len(r.Job.Extra().Route.Capabilities) != 1 {
		t.Fatalf("repeated dispatch: %+v", r)
	}
	if j, _ := h.f.Read().Job(jobs[3].ID); j.ModifyIndex > before {
		t.Fatal("a repeated dispatch changed the job")
	}
	if r := route(jobs[4].ID, RouteSpec{}); !errors.Is(r.Err, ErrNoHealthyGateway) {
		t.Fatalf("every gateway is full, yet: %+v", r)
	}
	// A worker of gb claims its job: targets name its gateway.
	c := h.apply(CmdClaim, &ClaimCommand{Now: h.now, Streams: []string{DefaultStream}, Targets: []string{"left_claw", "wb", "gb"}, Actor: Actor{Role: "left_claw", WorkerID: "wb"}, AttemptID: "a1", LeaseToken: "t1", LeaseNanos: lease})
	if !c.Claimed || c.Job.ID != jobs[1].ID {
		t.Fatalf("claim by gb's worker: %+v", c)
	}
	// The snapshot keeps the routes (version 4).
	s, _ := h.f.Snapshot()
	var sink memSink
	if err := s.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if j, _ := f2.Read().Job(jobs[3].ID); j.Extra().Route == nil || len(j.Extra().Route.Capabilities) != 1 || j.Target.String() != "gb" {
		t.Fatalf("restored route: %+v", j)
	}

	// ga dies: its queued jobs (0 and 2) need a gateway; gb has no room
	// (it runs job 1 and holds job 3), so they stay until one revives.
	r := h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: "ga", Health: HealthDead}}})
	if r.Err != nil || len(r.Jobs) != 0 {
		t.Fatalf("ga dead, gb full: %+v", r)
	}
	// A new gateway takes them at once.
	r = h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "gc", Address: "http://gc", Capacity: 1, Actor: head})
	if r.Err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != jobs[0].ID {
		t.Fatalf("a new gateway with room for one took %+v", r.Jobs)
	}
	// More room for it (a re-registration) takes the other; so would a
	// gateway back to health.
	r = h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "gc", Address: "http://gc", Capacity: 4, Actor: head})
	if r.Err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != jobs[2].ID {
		t.Fatalf("more room took %+v", r.Jobs)
	}
	h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: "gb", Health: HealthSuspect}}})
	r = h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: "gb", Health: HealthHealthy}}})
	if r.Err != nil || len(r.Jobs) != 0 {
		t.Fatalf("no orphan was left, yet a revival moved %+v", r.Jobs)
	}
	for _, i := range []int{0, 2} {
		if j, _ := h.f.Read().Job(jobs[i].ID); j.Target.String() != "gc" || j.History()[len(j.History())-1].Type != EventRouted {
			t.Fatalf("job %d after the revival: target %s", i, j.Target)
		}
	}
	// gb is deregistered: its queued job 3 needs a gpu worker nobody else
	// has, so it stays; its running job 1 is unaffected by routing.
	r = h.apply(CmdGatewayDeregister, &GatewayDeregisterCommand{Now: h.now, ID: "gb", Actor: head})
	if r.Err != nil || len(r.Jobs) != 0 {
		t.Fatalf("deregister gb: %+v", r)
	}
	// A finished job drops its route.
	done := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: jobs[1].ID, AttemptID: "a1", Token: "t1"},
		Actor: Actor{Role: "left_claw", WorkerID: "wb"}, Result: []byte(`{}`)})
	if done.Err != nil || done.Job.Extra().Route != nil || done.Job.Target.String() != "gb" {
		t.Fatalf("complete: %+v", done)
	}
}
