package queue

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/spine-queue/spine/fsm"
)

// Authorization: what a caller may see and do. Every surface (the v0 job
// routes, the worker contract, the task API, the developer queue, the
// control plane, the web UI, MCP, the event feed, lists and counts) asks
// these functions, which ask the state machine's rules (fsm/identity.go):
// the role comes from the caller's credential, a worker id it names is
// checked, never trusted.
//
// On the leader every write is checked here before it is proposed, by the
// rules in force from fsm.LevelIdentity on, whatever the cluster's level:
// the state machine applies the same rules again from that level on, so a
// race between the check and the entry (a claim of a worker id another
// role binds meanwhile) is refused when the entry applies. A lease step's
// check needs no such backstop: a lease token is drawn for one claim by
// one role and worker, so whatever state the check reads, a token that is
// current there is current with the same holder in every later state.

// CheckWorkerID refuses a worker id no caller may use: one that is not a
// name (1-128 letters, digits, '_', '.', ':' or '-') or that is a role's
// name. field names it in the caller's terms ("worker_id", "agent_id").
// An empty id is refused when required.
func CheckWorkerID(field, id string, required bool) error {
	switch {
	case id == "" && required:
		return invalid("%s is required", field)
	case id == "":
		return nil
	case !ValidName(id):
		return invalid("%s must be 1-128 characters of letters, digits, '_', '.', ':' or '-'", field)
	case fsm.IsRole(id):
		return invalid("%s %q is a role's name; a worker id names one worker, choose another", field, id)
	}
	return nil
}

// Sees reports whether caller c may read j (fsm.Reader.Sees, and its
// scopes).
func (s *Service) Sees(c Caller, j *fsm.Job) bool { return c.SeesJob(s.state.Peek(), j) }

// Lookup reads a job caller c may see from r; a job it may not see is not
// found (as is one that does not exist).
func Lookup(r *fsm.Reader, c Caller, id string) (*fsm.Job, error) {
	j, err := r.Job(id)
	if err != nil {
		return nil, err
	}
	if !c.SeesJob(r, j) {
		return nil, notFound(id)
	}
	return j, nil
}

// Job reads job id as caller c may see it, from this node's state.
func (s *Service) Job(c Caller, id string) (*fsm.Job, error) { return Lookup(s.state.Peek(), c, id) }

// mayAct checks that actor may take step op of the job ref names
// (fsm.Reader.MayAct), as the state machine's entry does from
// fsm.LevelIdentity on: a job it may not read is not found, exactly as an
// unknown id; a lease or attempt another role or worker holds is refused.
// Below the level the check is made on this node's latest state before
// proposing, and a refusal is answered from a linearizable view (confirm),
// as the state machine's would be.
func (s *Service) mayAct(ctx context.Context, op string, ref fsm.LeaseRef, actor fsm.Actor) error {
	if err := CheckWorkerID("worker_id", actor.WorkerID, false); err != nil {
		return err
	}
	r := s.state.Peek()
	if r.Level() >= fsm.LevelIdentity {
		// The entry applies these very rules (fsm authorize) and refuses as
		// they would, with an entry as an unknown id's refusal has; a job
		// the caller may not read is then not found (ForCaller). The check
		// here is for a cluster below the level, whose entries do not.
		return nil
	}
	if r.MayAct(op, ref, actor) == nil {
		return nil
	}
	if err := s.confirm(ctx); err != nil {
		return err
	}
	switch err := s.state.Peek().MayAct(op, ref, actor); {
	case errors.Is(err, fsm.ErrNotFound):
		return notFound(ref.JobID)
	case err != nil:
		return s.refusal(err, ref.JobID)
	}
	return nil
}

// namedAttempt returns ref with the attempt its lease token names when it
// names none: a lease token is drawn at random for one attempt, so it
// names that attempt as surely as its id. A complete or fail sent again
// with the token alone, after an answer was lost, is so recognised as a
// repeat of the first (fsm repeated) and answered as the first was, not
// refused as a transition out of the state the first one made.
func (s *Service) namedAttempt(ref fsm.LeaseRef) fsm.LeaseRef {
	if ref.AttemptID != "" || ref.Token == "" {
		return ref
	}
	j, err := s.state.Peek().Job(ref.JobID)
	switch {
	case err != nil:
	case j.Lease != nil && j.Lease.Token == ref.Token:
		ref.AttemptID = j.Lease.AttemptID
	default:
		at := j.AttemptLog()
		for i := len(at) - 1; i >= 0; i-- {
			if at[i].Token == ref.Token {
				ref.AttemptID = at[i].ID
				break
			}
		}
	}
	return ref
}

