package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func (h *harness) pause(stream string, on bool) *Result {
	h.t.Helper()
	return h.apply(CmdStreamPause, &StreamPauseCommand{Now: h.now, Stream: stream, Pause: on, Reason: "deploy", Actor: head})
}

// A paused stream takes new jobs and hands out none: claim-next passes
// over it to the next stream, a claim by id is refused with the job; a
// resume makes its jobs claimable again, in their order.
func TestPausedStreamHandsOutNothing(t *testing.T) {
	h := newHarness(t)
	a1 := h.create(CreateCommand{Stream: "a"})
	r := h.pause("a", true)
	mustOK(t, r)
	if r.Pause == nil || r.Pause.Stream != "a" || r.Pause.Reason != "deploy" || r.Pause.Actor != "head" || r.Pause.Index != h.idx {
		t.Fatalf("pause record %+v", r.Pause)
	}
	first := r.Pause
	// Idempotent: the first pause stays.
	if r := h.pause("a", true); r.Err != nil || r.Pause != first {
		t.Fatalf("second pause: %+v", r)
	}
	a2 := h.create(CreateCommand{Stream: "a"}) // producers go on
	b1 := h.create(CreateCommand{Stream: "b"})
	if r := h.claimNext([]string{"a", "b"}, left); !r.Claimed || r.Job.ID != b1.ID {
		t.Fatalf("claim-next over a paused stream took %+v", r.Job)
	}
	if r := h.claimNext([]string{"a"}, left); r.Claimed || r.Err != nil {
		t.Fatalf("claim-next of the paused stream alone: %+v", r)
	}
	r = h.claim(a1.ID, left)
	if !errors.Is(r.Err, ErrStreamPaused) || r.Job == nil || r.Job.ID != a1.ID || r.Job.State != StateQueued {
		t.Fatalf("claim by id in a paused stream: %+v", r)
	}
	if j := h.f.Read().PeekTask("a"); j != nil {
		t.Fatalf("peek of a paused stream: %s", j.ID)
	}
	if p := h.f.Read().Pause("a"); p != first {
		t.Fatalf("Reader.Pause = %+v", p)
	}

	// A claimant waiting on the paused stream is woken by the resume.
	_, ws := h.f.Read().NextClaimable([]string{"a"}, []string{"left_claw"}, nil, "")
	if fired(ws) {
		t.Fatal("watch fired while the stream is paused")
	}
	r = h.pause("a", false)
	mustOK(t, r)
	if r.Pause != nil || h.f.Read().Pause("a") != nil || len(h.f.Read().Paused()) != 0 {
		t.Fatalf("still paused after the resume: %+v", r.Pause)
	}
	if !fired(ws) {
		t.Fatal("the resume did not wake a claimant of the stream")
	}
	if r := h.pause("a", false); r.Err != nil { // resuming a running stream: nothing
		t.Fatal(r.Err)
	}
	for _, want := range []string{a1.ID, a2.ID} {
		if r := h.claimNext([]string{"a"}, left); !r.Claimed || r.Job.ID != want {
			t.Fatalf("after the resume claimed %+v, want %s", r.Job, want)
		}
	}
	if r := h.pause("", true); !errors.Is(r.Err, ErrInvalid) {
		t.Fatalf("pause without a stream: %v", r.Err)
	}
}

// Pauses are in snapshots (version 6), written once a pause (or a cancel)
// has been applied; a state that never had one is written as before, for
// nodes of older versions.
func TestPauseSnapshot(t *testing.T) {
	h := newHarness(t)
	h.create(CreateCommand{Stream: "a"})
	if v := snapVersion(t, snapBytes(t, h.f)); v >= 6 {
		t.Fatalf("a state without pauses written as version %d", v)
	}
	mustOK(t, h.pause("a", true))
	mustOK(t, h.pause("zeta", true))
	raw := snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != 6 {
		t.Fatalf("a state with pauses written as version %d", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	got := f2.Read().Paused()
	if len(got) != 2 || got[0].Stream != "a" || got[1].Stream != "zeta" || *got[0] != *h.f.Read().Pause("a") {
		t.Fatalf("restored pauses %+v", got)
	}
	if r := (&harness{t: t, f: f2, idx: h.idx, now: h.now}).claimNext([]string{"a"}, left); r.Claimed {
		t.Fatal("a restored paused stream handed out a job")
	}
	mustOK(t, h.pause("a", false))
	mustOK(t, h.pause("zeta", false))
	raw = snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != 6 {
		t.Fatalf("after every resume written as version %d", v)
	}
	f3, _ := New(Config{})
	if err := f3.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if len(f3.Read().Paused()) != 0 {
		t.Fatal("a resumed stream came back paused")
	}
}
