package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The registry: a re-registration updates in place (keeping when it was
// first registered), a worker needs its gateway, deregistering a gateway
// takes its workers with it, and a state with registry entries is written
// as snapshot version 4 and restored whole.
func TestGatewayAndWorkerRegistry(t *testing.T) {
	h := newHarness(t)
	reg := func(id string, capacity int) *Result {
		return h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: id, Address: "http://" + id,
			Metadata: map[string]string{"zone": "eu"}, Capacity: capacity, Actor: head})
	}
	if r := reg("g1", 0); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("capacity 0: %v", r.Err)
	}
	first := reg("g1", 4)
	if first.Err != nil || first.Gateway.Health != HealthHealthy || first.Gateway.RegisteredAt != h.now {
		t.Fatalf("register: %+v", first)
	}
	h.now += 1e9
	again := reg("g1", 8)
	if again.Err != nil || again.Gateway.Capacity != 8 || again.Gateway.RegisteredAt != first.Gateway.RegisteredAt ||
		again.Gateway.UpdatedAt != h.now || len(h.f.Read().Gateways()) != 1 {
		t.Fatalf("re-register: %+v", again.Gateway)
	}
	worker := func(id, gw string) *Result {
		return h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: id, Gateway: gw,
			Capabilities: []string{"gpu", "bash", "gpu"}, Capacity: 1, Actor: left})
	}
	if r := worker("w1", "nope"); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("a worker of an unknown gateway: %v", r.Err)
	}
	w := worker("w1", "g1")
	if w.Err != nil || len(w.Worker.Capabilities) != 2 || !w.Worker.HasCapabilities([]string{"bash", "gpu"}) || w.Worker.HasCapabilities([]string{"tpu"}) {
		t.Fatalf("worker: %+v", w)
	}
	reg("g2", 1)
	worker("w2", "g2")

	write := func(f *FSM) []byte {
		s, _ := f.Snapshot()
		var sink memSink
		if err := s.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		return sink.Bytes()
	}
	raw := write(h.f)
	if v := snapVersion(t, raw); v != 4 {
		t.Fatalf("snapshot version %d, want 4", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if g := f2.Read().Gateway("g1"); g == nil || g.Capacity != 8 || g.Metadata["zone"] != "eu" || len(f2.Read().Workers("")) != 2 {
		t.Fatalf("restored: %+v", g)
	}
	if !bytes.Equal(write(f2), raw) {
		t.Fatal("the restored state writes another snapshot")
	}

	gone := h.apply(CmdGatewayDeregister, &GatewayDeregisterCommand{Now: h.now, ID: "g1", Actor: head})
	if gone.Err != nil || len(gone.Workers) != 1 || gone.Workers[0].ID != "w1" {
		t.Fatalf("deregister: %+v", gone)
	}
	if rd := h.f.Read(); rd.Gateway("g1") != nil || rd.Worker("w1") != nil || rd.Worker("w2") == nil {
		t.Fatal("deregistering g1 left its worker or took another's")
	}
	if r := h.apply(CmdWorkerDeregister, &WorkerDeregisterCommand{Now: h.now, ID: "w1", Actor: head}); !errors.Is(r.Err, ErrNotFound) {
		t.Fatalf("deregister of a removed worker: %v", r.Err)
	}
}

// A health change is committed only where it changes something; an unknown
// health refuses the whole command; a re-registration keeps the health.
func TestHealthSet(t *testing.T) {
	h := newHarness(t)
	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g1", Address: "http://g1", Capacity: 1, Actor: head})
	h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "w1", Gateway: "g1", Capacity: 1, Actor: head})
	h.now += 5e9
	r := h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{
		{Gateway: true, ID: "g1", Health: HealthDead}, {ID: "w1", Health: HealthHealthy}, {ID: "gone", Health: HealthDead}}})
	if r.Err != nil || len(r.Gateways) != 1 || len(r.Workers) != 0 || r.Gateways[0].HealthAt != h.now {
		t.Fatalf("health set: %+v", r)
	}
	if r := h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{
		{ID: "w1", Health: HealthDead}, {Gateway: true, ID: "g1", Health: "poorly"}}}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("unknown health: %v", r.Err)
	}
	if w := h.f.Read().Worker("w1"); w.Health != HealthHealthy {
		t.Fatalf("a refused health set changed w1 to %s", w.Health)
	}
	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g1", Address: "http://g1b", Capacity: 2, Actor: head})
	if g := h.f.Read().Gateway("g1"); g.Health != HealthDead || g.Address != "http://g1b" {
		t.Fatalf("re-registration: %+v", g)
	}
}

// A worker declared dead loses its leases at once: its running job goes
// back to the queue (the attempt counted, as an expiry does) long before
// the lease would run out; a dead gateway's workers lose theirs; another
// worker's job keeps running.
func TestDeadWorkerReleasesItsLeases(t *testing.T) {
	h := newHarness(t)
	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g1", Address: "http://g1", Capacity: 4, Actor: head})
	h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "g2", Address: "http://g2", Capacity: 4, Actor: head})
	for _, w := range []struct{ id, gw string }{{"w1", "g1"}, {"w2", "g1"}, {"w3", "g2"}} {
		h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: w.id, Gateway: w.gw, Capacity: 1, Actor: head})
	}
	jobs := map[string]*Job{}
	for _, w := range []string{"w1", "w2", "w3"} {
		j := h.create(CreateCommand{})
		r := h.claim(j.ID, Actor{Role: left.Role, WorkerID: w})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		jobs[w] = r.Job
	}
	state := func(w string) *Job {
		j, _ := h.f.Read().Job(jobs[w].ID)
		return j
	}
	h.now += 1e9
	r := h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{ID: "w1", Health: HealthDead}}})
	if r.Err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != jobs["w1"].ID {
		t.Fatalf("w1 dead: %+v", r)
	}
	if j := state("w1"); j.State != StateQueued || j.Attempts != 1 || j.Lease != nil ||
		j.History()[len(j.History())-1].Text != "worker w1 declared dead" {
		t.Fatalf("w1's job: %s attempts %d lease %+v events %+v", j.State, j.Attempts, j.Lease, j.History())
	}
	if state("w2").State != StateRunning || state("w3").State != StateRunning {
		t.Fatal("another worker's job lost its lease")
	}
	r = h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: "g1", Health: HealthDead}}})
	if r.Err != nil || len(r.Jobs) != 1 || state("w2").State != StateQueued || state("w3").State != StateRunning {
		t.Fatalf("g1 dead: %+v; w2's job %s, w3's %s", r, state("w2").State, state("w3").State)
	}
}
