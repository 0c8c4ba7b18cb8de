package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"unsafe"
)

const testSchema = `{"properties":{"n":{"type":"integer"}},"required":["n"],"type":"object"}`

func (h *harness) atLevel(l int) {
	h.t.Helper()
	mustOK(h.t, h.apply(CmdLevel, &LevelCommand{Now: h.now, Level: l}))
}

func (h *harness) refuse(ref LeaseRef, a Actor, text string) *Result {
	h.t.Helper()
	return h.apply(CmdCompleteRefused, &CompleteRefusedCommand{Now: h.now, Ref: ref, Actor: a, Text: text})
}

// A job's schema is stored as given; a job without one takes its stream's
// default (shared, not copied); another stream's job has none, a job
// created before the default keeps none, and an explicit schema wins.
func TestResultSchemaStoredAndDefaulted(t *testing.T) {
	h := newHarness(t)
	h.atLevel(LevelPolicies)
	own := h.create(CreateCommand{Stream: "ml", ResultSchema: `{"type":"string"}`})
	if own.Extra().ResultSchema != `{"type":"string"}` {
		t.Fatalf("stored schema %q", own.Extra().ResultSchema)
	}
	before := h.create(CreateCommand{Stream: "ml"})
	r := h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: "ml", ResultSchema: testSchema, Actor: head})
	mustOK(t, r)
	if r.Defaults == nil || r.Defaults.ResultSchema != testSchema || r.Defaults.ConcurrencyKey != "" {
		t.Fatalf("defaults %+v", r.Defaults)
	}
	a := h.create(CreateCommand{Stream: "ml"})
	b := h.create(CreateCommand{Stream: "ml"})
	if a.Extra().ResultSchema != testSchema || b.Extra().ResultSchema != testSchema {
		t.Fatalf("defaulted schemas %q %q", a.Extra().ResultSchema, b.Extra().ResultSchema)
	}
	if unsafeData(a.Extra().ResultSchema) != unsafeData(b.Extra().ResultSchema) {
		t.Fatal("two jobs with the stream's default schema hold two copies")
	}
	if j := h.create(CreateCommand{Stream: "ml", ResultSchema: `{"type":"array"}`}); j.Extra().ResultSchema != `{"type":"array"}` {
		t.Fatalf("an explicit schema became %q", j.Extra().ResultSchema)
	}
	if j := h.create(CreateCommand{Stream: "etl"}); j.extra != nil {
		t.Fatalf("a job of another stream got %+v", j.extra)
	}
	if j := h.job(before.ID); j.Extra().ResultSchema != "" {
		t.Fatalf("a job created before the default got %q", j.Extra().ResultSchema)
	}
	// Equal schemas sent with each create are shared too.
	c1 := h.create(CreateCommand{Stream: "x", ResultSchema: string([]byte(`{"type":"boolean"}`))})
	c2 := h.create(CreateCommand{Stream: "x", ResultSchema: string([]byte(`{"type":"boolean"}`))})
	if unsafeData(c1.Extra().ResultSchema) != unsafeData(c2.Extra().ResultSchema) {
		t.Fatal("two creates with equal schemas hold two copies")
	}
	// A clear of the defaults (nothing set) drops the default schema.
	mustOK(t, h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: "ml", Actor: head}))
	if j := h.create(CreateCommand{Stream: "ml"}); j.Extra().ResultSchema != "" {
		t.Fatalf("after a clear a job got %q", j.Extra().ResultSchema)
	}

	// The schema survives a snapshot and its restore.
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	j, err := f2.Read().Job(a.ID)
	if err != nil || j.Extra().ResultSchema != testSchema {
		t.Fatalf("restored job: %v %q", err, j.Extra().ResultSchema)
	}
}

// unsafeData is where a string's bytes are: equal for shared strings.
func unsafeData(s string) *byte { return unsafe.StringData(s) }

// Below LevelPolicies the schema fields are ignored, as a build without
// result contracts ignores them, and a refusal record is refused.
func TestResultSchemaBelowLevel(t *testing.T) {
	h := newHarness(t)
	h.atLevel(LevelTagged)
	if j := h.create(CreateCommand{ResultSchema: testSchema}); j.Extra().ResultSchema != "" {
		t.Fatalf("below the level a job got %q", j.Extra().ResultSchema)
	}
	r := h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: "ml", ResultSchema: testSchema, Actor: head})
	mustOK(t, r)
	if r.Defaults != nil {
		t.Fatalf("a schema-only default below the level set %+v", r.Defaults)
	}
	j := h.create(CreateCommand{})
	mustOK(t, h.claim(j.ID, left))
	if r := h.refuse(LeaseRef{JobID: j.ID}, left, "x"); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("refusal below the level: %v", r.Err)
	}
}