// confirm makes this node's state linearizable for a refusal: the leader
// confirms its leadership with a quorum and applies everything committed
// before the call (a job created, or a lease granted, by an entry committed
// but not yet applied here is then in its state).
func (s *Service) confirm(ctx context.Context) error {
	idx, err := s.cluster.ConsistentIndex(ctx)
	if err != nil {
		return err
	}
	return s.cluster.WaitForApplied(ctx, idx)
}

// claimable checks that actor may claim job id by id: one it may read, or
// one targeted at the worker id it claims as (targets). Not found is
// answered from a linearizable view (confirm).
func (s *Service) claimable(ctx context.Context, actor fsm.Actor, id string, targets []string) error {
	see := func() bool {
		r := s.state.Peek()
		j, err := r.Job(id)
		return err == nil && (r.Sees(actor.Role, j) || slices.Contains(targets, j.Target.String()))
	}
	if see() {
		return nil
	}
	if err := s.confirm(ctx); err != nil {
		return err
	}
	if see() {
		return nil
	}
	return notFound(id)
}

// refusal wraps a refusal the service made from the state, as the state
// machine's refusals are (a *Refusal with the job, for the caller's view).
func (s *Service) refusal(err error, id string) error {
	j, _ := s.state.Peek().Job(id)
	return &Refusal{Err: err, Job: j, Index: s.cluster.AppliedIndex()}
}

// claimTargets checks actor's worker id and returns the targets its
// claims may take (fsm.Reader.ClaimTargets).
func (s *Service) claimTargets(r *fsm.Reader, actor fsm.Actor) ([]string, error) {
	if err := CheckWorkerID("worker_id", actor.WorkerID, false); err != nil {
		return nil, err
	}
	return r.ClaimTargets(actor)
}

// ForCaller keeps an error from showing a job its caller (of role) may not
// read: to a claw, such a job does not exist, whether it reads it or tries
// to claim, heartbeat or finish it, so the error becomes the read's 404
// and carries no job. id is the job the request named, if any.
func (s *Service) ForCaller(c Caller, id string, err error) error {
	if err == nil || c.Role == "" || c.ViewRole() == fsm.HeadRole && !c.Scoped() {
		return err
	}
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal) && refusal.Job != nil:
		if s.Sees(c, refusal.Job) {
			return err
		}
		id = refusal.Job.ID
	case errors.Is(err, fsm.ErrTargetMismatch) && id != "":
		if _, lerr := s.Job(c, id); !errors.Is(lerr, fsm.ErrNotFound) {
			return err
		}
	default:
		return err
	}
	return notFound(id)
}

// maxRegistered bounds the gateways and the workers registered (each).
const maxRegistered = 10_000

// mayChangeWorker checks that actor may register, update, heartbeat or
// remove the worker id: head may; a claw may for an id of its role's, or
// (registering) an id no role has yet, which becomes its role's. Below
// fsm.LevelIdentity no id is bound yet, and any claw may, as before.
func (s *Service) mayChangeWorker(actor fsm.Actor, id string, registering bool) error {
	if actor.Token != "" {
		// A token bound to a worker id registers, heartbeats and removes
		// that worker alone.
		c, err := s.callerOf(actor)
		if err != nil {
			return err
		}
		if err := c.CheckWorker(id); err != nil {
			return err
		}
	}
	r := s.state.Peek()
	if actor.Role == fsm.HeadRole || r.Level() < fsm.LevelIdentity {
		return nil
	}
	switch role := r.WorkerIDRole(id); {
	case role == actor.Role:
		return nil
	case role == "" && registering:
		return nil
	case role == "":
		return &ForbiddenError{Message: fmt.Sprintf("worker %s belongs to no role yet: register it with your token first "+
			"(POST /v1/workers), which makes its id your role's", id)}
	}
	return fmt.Errorf("%w: %s is in use by another role", fsm.ErrWorkerIDTaken, id)
}

