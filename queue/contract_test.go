package queue_test

import (
	"context"
	"encoding/json"
	"errors"
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
