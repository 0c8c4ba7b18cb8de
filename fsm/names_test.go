package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// The stored events are the state machine's most numerous objects but the
// jobs: the feed keeps FeedRetention of them on every node, a job's history
// one per change. Their sizes are pinned so that a field added to either
// (a string is 16 bytes) is a decision, not a drift.
func TestEventSizes(t *testing.T) {
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"feedRec (a feed event as the feed stores it)", unsafe.Sizeof(feedRec{}), 120},
		{"Event (a job's history event)", unsafe.Sizeof(Event{}), 80},
		// 256 is the top of its malloc size class: a byte more would
		// take every job to 288.
		{"Job (a job without its extra part)", unsafe.Sizeof(Job{}), 256},
		{"trail (a job's open attempts and history)", unsafe.Sizeof(trail{}), 48},
	} {
		if c.got != c.want {
			t.Errorf("%s is %d bytes, pinned at %d: a new field costs every stored one; change the pin (and design.md §1) if it is worth it", c.what, c.got, c.want)
		}
	}
}

// Every word a build writes has a code at start, "" is code 0, and a word
// no build wrote (a newer build's) gets a code on first sight and comes
// back out unchanged, the same code each time.
func TestNamesRoundTrip(t *testing.T) {
	for _, w := range knownNames {
		n, ok := nameOf(w)
		if !ok || n.String() != w {
			t.Fatalf("known word %q: code %d (%v) reads %q", w, n, ok, n.String())
		}
	}
	if n, _ := nameOf(""); n != 0 {
		t.Fatalf(`"" has code %d, want 0`, n)
	}
	a, ok := nameOf("word-of-a-newer-build")
	if !ok || a == 0 || a.String() != "word-of-a-newer-build" {
		t.Fatalf("a new word: code %d (%v) reads %q", a, ok, a.String())
	}
	if b, _ := nameOf("word-of-a-newer-build"); b != a {
		t.Fatalf("a new word's code changed from %d to %d", a, b)
	}
}

// A feed event round-trips through its stored form whatever its words and
// actor: a token is split off again, an actor holding the separator
// without a token stays whole.
func TestFeedRecRoundTrip(t *testing.T) {
	for _, e := range []FeedEvent{
		{Seq: 7, Index: 9, At: 11, Kind: FeedJob, ID: "j1", Type: EventClaimed.String(), Actor: "left_claw/w1", From: "queued", To: "running",
			Stream: "s", Task: TaskClaimed, AttemptID: "a", WorkerID: "w1", Text: "attempt 1 of 3", Token: "indexer-1"},
		{Seq: 8, Kind: FeedGateway, ID: "g1", Type: FeedHealth, Actor: "odd@actor", From: HealthHealthy, To: "unheard-of-health"},
		{Seq: 9, Kind: "a-newer-kind", Type: "a-newer-type", Task: "a-newer-task-state"},
	} {
		r, ok := feedRecOf(&e)
		if !ok {
			t.Fatalf("%+v: refused", e)
		}
		var got FeedEvent
		r.expand(e.Seq, &got)
		if got != e {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", got, e)
		}
	}
}

// The table is bounded: once it holds 256 words (codes 0…255) a new word
// is refused, and the words it holds still read back.
func TestNamesBounded(t *testing.T) {
	ns := newNames()
	for i := len(ns.tab.Load().words); i < maxNames; i++ {
		if _, ok := ns.of(fmt.Sprintf("w%d", i)); !ok {
			t.Fatalf("word %d refused, the table holds %d", i, maxNames)
		}
	}
	if _, ok := ns.of("one-too-many"); ok {
		t.Fatal("a 257th word was given a code")
	}
	if n, ok := ns.of("w255"); !ok || n != 255 {
		t.Fatalf("w255: code %d (%v)", n, ok)
	}
}