// ForbiddenError is a call the caller's role may not make on that object.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// Caller is who makes a call, as its credential says: a role and, for a
// named token (tokens.go), the token's name, the streams it is scoped to
// (none: every stream), the worker id it is bound to and its expiry. Every
// surface authenticates its credential into a Caller and hands it to the
// functions of this file, so the read-only role, scopes and bound worker
// ids are enforced here alone.
type Caller struct {
	Role      string
	Token     string
	Streams   []string
	WorkerID  string
	ExpiresAt int64
	index     uint64 // the token's create entry
}

// RoleCaller is the caller of an environment token of role.
func RoleCaller(role string) Caller { return Caller{Role: role} }

// ViewRole is the role whose view of the jobs the caller reads: the
// read-only operator reads as head does.
func (c Caller) ViewRole() string {
	if c.Role == fsm.OperatorRole {
		return fsm.HeadRole
	}
	return c.Role
}

// ReadOnly reports whether the caller may change nothing.
func (c Caller) ReadOnly() bool { return c.Role == fsm.OperatorRole }

// Scoped reports whether the caller is limited to some streams.
func (c Caller) Scoped() bool { return len(c.Streams) > 0 }

// InScope reports whether the caller may see, claim from and create in
// stream.
func (c Caller) InScope(stream string) bool {
	return len(c.Streams) == 0 || slices.Contains(c.Streams, stream)
}

// MayCall reports whether the caller may call a route head may call
// (head), the claws may (claws), that changes something (write), and
// that concerns the whole cluster rather than streams and their jobs
// (global: metrics, backups, membership, the keyring, the registry, the
// purge, the tokens). The read-only operator may call what head may and
// reads; a token scoped to streams calls no global route (a scoped head
// could otherwise mint itself an unscoped token).
func (c Caller) MayCall(head, claws, write, global bool) bool {
	if global && c.Scoped() {
		return false
	}
	switch {
	case c.Role == fsm.HeadRole:
		return head
	case fsm.IsClaw(c.Role):
		return claws
	case c.Role == fsm.OperatorRole:
		return head && !write
	}
	return false
}

// Actor is the actor the caller's writes carry: its view role, the worker
// id it names (a bound token's own when it names none) and its token.
// A named worker id other than the bound one is refused when the write is
// proposed (authorizeWrite).
func (c Caller) Actor(workerID string) fsm.Actor {
	if workerID == "" {
		workerID = c.WorkerID
	}
	return fsm.Actor{Role: c.ViewRole(), WorkerID: workerID, Token: c.Token}
}

// CheckWorker refuses a worker id a bound token may not act as.
func (c Caller) CheckWorker(workerID string) error {
	if c.WorkerID != "" && workerID != "" && workerID != c.WorkerID {
		return &ForbiddenError{Message: fmt.Sprintf("token %s is bound to worker %s; it may not act as worker %s", c.Token, c.WorkerID, workerID)}
	}
	return nil
}

// SeesJob reports whether the caller may read j: its role may, and j is in
// its scope.
func (c Caller) SeesJob(r *fsm.Reader, j *fsm.Job) bool {
	return c.InScope(j.Stream) && r.Sees(c.ViewRole(), j)
}

// ScopeStreams narrows a list of streams a call names to the caller's
// scope: a scoped caller naming none gets its scopes; a name out of scope
// is refused.
func (c Caller) ScopeStreams(streams []string) ([]string, error) {
	if !c.Scoped() {
		return streams, nil
	}
	if len(streams) == 0 {
		return slices.Clone(c.Streams), nil
	}
	for _, st := range streams {
		if !c.InScope(st) {
			return nil, c.outOfScope(st)
		}
	}
	return streams, nil
}

func (c Caller) outOfScope(stream string) error {
	return &ForbiddenError{Message: fmt.Sprintf("token %s is scoped to streams %s; stream %s is not one of them",
		c.Token, strings.Join(c.Streams, ", "), stream)}
}

// callerOf is the caller an actor's token makes, from this node's latest
// state: an actor without a token is its role's.
func (s *Service) callerOf(a fsm.Actor) (Caller, error) {
	if a.Token == "" {
		return RoleCaller(a.Role), nil
	}
	tk := s.state.Peek().TokenNamed(a.Token)
	if tk == nil {
		return Caller{}, fmt.Errorf("%w: token %s was revoked", ErrTokenRefused, a.Token)
	}
	if tk.ExpiresAt != 0 && s.now() >= tk.ExpiresAt {
		return Caller{}, fmt.Errorf("%w: token %s expired", ErrTokenRefused, a.Token)
	}
	return CallerOf(tk), nil
}

