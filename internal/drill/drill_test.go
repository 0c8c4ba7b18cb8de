package drill

import (
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/client"
)

func TestRecorderDoubles(t *testing.T) {
	r := newRecorder()
	r.completed["a"] = map[string]bool{"att1": true}
	r.completed["b"] = map[string]bool{"att1": true, "att2": true}
	d := r.doubles()
	if len(d) != 1 || !strings.Contains(d[0], "job b") {
		t.Fatalf("doubles = %v, want job b only", d)
	}
}

func TestRecorderKeyClash(t *testing.T) {
	r := newRecorder()
	now := time.Now()
	r.created1("k", &client.Job{ID: "j1"}, false, now)
	r.created1("k", &client.Job{ID: "j1", Duplicate: true}, false, now)
	if len(r.keyClashes) != 0 || r.duplicates != 1 {
		t.Fatalf("same job twice: clashes %v, duplicates %d", r.keyClashes, r.duplicates)
	}
	r.created1("k", &client.Job{ID: "j2"}, false, now)
	if len(r.keyClashes) != 1 {
		t.Fatalf("one key, two jobs: clashes %v", r.keyClashes)
	}
}

func TestFirstProbeAckAfterAndProducerGap(t *testing.T) {
	r := newRecorder()
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r.acks = []ack{
		{at(0), at(10), false},
		{at(5), at(20), true},
		{at(40), at(900), false}, // sent before the kill at 50, answered after
		{at(60), at(1000), true}, // first probe sent after the kill
		{at(70), at(1100), true},
	}
	got, ok := r.firstProbeAckAfter(at(50))
	if !ok || !got.Equal(at(1000)) {
		t.Fatalf("firstProbeAckAfter = %v %v, want +1000ms", got.Sub(t0), ok)
	}
	if _, ok := r.firstProbeAckAfter(at(2000)); ok {
		t.Fatal("found a probe ack after the last one")
	}
	gap, ok := r.producerGap(at(50))
	if !ok || gap != 890*time.Millisecond {
		t.Fatalf("producerGap = %v %v, want 890ms", gap, ok)
	}
}

func TestDiffViews(t *testing.T) {
	ref := map[string]jobState{
		"a": {client.JobStatusDone, 1, 10},
		"b": {client.JobStatusDone, 2, 20},
		"c": {client.JobStatusDone, 1, 30},
	}
	view := []*client.Job{
		{ID: "a", Status: client.JobStatusDone, Attempts: 1, ModifyIndex: 10},
		{ID: "b", Status: client.JobStatusRunning, Attempts: 2, ModifyIndex: 19},
		{ID: "d", Status: client.JobStatusDone, Attempts: 1, ModifyIndex: 40},
	}
	d := diffViews(ref, view)
	if len(d) != 3 {
		t.Fatalf("diff = %v, want b differs, c missing, d extra", d)
	}
	if len(diffViews(ref, view[:1])) != 2 {
		t.Fatal("missing jobs not reported")
	}
}

func TestReportMedianMaxAndOK(t *testing.T) {
	r := &Report{Verified: true, HashesAgree: true, Kills: []KillRecord{
		{Unavailable: 3 * time.Second}, {Unavailable: time.Second}, {Unavailable: 2 * time.Second}, {Unavailable: 4 * time.Second},
	}}
	med, mx := r.Unavailability()
	if med != 2500*time.Millisecond || mx != 4*time.Second {
		t.Fatalf("median %v max %v", med, mx)
	}
	if !r.OK() {
		t.Fatal("clean report not OK")
	}
	if !strings.Contains(r.String(), "RESULT: PASS") {
		t.Fatal("no PASS line")
	}
	r.violation("lost: %d", 1)
	if r.OK() || !strings.Contains(r.String(), "VIOLATION: lost: 1") || !strings.Contains(r.String(), "RESULT: FAIL") {
		t.Fatalf("violation not reported:\n%s", r)
	}
	if (&Report{}).OK() {
		t.Fatal("unverified report is OK")
	}
}
