package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func (h *harness) raiseLevel() {
	h.t.Helper()
	mustOK(h.t, h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: LatestLevel}))
}

// claimAs claims job id for actor with the targets the service would put
// in the command (the state's own, which a strict state machine ignores in
// favour of its own).
func (h *harness) claimAs(id string, a Actor, proposed ...string) *Result {
	h.t.Helper()
	if proposed == nil {
		proposed = []string{a.Role, a.WorkerID}
	}
	return h.apply(CmdClaim, &ClaimCommand{Now: h.now, JobID: id, Targets: proposed, Actor: a,
		AttemptID: h.nextID("att"), LeaseToken: h.nextID("tok"), LeaseNanos: lease})
}

// The hole the identity level closes, in the state machine: a claw that
// names the other role, or a worker id of the other role, as its worker id
// takes nothing, whatever targets the command carries.
func TestClawCannotPoseAsTheOtherRole(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	forRight := h.create(CreateCommand{Target: RoleRightClaw})
	// The left claw names right_claw as its worker id, and a proposer that
	// trusted names would put right_claw among its targets.
	r := h.claimAs(forRight.ID, Actor{Role: RoleLeftClaw, WorkerID: RoleRightClaw}, RoleLeftClaw, RoleRightClaw)
	if !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("a role's name as worker id: %v", r.Err)
	}
	r = h.claimAs(forRight.ID, Actor{Role: RoleLeftClaw, WorkerID: "lw"}, RoleLeftClaw, "lw", RoleRightClaw)
	if !errors.Is(r.Err, ErrTargetMismatch) {
		t.Fatalf("left claim of a right job: %v", r.Err)
	}
	// A worker id belongs to the role that first used it.
	mustOK(t, h.claimAs(forRight.ID, Actor{Role: RoleRightClaw, WorkerID: "rw"}))
	forRW := h.create(CreateCommand{Target: "rw"})
	r = h.claimAs(forRW.ID, Actor{Role: RoleLeftClaw, WorkerID: "rw"})
	if !errors.Is(r.Err, ErrWorkerIDTaken) || r.Job != nil {
		t.Fatalf("left claw as right's worker: %+v", r)
	}
	if r := h.claimNext(nil, Actor{Role: RoleLeftClaw, WorkerID: "rw"}); !errors.Is(r.Err, ErrWorkerIDTaken) {
		t.Fatalf("claim-next as right's worker: %+v", r)
	}
	if j, _ := h.f.Read().Job(forRW.ID); j.State != StateQueued {
		t.Fatalf("the worker's job is %s", j.State)
	}
	mustOK(t, h.claimAs(forRW.ID, Actor{Role: RoleRightClaw, WorkerID: "rw"}))
	if got := h.f.Read().WorkerIDRole("rw"); got != RoleRightClaw {
		t.Fatalf("rw bound to %q", got)
	}
}

// A routed job's target says it is a gateway: a worker named as the
// gateway takes none of its jobs; a registered worker of the gateway does.
// Raising the level tags the jobs routed before it.
func TestGatewayTargetIsNoWorkerID(t *testing.T) {
	h := newHarness(t)
	mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "gw", Address: "http://gw", Capacity: 9, Actor: head}))
	mustOK(t, h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "gw-w", Gateway: "gw", Capacity: 1, Actor: left}))
	before := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: before.ID, Actor: head}))
	if j, _ := h.f.Read().Job(before.ID); j.Target.String() != "gw" {
		t.Fatalf("routed before the level: target %q", j.Target)
	}
	h.raiseLevel()
	j, _ := h.f.Read().Job(before.ID)
	if kind, name := j.TargetOf(); j.Target.String() != "g/gw" || kind != TargetGateway || name != "gw" {
		t.Fatalf("after the level: target %q (%s %s)", j.Target, kind, name)
	}
	after := h.create(CreateCommand{})
	mustOK(t, h.apply(CmdRoute, &RouteCommand{Now: h.now, JobID: after.ID, Actor: head}))
	for _, id := range []string{before.ID, after.ID} {
		r := h.claimAs(id, Actor{Role: RoleRightClaw, WorkerID: "gw"}, RoleRightClaw, "gw")
		if !errors.Is(r.Err, ErrTargetMismatch) {
			t.Fatalf("a worker named gw claimed %s: %+v", id, r)
		}
	}
	for _, id := range []string{before.ID, after.ID} {
		mustOK(t, h.claimAs(id, Actor{Role: RoleLeftClaw, WorkerID: "gw-w"}))
	}
	if n := len(h.f.Read().t.gatewayJobs("gw")); n != 2 {
		t.Fatalf("gateway jobs %d", n)
	}
}