// An event's type and states are codes in memory and words everywhere
// else: the constants read as their words, JSON and text show the words,
// and a word of a newer build reads back unchanged.
func TestEventWords(t *testing.T) {
	for typ := EventCreated; typ <= EventCompleteRefused; typ++ {
		if typ.String() == "" || typ.String() != eventWords[typ] {
			t.Fatalf("event type %d reads %q, want %q", typ, typ.String(), eventWords[typ])
		}
	}
	ev := Event{Seq: 2, Type: EventCancelRequested, From: StateRunning.Code(), To: StateRunning.Code(), At: 5, Actor: "head"}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"Seq":2,"Type":"cancel_requested","From":"running","To":"running","At":5,"Actor":"head","AttemptID":"","WorkerID":"","Text":""}`; string(b) != want {
		t.Fatalf("json %s, want %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back != ev {
		t.Fatalf("json round trip: %+v (%v), want %+v", back, err, ev)
	}
	var nt EventType
	if err := nt.UnmarshalText([]byte("a_newer_builds_type")); err != nil || nt.String() != "a_newer_builds_type" {
		t.Fatalf("a newer build's type reads %q (%v)", nt.String(), err)
	}
	if c := State("a_newer_state").Code(); c.State() != "a_newer_state" {
		t.Fatalf("a newer build's state reads %q", c.State())
	}
	if (StateCode(0)).State() != "" || State("").Code() != 0 {
		t.Fatal(`no state is not code 0`)
	}
}

// A job's history written by a newer build, with an event type and states
// this build has no word for, reads and writes back byte for byte in every
// record form: positional (versions 2 to 9), tagged, and msgpack.
func TestEventWordsOfANewerBuildRoundTrip(t *testing.T) {
	var typ EventType
	if err := typ.UnmarshalText([]byte("a_newer_event")); err != nil {
		t.Fatal(err)
	}
	j := &Job{ID: "j", Stream: DefaultStream, State: "a_newer_state", MaxAttempts: 1, trail: &trail{history: []Event{
		{Seq: 1, At: 1, Type: EventCreated, Actor: "head", To: StateQueued.Code()},
		{Seq: 2, At: 2, Type: typ, Actor: "left_claw@tok", From: StateQueued.Code(), To: State("a_newer_state").Code(), Text: "x"},
	}}, CreatedAt: 1, UpdatedAt: 2, CreateIndex: 1, QueueIndex: 1, ModifyIndex: 2}
	for v := 2; v < snapTagged; v++ {
		var e enc
		e.job(j, v)
		d := dec{b: e.b}
		got := d.job(v)
		if d.err != nil {
			t.Fatalf("version %d: %v", v, d.err)
		}
		var e2 enc
		e2.job(got, v)
		if !bytes.Equal(e.b, e2.b) || got.History()[1].Type.String() != "a_newer_event" || got.History()[1].To.State() != "a_newer_state" {
			t.Fatalf("version %d: the history changed: %+v", v, got.History())
		}
	}
	b := writeFields(nil, j)
	var got Job
	if err := readFields(b, &got, nil, nil); err != nil {
		t.Fatal(err)
	}
	if b2 := writeFields(nil, &got); !bytes.Equal(b, b2) || got.History()[1].Type.String() != "a_newer_event" {
		t.Fatalf("tagged: the history changed: %+v", got.History())
	}
	var mp []byte
	if err := codec.NewEncoderBytes(&mp, msgpackHandle).Encode(&jobV1{Job: *j, History: j.History()}); err != nil {
		t.Fatal(err)
	}
	var old struct {
		History []struct{ Type, From, To string }
	}
	if err := decodeMsgpack(mp, &old); err != nil || old.History[1].Type != "a_newer_event" || old.History[1].To != "a_newer_state" {
		t.Fatalf("msgpack writes the words: %+v (%v)", old.History, err)
	}
	var back jobV1
	if err := decodeMsgpack(mp, &back); err != nil || back.History[1] != j.History()[1] {
		t.Fatalf("msgpack: %+v (%v), want %+v", back.History, err, j.History())
	}
}
