package fsm

import (
	"fmt"
	"strings"
)

// The event feed is the cluster's replicated stream of what happened, in
// apply order: every job event but heartbeats (a job's own history keeps
// those), and the control plane's registry changes. Each event has a
// sequence number the state machine assigns (1, 2, 3… across the whole
// cluster's life), so every replica numbers every event the same and a
// reader resumes at any node with the last number it saw (GET /v1/events,
// Last-Event-ID). The feed keeps at least the latest FeedRetention events
// and is part of snapshots.
//
// The feed records from the entry that turns it on (FeedOnCommand): the
// leader proposes one once every server applies it, because a snapshot
// that holds the feed is of a version older builds cannot read.
const FeedRetention = 1 << 16

// FeedEvent is one event of the feed, as Reader.Feed returns it (the feed
// stores it in a compact form, feedRec).
type FeedEvent struct {
	// Seq is the event's place in the feed, from 1.
	Seq uint64
	// Index is the Raft index of the entry that made it.
	Index uint64
	At    int64
	// Kind is what the event is about (FeedJob, FeedGateway, FeedWorker)
	// and ID which one.
	Kind string
	ID   string
	// Type is the job event's type (EventCreated…), or for the registry
	// one of FeedRegistered, FeedUpdated, FeedDeregistered, FeedHealth.
	Type  string
	Actor string
	// From and To are canonical job states, or healths on FeedHealth.
	From, To string
	// Stream and Task, on job events, are the job's stream and its state
	// in the control plane's vocabulary after the entry.
	Stream    string
	Task      TaskState
	AttemptID string
	WorkerID  string
	Text      string
	// Token names the named token of the call that caused a job event
	// (tokens.go).
	Token string
}

// Feed event kinds and registry event types.
const (
	FeedJob     = "job"
	FeedGateway = "gateway"
	FeedWorker  = "worker"

	FeedRegistered   = "registered"
	FeedUpdated      = "updated"
	FeedDeregistered = "deregistered"
	FeedHealth       = "health"
)

// feedRec is how the feed stores an event (FeedEvent is the form it is
// read in): the words (Kind, Type, From, To, Task) as one-byte codes
// (names.go) and the token joined to the actor as in a job's history
// (Event.Who), with no seq (its place in the feed is its seq). About half
// a FeedEvent, and stored in its block by value: the feed's FeedRetention
// events are no longer as many objects. TestEventSizes pins its size.
type feedRec struct {
	Index uint64
	At    int64
	ID    string
	// Actor is the actor alone, or when split is set actor@token
	// (TokenSep), cut at the first @ as Event.Who does.
	Actor     string
	Stream    string
	AttemptID string
	WorkerID  string
	Text      string
	kind, typ name
	from, to  name
	task      name
	split     bool
}

// expand writes r, the event of seq s, into e as readers see it.
func (r *feedRec) expand(s uint64, e *FeedEvent) {
	*e = FeedEvent{Seq: s, Index: r.Index, At: r.At, Kind: r.kind.String(), ID: r.ID, Type: r.typ.String(), Actor: r.Actor,
		From: r.from.String(), To: r.to.String(), Stream: r.Stream, Task: TaskState(r.task.String()), AttemptID: r.AttemptID,
		WorkerID: r.WorkerID, Text: r.Text}
	if r.split {
		e.Actor, e.Token = cutToken(r.Actor)
	}
}

func cutToken(s string) (actor, token string) {
	actor, token, _ = strings.Cut(s, TokenSep)
	return actor, token
}

// feedRecOf returns e as the feed stores it; false when one of its words
// is one too many for the table (names.go).
func feedRecOf(e *FeedEvent) (feedRec, bool) {
	r := feedRec{Index: e.Index, At: e.At, ID: e.ID, Actor: e.Actor, Stream: e.Stream, AttemptID: e.AttemptID,
		WorkerID: e.WorkerID, Text: e.Text}
	ok := true
	for _, c := range []struct {
		p *name
		w string
	}{{&r.kind, e.Kind}, {&r.typ, e.Type}, {&r.from, e.From}, {&r.to, e.To}, {&r.task, string(e.Task)}} {
		n, known := nameOf(c.w)
		*c.p, ok = n, ok && known
	}
	if e.Token != "" {
		// A job event's actor holds no separator (Event.Who cut the token
		// off at the first): joined again, it cuts the same.
		r.Actor, r.split = e.Actor+TokenSep+e.Token, true
	}
	return r, ok
}

// feedChunk is how many events one block of the feed holds.
const feedChunk = 256