// A lease token is not an identity: a step with the current token from
// another role, or from another worker than the claim's, is refused; a
// stale token is stale whoever sends it; head overrides; a repeat by
// another role is no duplicate. Before the level, the token alone sufficed
// (as the builds before it apply the same entries).
func TestLeaseTokenIsNotAnIdentity(t *testing.T) {
	for _, strict := range []bool{false, true} {
		h := newHarness(t)
		if strict {
			h.raiseLevel()
		}
		j := h.create(CreateCommand{})
		owner := Actor{Role: RoleLeftClaw, WorkerID: "w1"}
		c := h.claimAs(j.ID, owner)
		mustOK(t, c)
		ref := LeaseRef{JobID: j.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}
		thief := Actor{Role: RoleRightClaw, WorkerID: "r1"}
		r := h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: thief, LeaseNanos: lease})
		if strict != errors.Is(r.Err, ErrNotOwner) {
			t.Fatalf("strict %v: another role's heartbeat with the token: %v", strict, r.Err)
		}
		if !strict {
			continue
		}
		sibling := Actor{Role: RoleLeftClaw, WorkerID: "w2"}
		if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: sibling, Result: []byte(`1`)}); !errors.Is(r.Err, ErrNotOwner) {
			t.Fatalf("another worker's complete: %v", r.Err)
		}
		if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: LeaseRef{JobID: j.ID, Token: "old"}, Actor: thief}); !errors.Is(r.Err, ErrStaleLease) {
			t.Fatalf("a stale token: %v", r.Err)
		}
		// The role alone (a v0 client that names no worker) is enough.
		mustOK(t, h.apply(CmdHeartbeat, &HeartbeatCommand{Now: h.now, Ref: ref, Actor: Actor{Role: RoleLeftClaw}, LeaseNanos: lease}))
		mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: owner, Result: []byte(`1`)}))
		if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: owner, Result: []byte(`1`)}); !r.Duplicate {
			t.Fatalf("the owner's repeat: %+v", r)
		}
		if r := h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: thief, Result: []byte(`2`)}); r.Duplicate || r.Err == nil {
			t.Fatalf("another role's repeat: %+v", r)
		}
		if err := h.f.Read().MayAct("complete", ref, thief); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("MayAct of the finished attempt by another role: %v", err)
		}
		// Head overrides with or without the token.
		k := h.create(CreateCommand{})
		mustOK(t, h.claimAs(k.ID, owner))
		mustOK(t, h.apply(CmdRelease, &ReleaseCommand{Now: h.now, Ref: LeaseRef{JobID: k.ID}, Actor: head}))
	}
}

// What a claw sees: untargeted jobs, its role's, its role's workers',
// routed ones, and those it holds or held; counts and the unmatched count
// only those.
func TestWhatAClawSees(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	free := h.create(CreateCommand{Stream: "s"})
	forLeft := h.create(CreateCommand{Stream: "s", Target: RoleLeftClaw})
	forRight := h.create(CreateCommand{Stream: "s", Target: RoleRightClaw})
	mustOK(t, h.claimAs(free.ID, Actor{Role: RoleRightClaw, WorkerID: "rw"}))
	forRW := h.create(CreateCommand{Stream: "s", Target: "rw"})
	forNobody := h.create(CreateCommand{Stream: "s", Target: "unbound"})
	r := h.f.Read()
	for _, c := range []struct {
		j          *Job
		left, righ bool
	}{
		{free, true, true}, {forLeft, true, false}, {forRight, false, true}, {forRW, false, true}, {forNobody, false, false},
	} {
		j, _ := r.Job(c.j.ID)
		if r.Sees(RoleLeftClaw, j) != c.left || r.Sees(RoleRightClaw, j) != c.righ || !r.Sees(HeadRole, j) {
			t.Errorf("job targeted at %q: left %v right %v", j.Target, r.Sees(RoleLeftClaw, j), r.Sees(RoleRightClaw, j))
		}
	}
	count := func(role string, st State) int {
		n := 0
		for _, c := range h.f.Read().StreamCountsFor(role) {
			if c.Stream == "s" && c.State == st {
				n += c.N
			}
		}
		return n
	}
	if q, run := count(RoleLeftClaw, StateQueued), count(RoleLeftClaw, StateRunning); q != 1 || run != 1 {
		t.Errorf("left counts queued %d running %d, want 1 and 1", q, run)
	}
	if q := count(RoleRightClaw, StateQueued); q != 2 {
		t.Errorf("right counts queued %d, want 2", q)
	}
	if q := count(HeadRole, StateQueued); q != 4 {
		t.Errorf("head counts queued %d, want 4", q)
	}
}

