package fsm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/btree"
)

// Who may see and do what (docs/design.md, "Identity and authority"). A
// caller's role comes from its credential; a worker id is a name it
// chooses, which grants nothing by itself:
//
//   - A job's target says what it is: a role (its name: roles are reserved
//     names), a worker (its id) or a gateway (a routed job: the gateway's id
//     tagged "g/", a form no role's name and no worker id can take).
//   - A worker id belongs to the claw role that first claims or registers
//     under it (its binding); another role is refused it, and no worker id
//     may be a role's name. A binding lapses after WorkerIDIdle without a
//     claim, a written heartbeat or a registration under it.
//   - A claim may take the untargeted jobs, those targeted at its role, at
//     its worker id and, for a registered worker, at its gateway
//     (claimTargets).
//   - A claw sees the untargeted jobs, those targeted at its role or at a
//     worker id bound to it, routed jobs, and the jobs its role holds or
//     held (sees).
//   - A lease's steps (heartbeat, complete, fail, release, start) need the
//     lease's role, and its worker id when both the claim and the step name
//     one, as well as its token when one is given; head may always act
//     (authorize).
//
// The state machine applies these rules from LevelIdentity on (level.go);
// the service checks every call against them on the leader before it
// proposes anything, whatever the level.

// The claw roles (fsm.HeadRole is the orchestrator's).
const (
	RoleLeftClaw  = "left_claw"
	RoleRightClaw = "right_claw"
)

// IsRole reports whether name is a role's name. No worker id may be one.
func IsRole(name string) bool {
	return name == HeadRole || name == RoleLeftClaw || name == RoleRightClaw
}

// IsClaw reports whether role is a claw's (a worker's).
func IsClaw(role string) bool { return role == RoleLeftClaw || role == RoleRightClaw }

// Target kinds, as a job's views name them.
const (
	TargetRole    = "role"
	TargetWorker  = "worker"
	TargetGateway = "gateway"
)

// gatewayTag prefixes a routed job's target: '/' is in no name.
const gatewayTag = "g/"

// TargetOf says what j's target is and names it (kind "" when it has
// none). A job routed before LevelIdentity holds its gateway's id untagged;
// its route says what it is.
func (j *Job) TargetOf() (kind, name string) {
	t := j.Target.String()
	switch {
	case t == "":
		return "", ""
	case strings.HasPrefix(t, gatewayTag):
		return TargetGateway, t[len(gatewayTag):]
	case j.Extra().Route != nil:
		return TargetGateway, t
	case IsRole(t):
		return TargetRole, t
	}
	return TargetWorker, t
}

// DescribeTarget names j's target in words ("role right_claw", "worker
// w7", "gateway gw-2"; "" when it has none).
func (j *Job) DescribeTarget() string {
	kind, name := j.TargetOf()
	if kind == "" {
		return ""
	}
	return kind + " " + name
}

// gatewayOf is the gateway j is targeted at, or "".
func gatewayOf(j *Job) string {
	if kind, name := j.TargetOf(); kind == TargetGateway {
		return name
	}
	return ""
}

// GatewayTargets returns the target strings a job targeted at gateway id
// may hold (tagged, or untagged from before LevelIdentity), for filters.
func GatewayTargets(id string) []string { return []string{gatewayTag + id, id} }

// gatewayTarget is the target a job routed to gateway id gets.
func (t *tables) gatewayTarget(id string) string {
	if t.level >= LevelIdentity {
		return gatewayTag + id
	}
	return id
}

// tagRoutedTargets tags the targets of the routed jobs routed before
// LevelIdentity. (A finished job keeps its target but drops its route:
// one routed before the level reads as targeted at a worker of its
// gateway's id; it is routed again, as the API says, when re-driven.)
func (a *applier) tagRoutedTargets() {
	var old []*Job
	a.t.routed.Ascend(func(it idItem) bool {
		if !strings.HasPrefix(it.j.Target.String(), gatewayTag) {
			old = append(old, it.j)
		}
		return true
	})
	for _, o := range old {
		j := copyJob(o)
		j.Target = IdentOf(gatewayTag + o.Target.String())
		a.putJob(o, j)
	}
}

// WorkerIDIdle is how long a worker id stays bound to its role without a
// claim, a written heartbeat or a registration under it.
const WorkerIDIdle int64 = 7 * 24 * 3600e9

// workerIDRefresh is how stale a binding's SeenAt may get before a use
// writes it again (so most claims change no binding).
const workerIDRefresh int64 = 3600e9

// WorkerBinding says which role a worker id belongs to.
type WorkerBinding struct {
	ID   string
	Role string
	// BoundAt is when the role first used the id; SeenAt when it last did
	// (within workerIDRefresh).
	BoundAt, SeenAt int64
}

type (
	bindingItem struct {
		id string
		b  *WorkerBinding
	}
	// seenItem keys a binding by when it was last used, for the sweep of
	// lapsed ones.
	seenItem struct {
		at int64
		id string
	}
)