type feedBlock [feedChunk]feedRec

// feedLog holds the feed's latest events in fixed blocks: block i of
// blocks holds seqs base+i*feedChunk+1 to base+(i+1)*feedChunk. A published
// view is a copy of this struct, sharing the blocks with the writer, which
// only ever writes the slot of a seq after every view's latest (no view
// reads past its latest), appends blocks past every view's end, and drops
// blocks from the front by reslicing; so publishing costs nothing and no
// block is ever copied. Blocks are dropped whole, the oldest first, once
// the events after the oldest block number at least FeedRetention: the
// feed holds FeedRetention to FeedRetention+feedChunk-1 events, the same
// on every replica (the boundaries depend on seqs alone).
type feedLog struct {
	blocks []*feedBlock
	// dropped counts the blocks resliced off the front of blocks' backing
	// array since it was last copied: they stay reachable through it.
	dropped int
	base    uint64 // a multiple of feedChunk
	latest  uint64 // the seq of the last event fed; 0: none yet
	on      bool
}

// oldest is the seq of the oldest event held, 0 when none is.
func (l *feedLog) oldest() uint64 {
	if l.latest == 0 || len(l.blocks) == 0 {
		return 0
	}
	return max(l.base+1, 1)
}

// put stores r as event s, the one after latest.
func (l *feedLog) put(s uint64, r *feedRec) {
	if len(l.blocks) == 0 {
		l.base = (s - 1) / feedChunk * feedChunk
	}
	if i := int((s - 1 - l.base) / feedChunk); i == len(l.blocks) {
		l.blocks = append(l.blocks, new(feedBlock))
	}
	l.blocks[(s-1-l.base)/feedChunk][(s-1)%feedChunk] = *r
	l.latest = s
}

// add feeds r as the next event and drops what retention lets go.
func (l *feedLog) add(r *feedRec) {
	l.put(l.latest+1, r)
	for len(l.blocks) > 1 && l.latest-(l.base+feedChunk) >= FeedRetention {
		// Not cleared: a view may still read it (below: when the array
		// lets go of it).
		l.blocks = l.blocks[1:]
		l.base += feedChunk
		l.dropped++
	}
	if l.dropped > 0 && l.dropped >= len(l.blocks)/8 {
		// The dropped blocks' events are still reachable through the
		// backing array (a view may read them, so they are not cleared):
		// once they are an eighth of what is kept, the kept blocks move to
		// an array of their own, and the old one goes with the last view
		// that reads it. Without this the array held up to twice the
		// retention between the appends that outgrow it.
		l.blocks = append(make([]*feedBlock, 0, len(l.blocks)+len(l.blocks)/4+1), l.blocks...)
		l.dropped = 0
	}
}

func (l *feedLog) get(s uint64) *feedRec {
	return &l.blocks[(s-1-l.base)/feedChunk][(s-1)%feedChunk]
}

// restore adds e, read from a snapshot whose feed ends at head.
func (l *feedLog) restore(e *FeedEvent, head uint64) error {
	switch {
	case e.Seq == 0 || e.Seq > head:
		return fmt.Errorf("restore: feed event %d outside the feed (last %d)", e.Seq, head)
	case len(l.blocks) > 0 && e.Seq != l.latest+1:
		return fmt.Errorf("restore: feed event %d after event %d", e.Seq, l.latest)
	}
	r, ok := feedRecOf(e)
	if !ok {
		return fmt.Errorf("restore: feed event %d: more than %d distinct event words", e.Seq, maxNames-1)
	}
	l.put(e.Seq, &r)
	return nil
}

// restored checks the feed read from a snapshot ends at head.
func (l *feedLog) restored(head uint64) error {
	if len(l.blocks) == 0 {
		l.latest = head
		return nil
	}
	if l.latest != head {
		return fmt.Errorf("restore: feed ends at event %d, its head says %d", l.latest, head)
	}
	return nil
}

// FeedOnCommand turns the feed on (once every server applies it; see
// FeedRetention). Turning it on again changes nothing.
type FeedOnCommand struct {
	Now int64
}

func init() {
	register(CmdFeedOn, "feed-on", func() command { return new(FeedOnCommand) })
}

func (c *FeedOnCommand) encode(e *enc) { e.varint(c.Now) }
func (c *FeedOnCommand) decode(d *dec) { c.Now = d.varint() }

func (c *FeedOnCommand) apply(a *applier) *Result {
	a.feedOn()
	return &Result{}
}

