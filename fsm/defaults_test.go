package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func (h *harness) setDefaults(stream, key string, limit int) *Result {
	h.t.Helper()
	return h.apply(CmdStreamDefaults, &StreamDefaultsCommand{Now: h.now, Stream: stream, ConcurrencyKey: key, ConcurrencyLimit: limit, Actor: head})
}

func (h *harness) createKeyed(stream, key string, limit int) *Job {
	h.t.Helper()
	r := h.apply(CmdCreate, &CreateCommand{Now: h.now, ID: h.nextID("job"), Stream: stream, Payload: []byte(`{}`), Actor: head, ConcurrencyKey: key, ConcurrencyLimit: limit})
	mustOK(h.t, r)
	return r.Job
}

// A stream's defaults are written into the jobs created in it after them:
// a default key caps how many of the stream's jobs run at once, a default
// limit applies to a key named without one, an explicit key or limit wins;
// other streams and jobs created before are untouched; a clear ends it.
func TestStreamDefaultsApplyAtCreate(t *testing.T) {
	h := newHarness(t)
	before := h.create(CreateCommand{Stream: "ml"})
	r := h.setDefaults("ml", "ml-gpus", 2)
	mustOK(t, r)
	if d := r.Defaults; d == nil || d.Stream != "ml" || d.ConcurrencyKey != "ml-gpus" || d.ConcurrencyLimit != 2 || d.Actor != "head" || d.Index != h.idx {
		t.Fatalf("defaults record %+v", r.Defaults)
	}
	if d := h.f.Read().Defaults("ml"); d != r.Defaults {
		t.Fatalf("Reader.Defaults = %+v", d)
	}
	var plain []*Job
	for range 3 {
		plain = append(plain, h.create(CreateCommand{Stream: "ml"}))
	}
	for _, j := range plain {
		if j.Extra().ConcurrencyKey != "ml-gpus" || j.Extra().ConcurrencyLimit != 2 {
			t.Fatalf("a plain create in ml: key %q limit %d", j.Extra().ConcurrencyKey, j.Extra().ConcurrencyLimit)
		}
	}
	if j := h.job(before.ID); j.Extra().ConcurrencyKey != "" {
		t.Fatalf("a job created before the defaults got key %q", j.Extra().ConcurrencyKey)
	}
	if j := h.createKeyed("ml", "own", 0); j.Extra().ConcurrencyKey != "own" || j.Extra().ConcurrencyLimit != 2 {
		t.Fatalf("a key without a limit: key %q limit %d", j.Extra().ConcurrencyKey, j.Extra().ConcurrencyLimit)
	}
	if j := h.createKeyed("ml", "own", 5); j.Extra().ConcurrencyLimit != 5 {
		t.Fatalf("an explicit limit became %d", j.Extra().ConcurrencyLimit)
	}
	if j := h.create(CreateCommand{Stream: "etl"}); j.Extra().ConcurrencyKey != "" {
		t.Fatalf("another stream's job got key %q", j.Extra().ConcurrencyKey)
	}

	// At most two of the defaulted jobs run: the job from before the
	// defaults and the own-key ones are not held back by them.
	claimed := map[string]bool{}
	for {
		r := h.claimNext([]string{"ml"}, left)
		if !r.Claimed {
			break
		}
		claimed[r.Job.ID] = true
	}
	n := 0
	for _, j := range plain {
		if claimed[j.ID] {
			n++
		}
	}
	if n != 2 || !claimed[before.ID] || len(claimed) != 5 {
		t.Fatalf("claimed %d of the defaulted jobs (want 2), %d in all (want 5)", n, len(claimed))
	}

	// A limit alone applies to keyed creates only.
	mustOK(t, h.setDefaults("ml", "", 3))
	if j := h.create(CreateCommand{Stream: "ml"}); j.Extra().ConcurrencyKey != "" {
		t.Fatalf("a limit alone gave a plain job key %q", j.Extra().ConcurrencyKey)
	}
	if j := h.createKeyed("ml", "k", 0); j.Extra().ConcurrencyLimit != 3 {
		t.Fatalf("limit %d, want the default 3", j.Extra().ConcurrencyLimit)
	}
	// A key alone means a limit of one.
	mustOK(t, h.setDefaults("ml", "serial", 0))
	if j := h.create(CreateCommand{Stream: "ml"}); j.Extra().ConcurrencyKey != "serial" || j.Extra().ConcurrencyLimit != 1 {
		t.Fatalf("a key alone: key %q limit %d", j.Extra().ConcurrencyKey, j.Extra().ConcurrencyLimit)
	}

	r = h.setDefaults("ml", "", 0)
	mustOK(t, r)
	if r.Defaults != nil || h.f.Read().Defaults("ml") != nil || len(h.f.Read().AllDefaults()) != 0 {
		t.Fatalf("defaults after a clear: %+v", h.f.Read().AllDefaults())
	}
	if j := h.create(CreateCommand{Stream: "ml"}); j.Extra().ConcurrencyKey != "" {
		t.Fatalf("after the clear a job got key %q", j.Extra().ConcurrencyKey)
	}
	for _, bad := range []*Result{h.setDefaults("", "k", 1), h.setDefaults("ml", "k", -1)} {
		if !errors.Is(bad.Err, ErrInvalid) {
			t.Fatalf("bad defaults: %v", bad.Err)
		}
	}
}

