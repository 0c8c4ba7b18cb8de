package fsm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestFinishedJobTrailSealed: a job that finishes keeps its attempts and
// history sealed in one string, every reader gets them back as they were,
// a change of the job (a comment, a redrive) opens them, and a snapshot
// writes and restores them the same.
func TestFinishedJobTrailSealed(t *testing.T) {
	h := newHarness(t)
	h.level(LevelPolicies)
	j := h.create(CreateCommand{Stream: "s", MaxAttempts: 3})
	if j.trail != nil {
		t.Fatalf("a plain queued job has a trail: %+v", j.trail)
	}
	c := h.claim(j.ID, Actor{Role: "left_claw", WorkerID: "w1", Token: "ci"})
	mustOK(t, c)
	running := c.Job
	if running.trail == nil || running.sealed != nil {
		t.Fatalf("a running job's trail is not open: %+v", running.trail)
	}
	ref := LeaseRef{JobID: j.ID, AttemptID: c.Job.Lease.AttemptID, Token: c.Job.Lease.Token}
	r := h.apply(CmdFail, &FailCommand{Now: h.now + 5, Ref: ref, Actor: left, Error: JobError{Code: "E1", Message: "no", Stack: "at x"}})
	mustOK(t, r)
	failed := r.Job
	if failed.State != StateFailed || failed.trail != nil || failed.sealed == nil {
		t.Fatalf("a failed job's trail is not sealed: state %s, %+v", failed.State, failed.trail)
	}
	wantAttempts := []Attempt{{ID: ref.AttemptID, Owner: "left_claw", WorkerID: "w1", Token: ref.Token, StartedAt: h.now,
		EndedAt: h.now + 5, Outcome: OutcomeFailed, Error: &JobError{Code: "E1", Message: "no", Stack: "at x"}, DLQ: true, ByHolder: true}}
	if got := failed.AttemptLog(); !reflect.DeepEqual(got, wantAttempts) {
		t.Fatalf("sealed attempts %+v, want %+v", got, wantAttempts)
	}
	if n := failed.NumEvents(); n != 3 || len(failed.History()) != 3 || failed.EventAt(2).Type != EventFailed || failed.EventAt(1).Actor != "left_claw/w1@ci" && failed.EventAt(1).Actor != "left_claw@ci" {
		t.Fatalf("sealed history: %d events, %+v", n, failed.History())
	}
	if at := failed.FindAttempt(ref.AttemptID); at == nil || at.Token != ref.Token {
		t.Fatalf("FindAttempt on a sealed trail: %+v", at)
	}
	if !failed.workedOn("left_claw") || failed.workedOn("right_claw") || failed.workedOn("left") {
		t.Fatal("who worked on a sealed job is not read from its trail")
	}

	// A redrive opens the trail on its own copy; the stored finished
	// version is not changed.
	before := failed.History()
	rd := h.apply(CmdRedrive, &RedriveCommand{Now: h.now + 9, JobID: j.ID, Actor: head})
	mustOK(t, rd)
	if rd.Job.State != StateQueued || rd.Job.sealed != nil || rd.Job.NumEvents() != 4 || len(rd.Job.AttemptLog()) != 1 {
		t.Fatalf("redriven: %s, %d events, trail %+v", rd.Job.State, rd.Job.NumEvents(), rd.Job.trail)
	}
	if !reflect.DeepEqual(failed.History(), before) || failed.NumEvents() != 3 {
		t.Fatal("a redrive changed the finished version it copied")
	}
	c2 := h.claim(j.ID, left)
	mustOK(t, c2)
	done := h.apply(CmdComplete, &CompleteCommand{Now: h.now + 20, Ref: LeaseRef{JobID: j.ID, AttemptID: c2.Job.Lease.AttemptID,
		Token: c2.Job.Lease.Token}, Result: []byte(`1`), Actor: left})
	mustOK(t, done)
	if done.Job.sealed == nil || len(done.Job.AttemptLog()) != 2 || done.Job.NumEvents() != 6 {
		t.Fatalf("done after a redrive: trail %+v, %d attempts, %d events", done.Job.trail, len(done.Job.AttemptLog()), done.Job.NumEvents())
	}

	// A repeated complete of the finished attempt is still recognised.
	again := h.apply(CmdComplete, &CompleteCommand{Now: h.now + 21, Ref: LeaseRef{JobID: j.ID, AttemptID: c2.Job.Lease.AttemptID,
		Token: c2.Job.Lease.Token}, Result: []byte(`1`), Actor: left})
	if again.Err != nil || !again.Duplicate {
		t.Fatalf("a repeated complete of a sealed job: %+v", again)
	}

	// Restored, the job is sealed again and reads the same.
	f2 := restoredCopy(t, h.f)
	back, _ := f2.Read().Job(j.ID)
	if back.trail != nil || back.sealed == nil {
		t.Fatalf("a restored finished job's trail is not sealed: %+v", back.trail)
	}
	if !reflect.DeepEqual(back.AttemptLog(), done.Job.AttemptLog()) || !sameHistory(back, done.Job) {
		t.Fatalf("restored trail %+v / %+v, want %+v / %+v", back.AttemptLog(), back.History(), done.Job.AttemptLog(), done.Job.History())
	}
}

