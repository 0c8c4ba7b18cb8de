package fsm

import "fmt"

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

// FeedEvent is one event of the feed. Objects read from the store are
// shared and must never be modified.
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

// feedChunk is how many events one block of the feed holds.
const feedChunk = 256

type feedBlock [feedChunk]*FeedEvent

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

// put stores e as the event after latest (e.Seq must be latest+1).
func (l *feedLog) put(e *FeedEvent) {
	s := e.Seq
	if len(l.blocks) == 0 {
		l.base = (s - 1) / feedChunk * feedChunk
	}
	if i := int((s - 1 - l.base) / feedChunk); i == len(l.blocks) {
		l.blocks = append(l.blocks, new(feedBlock))
	}
	l.blocks[(s-1-l.base)/feedChunk][(s-1)%feedChunk] = e
	l.latest = s
}

// add feeds e as the next event and drops what retention lets go.
func (l *feedLog) add(e *FeedEvent) {
	e.Seq = l.latest + 1
	l.put(e)
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

func (l *feedLog) get(s uint64) *FeedEvent {
	return l.blocks[(s-1-l.base)/feedChunk][(s-1)%feedChunk]
}

// restore adds e, read from a snapshot whose feed ends at head.
func (l *feedLog) restore(e *FeedEvent, head uint64) error {
	switch {
	case e.Seq == 0 || e.Seq > head:
		return fmt.Errorf("restore: feed event %d outside the feed (last %d)", e.Seq, head)
	case len(l.blocks) > 0 && e.Seq != l.latest+1:
		return fmt.Errorf("restore: feed event %d after event %d", e.Seq, l.latest)
	}
	l.put(e)
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

// emit appends e to the feed, if it is on.
func (a *applier) emit(e FeedEvent) {
	if !a.t.feed.on {
		return
	}
	e.Index = a.index
	a.t.feed.add(&e)
	a.fed = true
}

// emitJob feeds the events j gained over old (all of them for a new job).
func (a *applier) emitJob(old, j *Job) {
	if !a.t.feed.on || j == nil {
		return
	}
	n := 0
	if old != nil {
		n = len(old.History)
	}
	if n >= len(j.History) {
		return
	}
	task := j.TaskState()
	for i := n; i < len(j.History); i++ {
		ev := &j.History[i]
		if ev.Type == EventHeartbeat {
			continue
		}
		actor, token := ev.Who()
		a.emit(FeedEvent{At: ev.At, Kind: FeedJob, ID: j.ID, Type: ev.Type, Actor: actor, From: string(ev.From), To: string(ev.To),
			Stream: j.Stream, Task: task, AttemptID: ev.AttemptID, WorkerID: ev.WorkerID, Text: ev.Text, Token: token})
	}
}

// Feed returns up to limit events after seq after, oldest first, the seq of
// the oldest event the feed holds (0 when it holds none), the seq of the
// latest event ever fed, and whether the feed is on.
func (r *Reader) Feed(after uint64, limit int) (evs []*FeedEvent, oldest, latest uint64, on bool) {
	l := &r.view().feed
	oldest = l.oldest()
	if oldest != 0 {
		for s := max(after+1, oldest); s <= l.latest && len(evs) < limit; s++ {
			evs = append(evs, l.get(s))
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
