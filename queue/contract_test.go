package queue_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/spine-queue/spine/fsm"
	"github.com/spine-queue/spine/queue"
)

// While a server runs a build without result contracts, a schema (on a
// create or a stream's defaults) is refused and nothing is proposed; a
// schema outside the subset is refused whatever the level. Once every
// server has the level, the schema is stored canonical.
func TestResultSchemaNeedsItsLevel(t *testing.T) {
	svc, _, n := levelService(t, fsm.LevelTagged, nil)
	ctx := context.Background()
	schema := json.RawMessage(`{"type":"object", "required":["a"]}`)
	_, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: json.RawMessage(`1`), ResultSchema: schema, Actor: head})
	if !errors.Is(err, queue.ErrUpgradeInProgress) {
		t.Fatalf("create with a schema below the level: %v", err)
	}
	_, _, err = svc.SetDefaults(ctx, "s", queue.DefaultsInput{ResultSchema: schema}, head)
	if !errors.Is(err, queue.ErrUpgradeInProgress) {
		t.Fatalf("defaults with a schema below the level: %v", err)
	}
	var se *queue.SchemaError
	if _, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: json.RawMessage(`1`), ResultSchema: json.RawMessage(`{"not":{}}`), Actor: head}); !errors.As(err, &se) || se.Keyword != "not" {
		t.Fatalf("an unsupported keyword: %v", err)
	}
	if jobs, _, _ := n.FSM.Peek().List(fsm.ListFilter{}); len(jobs) != 0 {
		t.Fatalf("%d jobs created by refused creates", len(jobs))
	}

	svc, _, _ = levelService(t, fsm.LatestLevel, nil)
	j, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: json.RawMessage(`1`), ResultSchema: schema, Actor: head})
	if err != nil || j.Extra().ResultSchema != `{"required":["a"],"type":"object"}` {
		t.Fatalf("create at the level: %v %q", err, j.Extra().ResultSchema)
	}
}

// lagging is a node's state behind the leader's: until the service
// confirms (WaitForApplied), Peek and Read answer from behind, a state
// that has not applied the job's create and claim yet.
type lagging struct {
	*builds
	behind, real *fsm.FSM
	caughtUp     atomic.Bool
	proposed     atomic.Int64
}

func (l *lagging) state() *fsm.FSM {
	if l.caughtUp.Load() {
		return l.real
	}
	return l.behind
}
func (l *lagging) Read() *fsm.Reader { return l.state().Read() }
func (l *lagging) Peek() *fsm.Reader { return l.state().Peek() }
func (l *lagging) WaitForApplied(ctx context.Context, index uint64) error {
	l.caughtUp.Store(true)
	return l.builds.WaitForApplied(ctx, index)
}
func (l *lagging) Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error) {
	l.proposed.Add(1)
	return l.builds.Apply(ctx, cmd)
}

// A node that does not have the job yet (behind the leader) catches up
// before it checks the result: a mismatch is refused and recorded, never
// completed; a job that is still unknown after catching up is answered
// not found with nothing proposed.
func TestResultCheckOnANodeBehind(t *testing.T) {
	svc, b, n := levelService(t, fsm.LatestLevel, nil)
	ctx := context.Background()
	j, _, _, err := svc.Create(ctx, queue.CreateInput{Payload: json.RawMessage(`1`), ResultSchema: json.RawMessage(`{"type":"string"}`), Actor: head})
	if err != nil {
		t.Fatal(err)
	}
	w := fsm.Actor{Role: "left_claw", WorkerID: "w1"}
	cl, _, err := svc.ClaimNext(ctx, queue.ClaimNextInput{Actor: w})
	if err != nil || cl == nil || cl.ID != j.ID {
		t.Fatalf("claim: %v %v", cl, err)
	}
	behind, _ := fsm.New(fsm.Config{})
	l := &lagging{builds: b, behind: behind, real: n.FSM}
	node := queue.New(queue.Config{Now: (&clock{}).now}, l, l)
	ref := fsm.LeaseRef{JobID: j.ID, AttemptID: cl.Lease.AttemptID, Token: cl.Lease.Token}
	_, _, err = node.Complete(ctx, queue.CompleteInput{Ref: ref, Actor: w, Result: json.RawMessage(`5`)})
	var mm *queue.ResultMismatchError
	if !errors.As(err, &mm) || len(mm.Mismatches) != 1 || !l.caughtUp.Load() {
		t.Fatalf("a mismatch on a node behind: %v (caught up %v)", err, l.caughtUp.Load())
	}
	got, _ := n.FSM.Read().Job(j.ID)
	if got.State != fsm.StateRunning || fsm.RefusalsOf(got, ref.AttemptID) != 1 {
		t.Fatalf("after the refusal: %s, %d refusals", got.State, fsm.RefusalsOf(got, ref.AttemptID))
	}

	// A job no state has: not found, nothing proposed.
	l.caughtUp.Store(false)
	before := l.proposed.Load()
	_, _, err = node.Complete(ctx, queue.CompleteInput{Ref: fsm.LeaseRef{JobID: "nope", AttemptID: "a", Token: "t"}, Actor: w, Result: json.RawMessage(`5`)})
	if !errors.Is(err, fsm.ErrNotFound) || l.proposed.Load() != before {
		t.Fatalf("an unknown job: %v, %d proposals", err, l.proposed.Load()-before)
	}
}