// A binding lapses after WorkerIDIdle unused: the purge drops it, and then
// another role may take the id. A registration binds as a claim does.
func TestWorkerIDBindingLapses(t *testing.T) {
	h := newHarness(t)
	h.raiseLevel()
	mustOK(t, h.apply(CmdGatewayRegister, &GatewayRegisterCommand{Now: h.now, ID: "gw", Address: "http://gw", Capacity: 9, Actor: head}))
	mustOK(t, h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "reg", Gateway: "gw", Capacity: 1, Actor: left}))
	if r := h.apply(CmdWorkerRegister, &WorkerRegisterCommand{Now: h.now, ID: "reg", Gateway: "gw", Capacity: 2, Actor: right}); !errors.Is(r.Err, ErrWorkerIDTaken) {
		t.Fatalf("right re-registers left's worker: %v", r.Err)
	}
	if r := h.apply(CmdWorkerDeregister, &WorkerDeregisterCommand{Now: h.now, ID: "reg", Actor: right}); !errors.Is(r.Err, ErrNotAllowed) {
		t.Fatalf("right removes left's worker: %v", r.Err)
	}
	if r := h.apply(CmdGatewayDeregister, &GatewayDeregisterCommand{Now: h.now, ID: "gw", Actor: left}); !errors.Is(r.Err, ErrNotAllowed) {
		t.Fatalf("a claw removes a gateway: %v", r.Err)
	}
	j := h.create(CreateCommand{})
	mustOK(t, h.claimAs(j.ID, Actor{Role: RoleLeftClaw, WorkerID: "w"}))
	h.now += WorkerIDIdle / 2
	mustOK(t, h.apply(CmdPurge, &PurgeCommand{Now: h.now, Before: 0, Max: 100}))
	if h.f.Read().WorkerIDRole("w") != RoleLeftClaw {
		t.Fatal("a binding half its idle time old was dropped")
	}
	h.now += WorkerIDIdle
	mustOK(t, h.apply(CmdPurge, &PurgeCommand{Now: h.now, Before: 0, Max: 100}))
	if h.f.Read().WorkerIDRole("w") != "" || h.f.Read().WorkerIDRole("reg") != "" {
		t.Fatalf("lapsed bindings kept: %+v", h.f.Read().WorkerBindings())
	}
	k := h.create(CreateCommand{})
	mustOK(t, h.claimAs(k.ID, Actor{Role: RoleRightClaw, WorkerID: "w"}))
}

// The level and the bindings survive a snapshot (version 9 on); a state
// below the level is written as before.
func TestLevelAndBindingsSnapshot(t *testing.T) {
	h := newHarness(t)
	j := h.create(CreateCommand{})
	if v := snapVersion(t, snapBytes(t, h.f)); v >= 9 {
		t.Fatalf("a state below the level written as version %d", v)
	}
	h.raiseLevel()
	mustOK(t, h.claimAs(j.ID, Actor{Role: RoleLeftClaw, WorkerID: "w"}))
	raw := snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != snapshotVersion {
		t.Fatalf("a state at the level written as version %d", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if f2.Read().Level() != LatestLevel || f2.Read().WorkerIDRole("w") != RoleLeftClaw {
		t.Fatalf("restored level %d, w bound to %q", f2.Read().Level(), f2.Read().WorkerIDRole("w"))
	}
	h2 := &harness{t: t, f: f2, idx: h.idx, now: h.now, ids: h.ids}
	k := h2.create(CreateCommand{})
	if r := h2.claimAs(k.ID, Actor{Role: RoleRightClaw, WorkerID: "w"}); !errors.Is(r.Err, ErrWorkerIDTaken) {
		t.Fatalf("the restored state lost the binding: %v", r.Err)
	}
	if snapVersion(t, snapBytes(t, f2)) != snapshotVersion {
		t.Fatalf("the restored state is written below version %d", snapshotVersion)
	}
}

// A level this build does not know stops the node rather than apply the
// next entries by other rules than its peers.
func TestUnknownLevelStops(t *testing.T) {
	h := newHarness(t)
	defer func() {
		if recover() == nil {
			t.Fatal("applied a level past LatestLevel")
		}
	}()
	h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: LatestLevel + 1})
}