// authorizeWrite checks a write a named token makes, before it is
// proposed: the token is still in force; a read-only token writes
// nothing; a bound token acts as its worker alone; a scoped token names,
// creates in and acts on jobs of its streams alone (a claim naming no
// stream claims from its scopes). Every command is read the same way, by
// its fields: Actor, Stream, Streams, JobID, ClonedFrom and Ref; and a
// complete's next claim as a claim of its own.
func (s *Service) authorizeWrite(cmd interface{}) error {
	if c, ok := cmd.(*fsm.CompleteCommand); ok && c.Next != nil {
		if err := s.authorizeWrite(c.Next); err != nil {
			return err
		}
	}
	v := reflect.ValueOf(cmd)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	f := fieldsOf(v.Type())
	if f.actor == nil {
		return nil
	}
	actor := *v.FieldByIndex(f.actor).Addr().Interface().(*fsm.Actor)
	if actor.Token == "" {
		return nil
	}
	c, err := s.callerOf(actor)
	if err != nil {
		return err
	}
	if c.ReadOnly() {
		return &ForbiddenError{Message: fmt.Sprintf("token %s is read-only (role %s): it may change nothing", c.Token, c.Role)}
	}
	if err := c.CheckWorker(actor.WorkerID); err != nil {
		return err
	}
	if !c.Scoped() {
		return nil
	}
	if f.stream != nil {
		if st := v.FieldByIndex(f.stream).String(); st != "" && !c.InScope(st) {
			return c.outOfScope(st)
		}
	}
	if f.streams != nil {
		sv := v.FieldByIndex(f.streams)
		streams, err := c.ScopeStreams(sv.Interface().([]string))
		if err != nil {
			return err
		}
		if _, claim := cmd.(*fsm.ClaimCommand); claim {
			sv.Set(reflect.ValueOf(streams))
		}
	}
	var ids []string
	for _, idx := range [][]int{f.jobID, f.cloned} {
		if idx != nil {
			if id := v.FieldByIndex(idx).String(); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if f.ref != nil {
		if id := v.FieldByIndex(f.ref).Interface().(fsm.LeaseRef).JobID; id != "" {
			ids = append(ids, id)
		}
	}
	r := s.state.Peek()
	for _, id := range ids {
		if j, err := r.Job(id); err == nil && !c.InScope(j.Stream) {
			return notFound(id)
		}
	}
	return nil
}

// cmdFields are the index paths of the fields authorizeWrite reads of a
// command type (nil: it has none such).
type cmdFields struct{ actor, stream, streams, jobID, cloned, ref []int }

var cmdFieldCache sync.Map // reflect.Type → *cmdFields

func fieldsOf(t reflect.Type) *cmdFields {
	if f, ok := cmdFieldCache.Load(t); ok {
		return f.(*cmdFields)
	}
	f := &cmdFields{}
	find := func(name string, typ reflect.Type) []int {
		if sf, ok := t.FieldByName(name); ok && sf.Type == typ && sf.IsExported() {
			return sf.Index
		}
		return nil
	}
	f.actor = find("Actor", reflect.TypeOf(fsm.Actor{}))
	f.stream = find("Stream", reflect.TypeOf(""))
	f.streams = find("Streams", reflect.TypeOf([]string(nil)))
	f.jobID = find("JobID", reflect.TypeOf(""))
	f.cloned = find("ClonedFrom", reflect.TypeOf(""))
	f.ref = find("Ref", reflect.TypeOf(fsm.LeaseRef{}))
	cmdFieldCache.Store(t, f)
	return f
}

// maySchedule checks that actor may create, read or change recurring
// schedules (schedules.go): head alone, on every surface (a schedule makes
// jobs, which head alone creates), and of head's named tokens only one
// without stream scopes: a schedule's jobs may go to any stream and its
// list shows them all. The read-only operator reads them as head does;
// its writes are refused before they are proposed (authorizeWrite).
func (s *Service) maySchedule(actor fsm.Actor) error {
	if actor.Role != fsm.HeadRole {
		return &ForbiddenError{Message: "schedules are head's: only a head token may create, read or change them"}
	}
	c, err := s.callerOf(actor)
	if err != nil {
		return err
	}
	if c.Scoped() {
		return &ForbiddenError{Message: fmt.Sprintf("token %s is scoped to streams %s; schedules span every stream: only a head token without stream scopes may use them",
			c.Token, strings.Join(c.Streams, ", "))}
	}
	return nil
}