func lessBinding(a, b bindingItem) bool { return a.id < b.id }
func lessSeen(a, b seenItem) bool       { return a.at < b.at || (a.at == b.at && a.id < b.id) }

func newBindingTree() *btree.BTreeG[bindingItem] { return btree.NewG(btreeDegree, lessBinding) }
func newSeenTree() *btree.BTreeG[seenItem]       { return btree.NewG(btreeDegree, lessSeen) }

func (t *tables) binding(id string) *WorkerBinding {
	it, _ := t.workerIDs.Get(bindingItem{id: id})
	return it.b
}

func (w *writer) putBinding(b *WorkerBinding) {
	if old := w.t.binding(b.ID); old != nil {
		w.t.workerSeen.Delete(seenItem{old.SeenAt, old.ID})
	}
	w.t.workerIDs.ReplaceOrInsert(bindingItem{b.ID, b})
	w.t.workerSeen.ReplaceOrInsert(seenItem{b.SeenAt, b.ID})
	w.dirty[tWorkerIDs] = true
}

func (w *writer) deleteBinding(id string) {
	if old := w.t.binding(id); old != nil {
		w.t.workerSeen.Delete(seenItem{old.SeenAt, old.ID})
		w.t.workerIDs.Delete(bindingItem{id: id})
		w.dirty[tWorkerIDs] = true
	}
}

// ErrWorkerIDTaken: the worker id belongs to another role.
var ErrWorkerIDTaken = errors.New("worker id taken")

// admitWorker checks that actor may act under the worker id it names: no
// role's name, and none another role is bound to.
func (t *tables) admitWorker(actor Actor) error {
	w := actor.WorkerID
	if w == "" || actor.isHead() {
		return nil
	}
	if IsRole(w) {
		return fmt.Errorf("%w: worker id %q is a role's name; choose another", ErrInvalid, w)
	}
	if b := t.binding(w); b != nil && b.Role != actor.Role {
		return fmt.Errorf("%w: %s is in use by another role; choose another worker id", ErrWorkerIDTaken, w)
	}
	return nil
}

// useWorker records, from LevelIdentity on, that actor used its worker id
// at now: with bind, an unbound id becomes actor's role's; a binding of
// actor's role last seen more than workerIDRefresh ago is seen again. The
// caller checked admitWorker.
func (a *applier) useWorker(actor Actor, now int64, bind bool) {
	if a.t.level < LevelIdentity || actor.WorkerID == "" || !IsClaw(actor.Role) {
		return
	}
	b := a.t.binding(actor.WorkerID)
	switch {
	case b == nil && bind:
		a.putBinding(&WorkerBinding{ID: actor.WorkerID, Role: actor.Role, BoundAt: now, SeenAt: now})
	case b != nil && b.Role == actor.Role && now-b.SeenAt >= workerIDRefresh:
		nb := *b
		nb.SeenAt = now
		a.putBinding(&nb)
	}
}

// dropLapsedBindings deletes up to max bindings last used before before.
func (a *applier) dropLapsedBindings(before int64, max int) int {
	var gone []string
	a.t.workerSeen.Ascend(func(it seenItem) bool {
		if it.at >= before || len(gone) == max {
			return false
		}
		gone = append(gone, it.id)
		return true
	})
	for _, id := range gone {
		a.deleteBinding(id)
	}
	return len(gone)
}

// claimTargets are the targets a claim by actor may take: its role, its
// worker id and, for a registered worker, its gateway. A worker id it may
// not use is refused (admitWorker).
func (t *tables) claimTargets(actor Actor) ([]string, error) {
	if err := t.admitWorker(actor); err != nil {
		return nil, err
	}
	out := make([]string, 1, 3)
	out[0] = actor.Role
	if w := actor.WorkerID; w != "" {
		out = append(out, w)
		if reg := t.worker(w); reg != nil && reg.Gateway != "" {
			out = append(out, t.gatewayTarget(reg.Gateway))
		}
	}
	return out, nil
}

// claimTargets are the targets the claim being applied may take: from
// LevelIdentity on, those of its actor in this state; before, those the
// command carries (as the builds before the level apply them).
func (a *applier) claimTargets(proposed []string, actor Actor) ([]string, error) {
	if a.t.level < LevelIdentity {
		return proposed, nil
	}
	return a.t.claimTargets(actor)
}

// seesTarget reports whether a caller of role may see the jobs with target
// (as a job stores it): sees, without what the job's leases add.
func (t *tables) seesTarget(role, target string) bool {
	switch {
	case role == HeadRole || target == "" || strings.HasPrefix(target, gatewayTag):
		return true
	case IsRole(target):
		return target == role
	}
	b := t.binding(target)
	return b != nil && b.Role == role
}

// sees reports whether a caller of role may read j.
func (t *tables) sees(role string, j *Job) bool {
	if role == HeadRole || (j.Lease != nil && j.Lease.Owner == role) {
		return true
	}
	if j.workedOn(role) {
		return true
	}
	kind, name := j.TargetOf()
	switch kind {
	case "", TargetGateway:
		return true
	case TargetRole:
		return name == role
	}
	b := t.binding(name)
	return b != nil && b.Role == role
}

