package fsm

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Names are the few words the state machine keeps millions of copies of in
// its events: event types, job states, healths, feed kinds and task states.
// In memory an event holds a one-byte code for each (a name) instead of a
// 16-byte string header; the code is an index into one process-wide,
// append-only table. The codes never leave the process: every encoding
// (log entries, snapshots, the API) carries the words, exactly as before.
//
// The table starts with every word this build writes, in a fixed order; a
// word it does not know (from a newer build's snapshot) gets the next code
// the first time it is read, so it comes back out unchanged. The table is
// bounded: past maxNames words a decode that meets a new one fails as
// corrupt input rather than grow it.
type name uint8

// maxNames bounds the table (codes 0…255; code 0 is "").
const maxNames = 256

// nameTable is one published version of the table: never changed once
// published (a new word publishes a copy).
type nameTable struct {
	words []string
	codes map[string]name
}

var names = newNames()

type nameTables struct {
	mu  sync.Mutex // held while a word is added
	tab atomic.Pointer[nameTable]
}

// nameFeedJob is the code of FeedJob.
var nameFeedJob = mustName(FeedJob)

// knownNames are the words of this build, in code order: "" and the event
// types first, so that an EventType constant is its word's code.
var knownNames = append(eventWords[:len(eventWords):len(eventWords)],
	string(StateQueued), string(StateRunning), string(StateDone), string(StateFailed), string(StateDead), string(StateCancelled),
	FeedJob, FeedGateway, FeedWorker, FeedRegistered, FeedUpdated, FeedDeregistered, FeedHealth,
	HealthHealthy, HealthSuspect, HealthDead,
	string(TaskQueued), string(TaskReleased), string(TaskClaimed), string(TaskRunning), string(TaskSucceeded),
	string(TaskFailed), string(TaskFailedTimeout),
)

func newNames() *nameTables {
	t := &nameTable{codes: make(map[string]name, len(knownNames))}
	for _, w := range knownNames {
		if _, ok := t.codes[w]; !ok {
			t.codes[w] = name(len(t.words))
			t.words = append(t.words, w)
		}
	}
	n := new(nameTables)
	n.tab.Store(t)
	return n
}

// String is the word n stands for.
func (n name) String() string {
	t := names.tab.Load()
	if int(n) < len(t.words) {
		return t.words[n]
	}
	return ""
}

// nameOf returns the code of w, giving it the next code if it has none;
// false when the table is full.
func nameOf(w string) (name, bool) { return names.of(w) }

func (ns *nameTables) of(w string) (name, bool) {
	if n, ok := ns.tab.Load().codes[w]; ok {
		return n, true
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	t := ns.tab.Load()
	if n, ok := t.codes[w]; ok {
		return n, true
	}
	if len(t.words) >= maxNames {
		return 0, false
	}
	nt := &nameTable{words: append(t.words[:len(t.words):len(t.words)], w), codes: make(map[string]name, len(t.codes)+1)}
	for k, v := range t.codes {
		nt.codes[k] = v
	}
	n := name(len(t.words))
	nt.codes[w] = n
	ns.tab.Store(nt)
	return n, true
}

// nameOfBytes is nameOf for a word being decoded.
func nameOfBytes(p []byte) (name, bool) {
	if n, ok := names.tab.Load().codes[string(p)]; ok {
		return n, true
	}
	return names.of(string(p))
}

// mustName is nameOf for a word that has been read before or that this
// build writes (a known word, or one a restore already coded): only a full
// table refuses it, and a full table refuses at the decode that fills it.
func mustName(w string) name {
	n, ok := nameOf(w)
	if !ok {
		panic(fmt.Sprintf("fsm: more than %d distinct event words (at %q)", maxNames-1, w))
	}
	return n
}

// word reads a string as its code, failing the decode when the table is
// full.
func (d *dec) word() name {
	p := d.raw(d.uvarint())
	n, ok := nameOfBytes(p)
	if !ok {
		d.fail(fmt.Sprintf("more than %d distinct event words (at %q)", maxNames-1, p))
	}
	return n
}

// word is a string field held as its code.
func (f *fields) word(n int, p *name) {
	if f.pk != nil { // a sealed trail: the code itself (trail.go)
		v := uint64(*p)
		f.u64(n, &v)
		if !f.w {
			*p = name(v)
		}
		return
	}
	if f.w {
		if *p != 0 {
			f.put(n, kindBytes)
			f.e.str(p.String())
		}
		return
	}
	if f.at(n, kindBytes) {
		*p = f.d.word()
		f.next()
	}
}

// i32 is an int field held in an int32: a value beyond it is corrupt.
func (f *fields) i32(n int, p *int32) {
	v := int(*p)
	f.int(n, &v)
	if !f.w {
		*p = f.d.i32(v)
	}
}

// sat32 is v in an int32, at the int32's bound when beyond it: how a
// command's int becomes a job's field (the API bounds every such value
// far below; a raw command beyond it must still apply the same on every
// node).
func sat32[T ~int | ~int64](v T) int32 {
	switch {
	case int64(v) > math.MaxInt32:
		return math.MaxInt32
	case int64(v) < math.MinInt32:
		return math.MinInt32
	}
	return int32(v)
}

func (d *dec) i32(v int) int32 {
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int32 overflow")
		return 0
	}
	return int32(v)
}

// EventType is the type of a job's event (EventCreated…): the code of
// its word.
type EventType uint8

func (t EventType) String() string               { return name(t).String() }
func (t EventType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads an event type's word, any word (a newer build's).
func (t *EventType) UnmarshalText(p []byte) error {
	n, err := textName(p)
	*t = EventType(n)
	return err
}

// StateCode is a state a job's event moved from or to (Event.From, To):
// the code of its word, "" (code 0) for none.
type StateCode uint8

// Code returns the code of s. A state is a word this build writes or one
// read before (the state of a restored job).
func (s State) Code() StateCode { return StateCode(mustName(string(s))) }

// State is the state the code stands for.
func (c StateCode) State() State                 { return State(name(c).String()) }
func (c StateCode) String() string               { return name(c).String() }
func (c StateCode) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

func (c *StateCode) UnmarshalText(p []byte) error {
	n, err := textName(p)
	*c = StateCode(n)
	return err
}

// Version 1 snapshots and legacy entries are msgpack: there an event's
// type and states are strings, as everywhere.
func (t EventType) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode(t.String()) }
func (t *EventType) CodecDecodeSelf(d *codec.Decoder) {
	*t = EventType(msgpackName(d))
}
func (c StateCode) CodecEncodeSelf(e *codec.Encoder) { e.MustEncode(c.String()) }
func (c *StateCode) CodecDecodeSelf(d *codec.Decoder) {
	*c = StateCode(msgpackName(d))
}

func msgpackName(d *codec.Decoder) name {
	var w string
	d.MustDecode(&w)
	n, err := textName([]byte(w))
	if err != nil {
		panic(err) // a decode's error (the codec recovers it)
	}
	return n
}

func textName(p []byte) (name, error) {
	n, ok := nameOfBytes(p)
	if !ok {
		return 0, fmt.Errorf("fsm: more than %d distinct event words (at %q)", maxNames-1, p)
	}
	return n, nil
}