// feedOn starts the feed (and snapshot version 5) if it is off.
func (a *applier) feedOn() { a.t.feed.on = true }

// emit appends e (a gateway's or a worker's event, of words this build
// writes) to the feed, if it is on.
func (a *applier) emit(e FeedEvent) {
	if !a.t.feed.on {
		return
	}
	r, ok := feedRecOf(&e)
	if !ok {
		panic(fmt.Sprintf("fsm: feed event %q %q: more than %d distinct event words", e.Kind, e.Type, maxNames-1))
	}
	a.emitRec(&r)
}

func (a *applier) emitRec(r *feedRec) {
	r.Index = a.index
	a.t.feed.add(r)
	a.fed = true
}

// emitJob feeds the events j gained over old (all of them for a new job).
func (a *applier) emitJob(old, j *Job) {
	if !a.t.feed.on || j == nil {
		return
	}
	n := 0
	if old != nil {
		n = old.NumEvents()
	}
	if n >= j.NumEvents() {
		return
	}
	task := mustName(string(j.TaskState()))
	for i := n; i < j.NumEvents(); i++ {
		ev := j.EventAt(i)
		if ev.Type == EventHeartbeat {
			continue
		}
		// The event's actor as it is (actor@token), split when read.
		a.emitRec(&feedRec{At: ev.At, kind: nameFeedJob, ID: j.ID, typ: name(ev.Type), Actor: ev.Actor, split: true,
			from: name(ev.From), to: name(ev.To), Stream: j.Stream, task: task,
			AttemptID: ev.AttemptID, WorkerID: ev.WorkerID, Text: ev.Text})
	}
}

// Feed returns up to limit events after seq after, oldest first, the seq of
// the oldest event the feed holds (0 when it holds none), the seq of the
// latest event ever fed, and whether the feed is on.
func (r *Reader) Feed(after uint64, limit int) (evs []*FeedEvent, oldest, latest uint64, on bool) {
	l := &r.view().feed
	oldest = l.oldest()
	if oldest != 0 {
		from := max(after+1, oldest)
		if n := min(uint64(max(limit, 0)), l.latest+1-min(from, l.latest+1)); n > 0 {
			// One array for the page's events, expanded from the feed's.
			all := make([]FeedEvent, n)
			evs = make([]*FeedEvent, n)
			for i := range all {
				l.get(from+uint64(i)).expand(from+uint64(i), &all[i])
				evs[i] = &all[i]
			}
		}
	}
	return evs, oldest, l.latest, l.on
}

// FeedOn reports whether the feed records.
func (r *Reader) FeedOn() bool {
	on := false
	r.point(func(t *tables) { on = t.feed.on })
	return on
}

// FeedSignal returns a channel closed when the feed next gains an event
// (or the state is replaced by a snapshot). Take it before reading the
// feed, so an event applied in between is not missed.
func (r *Reader) FeedSignal() <-chan struct{} { return r.f.feedSignal() }

func (f *FSM) feedSignal() <-chan struct{} {
	f.feedMu.Lock()
	defer f.feedMu.Unlock()
	if f.feedCh == nil {
		f.feedCh = make(chan struct{})
	}
	return f.feedCh
}

// feedFired wakes the feed's readers.
func (f *FSM) feedFired() {
	f.feedMu.Lock()
	defer f.feedMu.Unlock()
	if f.feedCh != nil {
		close(f.feedCh)
		f.feedCh = nil
	}
}

func (e *enc) feedEvent(ev *FeedEvent) {
	e.uvarint(ev.Seq)
	e.uvarint(ev.Index)
	e.varint(ev.At)
	e.str(ev.Kind)
	e.str(ev.ID)
	e.str(ev.Type)
	e.str(ev.Actor)
	e.str(ev.From)
	e.str(ev.To)
	e.str(ev.Stream)
	e.str(string(ev.Task))
	e.str(ev.AttemptID)
	e.str(ev.WorkerID)
	e.str(ev.Text)
}

func (d *dec) feedEvent() *FeedEvent {
	return &FeedEvent{Seq: d.uvarint(), Index: d.uvarint(), At: d.varint(), Kind: d.istr(), ID: d.str(), Type: d.istr(),
		Actor: d.istr(), From: d.istr(), To: d.istr(), Stream: d.istr(), Task: TaskState(d.istr()), AttemptID: d.str(),
		WorkerID: d.istr(), Text: d.istr()}
}

// feedHead is the feed's own snapshot record: the seq of its last event
// (0: none fed yet).
type feedHead struct{ seq uint64 }
