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