// A refused complete is recorded in the history of the running job, which
// stays running under its lease; at most MaxRefusalsPerAttempt per
// attempt, counted again for the next attempt; a stale lease records
// nothing.
func TestCompleteRefusedRecordsAreBounded(t *testing.T) {
	h := newHarness(t)
	h.atLevel(LevelPolicies)
	j := h.create(CreateCommand{ResultSchema: testSchema, MaxAttempts: 3})
	cl := h.claim(j.ID, left)
	mustOK(t, cl)
	lease := *cl.Job.Lease
	ref := LeaseRef{JobID: j.ID, AttemptID: lease.AttemptID, Token: lease.Token}
	for i := range MaxRefusalsPerAttempt + 5 {
		h.now += 1e9
		r := h.refuse(ref, left, "1 mismatch: /n: expected type integer, got type string")
		mustOK(t, r)
		if r.Job.State != StateRunning || *r.Job.Lease != lease {
			t.Fatalf("refusal %d: job %s lease %+v", i, r.Job.State, r.Job.Lease)
		}
	}
	got := h.job(j.ID)
	if n := RefusalsOf(got, lease.AttemptID); n != MaxRefusalsPerAttempt {
		t.Fatalf("%d refusals recorded, want %d", n, MaxRefusalsPerAttempt)
	}
	last := got.History()[len(got.History())-1]
	if last.Type != EventCompleteRefused || last.AttemptID != lease.AttemptID || last.From.State() != StateRunning || last.To.State() != StateRunning ||
		last.Text == "" || last.Actor != "left_claw" {
		t.Fatalf("last event %+v", last)
	}
	// A stale token records nothing.
	if r := h.refuse(LeaseRef{JobID: j.ID, AttemptID: lease.AttemptID, Token: "nope"}, left, "x"); !errors.Is(r.Err, ErrStaleLease) {
		t.Fatalf("stale refusal: %v", r.Err)
	}
	// Too long a text is refused.
	if r := h.refuse(ref, left, string(make([]byte, MaxRefusalText+1))); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("long text: %v", r.Err)
	}
	// The same lease still completes.
	mustOK(t, h.apply(CmdComplete, &CompleteCommand{Now: h.now, Ref: ref, Actor: left, Result: []byte(`{"n":1}`)}))
	if got := h.job(j.ID); got.State != StateDone {
		t.Fatalf("after complete: %s", got.State)
	}
	// A finished attempt records no refusal.
	if r := h.refuse(ref, left, "x"); r.Err == nil {
		t.Fatal("a refusal of a finished attempt was recorded")
	}
	// A new attempt has its own bound.
	j2 := h.create(CreateCommand{ResultSchema: testSchema, MaxAttempts: 3})
	c1 := h.claim(j2.ID, left)
	mustOK(t, c1)
	mustOK(t, h.refuse(LeaseRef{JobID: j2.ID, AttemptID: c1.Job.Lease.AttemptID, Token: c1.Job.Lease.Token}, left, "x"))
	mustOK(t, h.apply(CmdFail, &FailCommand{Now: h.now, Ref: LeaseRef{JobID: j2.ID}, Actor: left, Requeue: true, Error: JobError{Message: "x"}}))
	c2 := h.claim(j2.ID, right)
	mustOK(t, c2)
	mustOK(t, h.refuse(LeaseRef{JobID: j2.ID}, right, "y"))
	got = h.job(j2.ID)
	if RefusalsOf(got, c1.Job.Lease.AttemptID) != 1 || RefusalsOf(got, c2.Job.Lease.AttemptID) != 1 {
		t.Fatalf("refusals per attempt: %+v", got.History())
	}
}

// The fields of result contracts round-trip in the tagged encoding (they
// have no positional form: they are proposed only from LevelPolicies).
func TestResultSchemaFieldsRoundTrip(t *testing.T) {
	for ct, cmd := range map[CommandType]interface{}{
		CmdCreate:         &CreateCommand{Now: 1, ID: "j", Stream: "s", Payload: []byte(`{}`), Actor: head, ResultSchema: testSchema},
		CmdStreamDefaults: &StreamDefaultsCommand{Now: 1, Stream: "s", ResultSchema: testSchema, Actor: head},
	} {
		data := MustEncode(ct, cmd)
		gotT, got, err := DecodeCommand(data)
		if err != nil || gotT != ct || !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%s: %v\n got %+v\nwant %+v", ct, err, got, cmd)
		}
	}
}
