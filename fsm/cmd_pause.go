package fsm

import (
	"fmt"
	"maps"
	"sort"
)

// StreamPause records that an operator paused a stream: claims skip it
// (claim-next passes over it, a claim by id is refused) while producers go
// on adding jobs to it. Any stream name may be paused, whether or not it
// has jobs or a developer-queue catalog entry; a resume removes the record.
type StreamPause struct {
	Stream   string
	PausedAt int64
	Actor    string
	Reason   string
	// Index is the Raft index of the pause.
	Index uint64
}

// StreamPauseCommand pauses (Pause true) or resumes a stream. Both are
// idempotent: pausing a paused stream keeps the first pause, resuming a
// running one changes nothing.
type StreamPauseCommand struct {
	Now    int64
	Stream string
	Pause  bool
	Reason string
	Actor  Actor
}

func init() {
	register(CmdStreamPause, "stream-pause", func() command { return new(StreamPauseCommand) })
}

func (c *StreamPauseCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.Stream)
	e.bool(c.Pause)
	e.str(c.Reason)
	e.actor(c.Actor)
}

func (c *StreamPauseCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Stream = d.str()
	c.Pause = d.bool()
	c.Reason = d.str()
	c.Actor = d.actor()
}

func (c *StreamPauseCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Stream)
	f.bool(3, &c.Pause)
	f.str(4, &c.Reason)
	f.actor(5, &c.Actor)
}

func (c *StreamPauseCommand) apply(a *applier) *Result {
	if c.Stream == "" {
		return fail(fmt.Errorf("stream pause: %w: a stream name is required", ErrInvalid))
	}
	cur := a.t.paused[c.Stream]
	switch {
	case c.Pause && cur != nil, !c.Pause && cur == nil:
		return &Result{Pause: cur}
	case c.Pause:
		a.t.jobControl = true
		p := &StreamPause{Stream: c.Stream, PausedAt: c.Now, Actor: a.in.actor(c.Actor), Reason: c.Reason, Index: a.index}
		a.setPause(c.Stream, p)
		return &Result{Pause: p}
	default:
		a.setPause(c.Stream, nil)
		// The stream's queued jobs are claimable again: wake the claims
		// that wait on its lanes.
		a.woken = append(a.woken, laneKey{c.Stream, anyTarget})
		return &Result{}
	}
}

// setPause replaces the map of paused streams (published views share the
// old one, which never changes).
func (w *writer) setPause(stream string, p *StreamPause) {
	m := maps.Clone(w.t.paused)
	if m == nil {
		m = map[string]*StreamPause{}
	}
	if p == nil {
		delete(m, stream)
	} else {
		m[stream] = p
	}
	if len(m) == 0 {
		m = nil
	}
	w.t.paused = m
}

// isPaused reports whether an operator paused stream.
func (t *tables) isPaused(stream string) bool { return t.paused[stream] != nil }

// pausedList returns the paused streams by name.
func (t *tables) pausedList() []*StreamPause {
	out := make([]*StreamPause, 0, len(t.paused))
	for _, p := range t.paused {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out
}

// Pause returns the pause of stream, or nil when it is not paused.
func (r *Reader) Pause(stream string) *StreamPause { return r.view().paused[stream] }

// Paused returns every paused stream, by name.
func (r *Reader) Paused() []*StreamPause { return r.view().pausedList() }

func (e *enc) pause(p *StreamPause) {
	e.str(p.Stream)
	e.varint(p.PausedAt)
	e.str(p.Actor)
	e.str(p.Reason)
	e.uvarint(p.Index)
}

func (d *dec) pause() *StreamPause {
	return &StreamPause{Stream: d.str(), PausedAt: d.varint(), Actor: d.istr(), Reason: d.str(), Index: d.uvarint()}
}