// TestTrailPackRoundTrip: every field of an attempt and an event, at any
// value (UUIDs and near-UUIDs, empty and repeated strings, times before
// the job's creation and at the ends of an int64), reads back from a
// sealed trail as it was. Fields are set by reflection, so a field added
// to Attempt, Event or JobError is covered the day it is added (it is
// sealed through the same field lists as the snapshot's records).
func TestTrailPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	strs := []string{"", "left_claw", "left_claw/w1@ci", strings.Repeat("n", sealNameMaxLen+1), "0f8fad5b-d9cb-469f-a165-70867728950e",
		"0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5b-d9cb-469f-a165-70867728950", "0f8fad5bxd9cb-469f-a165-70867728950e",
		"0f8fad5b-d9cb-469f-a165-70867728950g", "attempt 1 of 3", strings.Repeat("x", 300), "é\x00\xff"}
	ints := []int64{0, 1, -1, 1_700_000_000e9, 1_700_000_000e9 + 17, math.MaxInt64, math.MinInt64, -5}
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(strs[rng.IntN(len(strs))])
		case reflect.Int64, reflect.Int:
			v.SetInt(ints[rng.IntN(len(ints))])
		case reflect.Int32:
			v.SetInt(int64(rng.Int32N(1000)) - 3)
		case reflect.Bool:
			v.SetBool(rng.IntN(2) == 0)
		case reflect.Uint8: // an event's type and states
			v.SetUint(uint64(1 + rng.IntN(5)))
		case reflect.Pointer:
			if rng.IntN(3) == 0 {
				v.Set(reflect.Zero(v.Type()))
				return
			}
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem())
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				fill(v.Field(i))
			}
		default:
			t.Fatalf("no filler for a field of kind %s", v.Kind())
		}
	}
	for round := 0; round < 2000; round++ {
		var attempts []Attempt
		var events []Event
		for range rng.IntN(4) {
			var a Attempt
			fill(reflect.ValueOf(&a).Elem())
			attempts = append(attempts, a)
		}
		for range rng.IntN(5) {
			var e Event
			fill(reflect.ValueOf(&e).Elem())
			events = append(events, e)
		}
		if len(attempts) == 0 && len(events) == 0 {
			continue
		}
		base := ints[rng.IntN(len(ints))]
		packed := packTrail(attempts, events, base)
		gotA, gotE := unpackTrail(packed, base)
		if !reflect.DeepEqual(gotA, attempts) || !reflect.DeepEqual(gotE, events) {
			t.Fatalf("round %d: %+v / %+v read back as %+v / %+v", round, attempts, events, gotA, gotE)
		}
		j := &Job{CreatedAt: base, State: StateDone, sealed: unsafe.StringData(packed), sealedLen: uint32(len(packed))}
		if j.numStored() != len(events) {
			t.Fatalf("round %d: %d events stored, numStored says %d", round, len(events), j.numStored())
		}
		// A snapshot's record of the job is the same sealed as open: the
		// sealed trail is written without opening it (writeSealed).
		open := &Job{CreatedAt: base, State: StateDone, trail: &trail{attempts: attempts, history: events}}
		if rng.IntN(2) == 0 {
			j.creator, open.creator = IdentOf("left_claw/w1@ci"), IdentOf("left_claw/w1@ci")
		}
		if got, want := writeFields(nil, j), writeFields(nil, open); !bytes.Equal(got, want) {
			t.Fatalf("round %d: the record of a sealed job differs from the open one's:\n%x\n%x", round, got, want)
		}
		for _, a := range attempts {
			if a.Owner != "" && !j.workedOn(a.Owner) {
				t.Fatalf("round %d: the owner %q of a sealed attempt not found", round, a.Owner)
			}
		}
		if j.workedOn("nobody-of-these") {
			t.Fatalf("round %d: a sealed trail claims an owner it does not hold", round)
		}
	}
}