// Defaults are in snapshots (version 8) once any were set, even after a
// clear (the jobs they stamped carry keys only version 6 and later hold);
// a restored node stamps new jobs as the others do.
func TestStreamDefaultsSnapshot(t *testing.T) {
	h := newHarness(t)
	h.create(CreateCommand{Stream: "a"})
	if v := snapVersion(t, snapBytes(t, h.f)); v >= 6 {
		t.Fatalf("a plain state written as version %d", v)
	}
	mustOK(t, h.setDefaults("a", "ka", 2))
	mustOK(t, h.setDefaults("b", "", 4))
	stamped := h.create(CreateCommand{Stream: "a"})
	raw := snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != 8 {
		t.Fatalf("a state with defaults written as version %d", v)
	}
	f2, _ := New(Config{})
	if err := f2.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	got := f2.Read().AllDefaults()
	if len(got) != 2 || *got[0] != *h.f.Read().Defaults("a") || *got[1] != *h.f.Read().Defaults("b") {
		t.Fatalf("restored defaults %+v", got)
	}
	if j, _ := f2.Read().Job(stamped.ID); j.Extra().ConcurrencyKey != "ka" || j.Extra().ConcurrencyLimit != 2 {
		t.Fatalf("restored stamped job: key %q limit %d", j.Extra().ConcurrencyKey, j.Extra().ConcurrencyLimit)
	}
	h2 := &harness{t: t, f: f2, idx: h.idx, now: h.now, ids: h.ids}
	if j := h2.create(CreateCommand{Stream: "a"}); j.Extra().ConcurrencyKey != "ka" {
		t.Fatalf("the restored node did not stamp: key %q", j.Extra().ConcurrencyKey)
	}
	mustOK(t, h.setDefaults("a", "", 0))
	mustOK(t, h.setDefaults("b", "", 0))
	raw = snapBytes(t, h.f)
	if v := snapVersion(t, raw); v != 8 {
		t.Fatalf("after every clear written as version %d", v)
	}
	f3, _ := New(Config{})
	if err := f3.Restore(io.NopCloser(bytes.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if len(f3.Read().AllDefaults()) != 0 {
		t.Fatal("cleared defaults came back")
	}
	if j, _ := f3.Read().Job(stamped.ID); j.Extra().ConcurrencyKey != "ka" {
		t.Fatalf("a stamped job lost its key in a snapshot: %q", j.Extra().ConcurrencyKey)
	}
}

// snapBytes writes f's snapshot.
func snapBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, _ := f.Snapshot()
	var buf bytes.Buffer
	if err := s.(*snapshot).write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