// authorize checks that actor may take a step (op) of running job j under
// ref. A lease token or attempt id, when given, must be the current one
// (a stale one is ErrStaleLease, whoever sends it). Head always may;
// anyone else must be the lease's role (strict, or a v0 call without a
// token) and, strict, the lease's worker when both the claim and the step
// name one: a token that leaked to another role or worker grants nothing.
// Strict is the rule from LevelIdentity on: before, a token alone
// sufficed.
func authorize(op string, j *Job, ref LeaseRef, actor Actor, strict bool) error {
	if j.State != StateRunning || j.Lease == nil {
		return refuse(ErrIllegalTransition, op, j, "job is not running")
	}
	if ref.Token != "" || ref.AttemptID != "" {
		if ref.Token != j.Lease.Token || (ref.AttemptID != "" && ref.AttemptID != j.Lease.AttemptID) {
			return refuse(ErrStaleLease, op, j, "lease token or attempt id is not the current one")
		}
	}
	if actor.isHead() || (!strict && (ref.Token != "" || ref.AttemptID != "")) {
		return nil
	}
	if actor.Role != j.Lease.Owner {
		return refuse(ErrNotOwner, op, j, "its lease is held by another role; only the claimant or head may "+op)
	}
	if strict && actor.WorkerID != "" && j.Lease.WorkerID != "" && actor.WorkerID != j.Lease.WorkerID {
		return refuse(ErrNotOwner, op, j, "its lease is held by worker "+j.Lease.WorkerID+", not "+actor.WorkerID)
	}
	return nil
}

// ownsAttempt reports whether actor made attempt at (strict: its role and,
// when both name one, its worker id).
func ownsAttempt(at *Attempt, actor Actor, strict bool) bool {
	if !strict {
		return true
	}
	return at.Owner == actor.Role && (actor.WorkerID == "" || at.WorkerID == "" || at.WorkerID == actor.WorkerID)
}

// mayChangeWorker reports whether actor may update, remove or heartbeat
// the registered worker id: head, or the claw role the id is bound to.
func (t *tables) mayChangeWorker(actor Actor, id string) bool {
	if actor.isHead() {
		return true
	}
	b := t.binding(id)
	return b != nil && b.Role == actor.Role
}

// MayChangeWorker is mayChangeWorker on this state.
func (r *Reader) MayChangeWorker(actor Actor, id string) bool {
	ok := false
	r.point(func(t *tables) { ok = t.mayChangeWorker(actor, id) })
	return ok
}

// ClaimTargets is claimTargets on this state: what the service puts in a
// claim command, and how it looks for the jobs a claim would take.
func (r *Reader) ClaimTargets(actor Actor) (targets []string, err error) {
	r.point(func(t *tables) { targets, err = t.claimTargets(actor) })
	return targets, err
}

// Sees reports whether a caller of role may read j in this state.
func (r *Reader) Sees(role string, j *Job) bool {
	ok := false
	r.point(func(t *tables) { ok = t.sees(role, j) })
	return ok
}

// MayAct checks in this state that actor may take step op of the job ref
// names, by the strict rules whatever the level: a job the actor may not
// read is not found (as an unknown id is), a lease or finished attempt of
// another role or worker is ErrNotOwner. A missing job, a stale token or a
// job that is not running pass: the command itself answers those. (An
// unknown id is refused here too, so the two answers are alike.)
func (r *Reader) MayAct(op string, ref LeaseRef, actor Actor) error {
	var j *Job
	var err error
	r.point(func(t *tables) {
		j = t.job(ref.JobID)
		switch {
		case actor.isHead():
		case j == nil || !t.sees(actor.Role, j):
			err = fmt.Errorf("job %s: %w", ref.JobID, ErrNotFound)
		case j.State == StateRunning && j.Lease != nil:
			if e := authorize(op, j, ref, actor, true); errors.Is(e, ErrNotOwner) {
				err = e
			}
		case ref.AttemptID != "":
			if at := j.FindAttempt(ref.AttemptID); at != nil && !ownsAttempt(at, actor, true) {
				err = refuse(ErrNotOwner, op, j, "that attempt was another role's or worker's")
			}
		}
	})
	return err
}

// WorkerIDRole returns the role worker id id is bound to ("" when none).
func (r *Reader) WorkerIDRole(id string) string {
	role := ""
	r.point(func(t *tables) {
		if b := t.binding(id); b != nil {
			role = b.Role
		}
	})
	return role
}

// WorkerBindings returns the worker ids bound to roles, by id.
func (r *Reader) WorkerBindings() []*WorkerBinding {
	var out []*WorkerBinding
	r.view().workerIDs.Ascend(func(it bindingItem) bool {
		out = append(out, it.b)
		return true
	})
	return out
}

// OldestBinding is when the least recently used worker id binding was
// last used (0: none).
func (r *Reader) OldestBinding() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.workerSeen.Min(); return it.at, ok })
}