// TestSealedTrailIsSmaller: one attempt and its two events, as a claim
// and a complete of a worker with a long id leave them, take at most 128
// bytes sealed (a malloc size class), against 384 open (the attempt, 128;
// two events, 160; the attempt's id and token, 48 each; the worker's id
// and actor and the claim's "attempt 1 of 3" are shared by every job, sealed
// or open).
func TestSealedTrailIsSmaller(t *testing.T) {
	base := int64(1_700_000_000e9)
	const worker = "bench-20261201-022308-46575dad-w15"
	at := Attempt{ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Owner: "left_claw", WorkerID: worker,
		Token: "7c9e6679-7425-40de-944b-e07fc1f90ae7", StartedAt: base + 3e6, EndedAt: base + 9e8, Outcome: OutcomeCompleted, ByHolder: true}
	evs := []Event{
		{Seq: 2, At: base + 3e6, Type: EventClaimed, Actor: "left_claw/" + worker, From: codeQueued, To: StateRunning.Code(), AttemptID: at.ID, WorkerID: worker, Text: "attempt 1 of 3"},
		{Seq: 3, At: base + 9e8, Type: EventCompleted, Actor: "left_claw/" + worker, From: StateRunning.Code(), To: StateDone.Code(), AttemptID: at.ID, WorkerID: worker},
	}
	p := packTrail([]Attempt{at}, evs, base)
	if len(p) > 128 {
		t.Fatalf("sealed in %d bytes, want at most 128: %q", len(p), p)
	}
	if a, e := unpackTrail(p, base); !reflect.DeepEqual(a, []Attempt{at}) || !reflect.DeepEqual(e, evs) {
		t.Fatalf("read back as %+v / %+v", a, e)
	}
}

// Trails are packed on every core at once (a restore's decoders), so the
// sealNames take adds and lookups concurrently: every name gets one index,
// the same for every caller, which reads back as the name.
func TestSealNamesConcurrent(t *testing.T) {
	const workers, names = 8, 200
	ids := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				k := (i*7 + w*13) % names // each worker in its own order
				id, ok := sealNameRef(fmt.Sprintf("concurrent-name-%03d", k))
				if !ok {
					t.Errorf("no room for name %d", k)
					return
				}
				if ids[w] == nil {
					ids[w] = make([]uint64, names)
				}
				ids[w][k] = id
			}
		}()
	}
	wg.Wait()
	for k := range names {
		want := fmt.Sprintf("concurrent-name-%03d", k)
		for w := range workers {
			if ids[w][k] != ids[0][k] {
				t.Fatalf("name %d: index %d for one caller, %d for another", k, ids[w][k], ids[0][k])
			}
		}
		if got, ok := sealName(ids[0][k]); !ok || got != want {
			t.Fatalf("index %d reads back as %q (%v), want %q", ids[0][k], got, ok, want)
		}
	}
}

// A claim's text is a sealName exactly when attemptText shares it, so the
// names table cannot be filled by other texts.
func TestSharedAttemptText(t *testing.T) {
	for s, want := range map[string]bool{
		"attempt 1 of 3": true, "attempt 20 of 20": true, "attempt 2 of 1": true,
		"attempt 0 of 3": false, "attempt 21 of 3": false, "attempt 3 of 21": false, "attempt 01 of 3": false,
		"attempt 1 of 3 ": false, "attempt 1 of": false, "Attempt 1 of 3": false, "attempt +1 of 3": false, "": false,
	} {
		if got := sharedAttemptText(s); got != want {
			t.Errorf("sharedAttemptText(%q) = %v, want %v", s, got, want)
		}
	}
	var a applier
	a.in = newInterner()
	for _, j := range []*Job{{Attempts: 1, MaxAttempts: 3}, {Attempts: 20, MaxAttempts: 20}, {Attempts: 21, MaxAttempts: 30}} {
		shared := j.Attempts <= maxSharedAttemptText && j.MaxAttempts <= maxSharedAttemptText
		if s := a.attemptText(j); sharedAttemptText(s) != shared {
			t.Errorf("%q: sharedAttemptText says %v, but attemptText shares it: %v", s, sharedAttemptText(s), shared)
		}
	}
}
