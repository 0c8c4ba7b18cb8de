package fsm

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
)

func (h *harness) pushGateway(id string, capacity int) {
	h.t.Helper()
	mustOK(h.t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: id, Address: "http://" + id, Capacity: capacity,
		Actor: head, Delivery: DeliveryPush, Role: RoleRightClaw, Secret: "s-" + id}))
}

func (h *harness) dispatch(step DispatchStep, j *Job, gateway, token string) *Result {
	h.t.Helper()
	return h.apply(CmdDispatch, &DispatchCommand{Now: h.now, Step: step, JobID: j.ID, Gateway: gateway,
		AttemptID: "att-" + token, LeaseToken: token, LeaseNanos: lease, Reason: "busy"})
}

// A push gateway's delivery: leased to the gateway's role before it is
// sent, running once accepted, completed by the role with the lease token;
// a refusal gives the attempt back and routes the task to a gateway that
// has not refused it; no answer in time makes the gateway suspect and
// routes its tasks on; a dead gateway's deliveries end at once.
func TestDispatch(t *testing.T) {
	h := newHarness(t)
	if r := h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "early", Address: "http://e", Capacity: 1, Actor: head,
		Delivery: DeliveryPush, Role: RoleRightClaw, Secret: "s"}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a push gateway before the level: %+v", r)
	}
	h.raiseLevel()
	if r := h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "bad", Address: "http://b", Capacity: 1, Actor: head,
		Delivery: DeliveryPush, Role: HeadRole, Secret: "s"}); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a push gateway leased to head: %+v", r)
	}
	h.pushGateway("ga", 4)
	h.pushGateway("gb", 4)
	// An update that does not say how keeps push, its role and its secret.
	mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "gb", Address: "http://gb2", Capacity: 4, Actor: head}))
	if g := h.f.Read().Gateway("gb"); !g.Pushes() || g.Role != RoleRightClaw || g.Secret != "s-gb" || g.Address != "http://gb2" {
		t.Fatalf("updated gateway %+v", g)
	}

	j := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: j.ID, Actor: head}))
	if r := h.dispatch(DispatchLease, j, "gb", "t1"); !errors.Is(r.Err, ErrIllegalTransition) {
		t.Fatalf("dispatched to a gateway it is not routed to: %+v", r)
	}
	r := h.dispatch(DispatchLease, j, "ga", "t1")
	mustOK(t, r)
	if got := r.Job; got.State != StateRunning || got.Lease.Owner != RoleRightClaw || got.Lease.Token != "t1" || got.Lease.WorkerID != "" ||
		!got.Dispatching() || got.TaskState() != TaskClaimed {
		t.Fatalf("leased: %+v %+v", got, got.Lease)
	}
	if r := h.dispatch(DispatchLease, j, "ga", "t2"); r.Err == nil {
		t.Fatal("a running task leased twice")
	}
	if r := h.dispatch(DispatchAccepted, j, "ga", "stale"); !errors.Is(r.Err, ErrStaleLease) {
		t.Fatalf("a stale acceptance: %+v", r)
	}
	mustOK(t, h.dispatch(DispatchAccepted, j, "ga", "t1"))
	if got := h.job(j.ID); got.Dispatching() || got.TaskState() != TaskRunning || got.Extra().Route.acceptedAt != h.now {
		t.Fatalf("accepted: %+v", got.Extra().Route)
	}
	if r := h.dispatch(DispatchAccepted, j, "ga", "t1"); r.Err != nil || !r.Duplicate {
		t.Fatalf("a repeated acceptance: %+v", r)
	}
	if r := h.dispatch(DispatchRefused, j, "ga", "t1"); !errors.Is(r.Err, ErrIllegalTransition) {
		t.Fatalf("refused after it accepted: %+v", r)
	}
	// The gateway completes it in its role, with the lease token; the
	// other claw may not.
	ref := LeaseRef{JobID: j.ID, Token: "t1"}
	if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left}); !errors.Is(r.Err, ErrNotOwner) {
		t.Fatalf("the other claw completed a delivered task: %+v", r)
	}
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: right}))

	// A gateway's complete may come before the leader records its yes: a
	// delivered task needs no start.
	early := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: early.ID, Actor: head}))
	egw := gatewayOf(h.job(early.ID))
	mustOK(t, h.dispatch(DispatchLease, h.job(early.ID), egw, "te"))
	mustOK(t, h.apply(CmdTaskStep, &TaskStepCommand{Op: TaskComplete, Now: h.now, Ref: LeaseRef{JobID: early.ID, Token: "te"}, Actor: right}))
	if got := h.job(early.ID); got.State != StateDone {
		t.Fatalf("a delivered task completed before its acceptance: %s", got.State)
	}
	if r := h.dispatch(DispatchAccepted, h.job(early.ID), egw, "te"); r.Err == nil {
		t.Fatal("an acceptance after the complete changed the task")
	}

	// Refused by ga: the attempt is given back, and it goes to gb.
	k := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: k.ID, Spec: RouteSpec{Labels: nil}, Actor: head}))
	gw := gatewayOf(h.job(k.ID))
	other := map[string]string{"ga": "gb", "gb": "ga"}[gw]
	mustOK(t, h.dispatch(DispatchLease, h.job(k.ID), gw, "t3"))
	r = h.dispatch(DispatchRefused, h.job(k.ID), gw, "t3")
	mustOK(t, r)
	if got := h.job(k.ID); got.State != StateQueued || got.Attempts != 0 || gatewayOf(got) != other ||
		len(got.Extra().Route.refused) != 1 || got.Extra().Route.refused[0] != gw || got.Extra().Route.dispatchedAt != 0 {
		t.Fatalf("after a refusal: %+v %+v", got, got.Extra().Route)
	}
	// Refused by the other too: none is left, it stays where it is.
	mustOK(t, h.dispatch(DispatchLease, h.job(k.ID), other, "t4"))
	mustOK(t, h.dispatch(DispatchRefused, h.job(k.ID), other, "t4"))
	if got := h.job(k.ID); got.State != StateQueued || gatewayOf(got) != other || len(got.Extra().Route.refused) != 2 {
		t.Fatalf("refused by both: %+v", got.Extra().Route)
	}

	// Unreachable: the gateway turns suspect and its queued tasks go on.
	m := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: m.ID, Actor: head}))
	gw = gatewayOf(h.job(m.ID))
	other = map[string]string{"ga": "gb", "gb": "ga"}[gw]
	mustOK(t, h.dispatch(DispatchLease, h.job(m.ID), gw, "t5"))
	r = h.dispatch(DispatchUnreachable, h.job(m.ID), gw, "t5")
	mustOK(t, r)
	if g := h.f.Read().Gateway(gw); g.Health != HealthSuspect {
		t.Fatalf("an unreachable gateway is %s", g.Health)
	}
	if got := h.job(m.ID); got.State != StateQueued || gatewayOf(got) != other || got.Attempts != 0 {
		t.Fatalf("after no answer: %+v", got)
	}

	// A dead gateway's accepted deliveries end now and go elsewhere.
	mustOK(t, h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: gw, Health: HealthHealthy}}}))
	n := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: n.ID, Actor: head}))
	gw = gatewayOf(h.job(n.ID))
	other = map[string]string{"ga": "gb", "gb": "ga"}[gw]
	mustOK(t, h.dispatch(DispatchLease, h.job(n.ID), gw, "t6"))
	mustOK(t, h.dispatch(DispatchAccepted, h.job(n.ID), gw, "t6"))
	mustOK(t, h.apply(CmdHealthSet, &HealthSetCommand{Now: h.now, Changes: []HealthChange{{Gateway: true, ID: gw, Health: HealthDead}}}))
	if got := h.job(n.ID); got.State != StateQueued || gatewayOf(got) != other || got.Lease != nil {
		t.Fatalf("a dead gateway's delivery: %+v", got)
	} else if !slices.ContainsFunc(got.History(), func(e Event) bool { return e.Type == EventReaped && e.Text == "gateway "+gw+" declared dead" }) {
		t.Fatalf("the reap does not name the dead gateway: %+v", got.History())
	}

	// Deregistered before it accepted: the task goes back and on.
	pushGW := func(id string) {
		mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: id, Address: "http://" + id, Capacity: 4,
			Actor: head, Delivery: DeliveryPush, Role: RoleRightClaw, Secret: "s-" + id, Metadata: map[string]string{"pool": "q"}}))
	}
	pushGW("gq1")
	pushGW("gq2")
	q := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: q.ID, Spec: RouteSpec{Labels: map[string]string{"pool": "q"}}, Actor: head}))
	first := gatewayOf(h.job(q.ID))
	mustOK(t, h.dispatch(DispatchLease, h.job(q.ID), first, "t8"))
	mustOK(t, h.apply(CmdGatewayDeregister, &GatewayDeregisterCommand{Now: h.now, ID: first, Actor: head}))
	if got := h.job(q.ID); got.State != StateQueued || got.Attempts != 0 || gatewayOf(got) == first {
		t.Fatalf("a delivery to a deregistered gateway: %+v (on %s)", got, gatewayOf(got))
	}

	// The gateway's delivery and a task's marks survive a snapshot.
	mustOK(t, h.dispatch(DispatchLease, h.job(n.ID), other, "t7"))
	raw := snapBytes(t, h.f)
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	g := f2.Read().Gateway(other)
	got, _ := f2.Read().Job(n.ID)
	if !g.Pushes() || g.Secret != "s-"+other || g.Role != RoleRightClaw || !got.Dispatching() || got.Extra().Route.dispatchedAt != h.now {
		t.Fatalf("restored %+v %+v", g, got.Extra().Route)
	}
	if k2, _ := f2.Read().Job(k.ID); len(k2.Extra().Route.refused) != 2 {
		t.Fatalf("restored refusals %+v", k2.Extra().Route)
	}
}
