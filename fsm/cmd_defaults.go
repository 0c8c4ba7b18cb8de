package fsm

import (
	"fmt"
	"maps"
	"sort"
)

// StreamDefaults are an operator's defaults for the jobs created in one
// stream: a job created there with a concurrency key but no limit gets
// ConcurrencyLimit, and a job created with no key gets ConcurrencyKey (and
// the limit), so that a key set here caps how many of the stream's jobs run
// at once. The defaults are written into each job at its create entry: a
// change applies to jobs created after it, never to those already queued,
// and a job shows the limit it runs under. Developer-queue tasks (their own
// create command) are not affected.
type StreamDefaults struct {
	Stream           string
	ConcurrencyKey   string
	ConcurrencyLimit int
	// ResultSchema is the result contract of the stream's jobs created
	// without one (contract.go); from LevelPolicies.
	ResultSchema string
	// Rate is the rate limit of the stream's jobs created without one
	// (ratelimit.go).
	Rate  *RateLimit
	SetAt int64
	Actor string
	// Index is the Raft index of the command that set them.
	Index uint64
}

// StreamDefaultsCommand sets a stream's defaults; a command with neither a
// key nor a limit clears them.
type StreamDefaultsCommand struct {
	Now              int64
	Stream           string
	ConcurrencyKey   string
	ConcurrencyLimit int
	Actor            Actor
	// ResultSchema: the default result contract (canonical JSON).
	ResultSchema string
	// Rate, from LevelPolicies on: the rate limit of the jobs created
	// without one.
	Rate *RateLimit
}

func init() {
	register(CmdStreamDefaults, "stream-defaults", func() command { return new(StreamDefaultsCommand) })
}

func (c *StreamDefaultsCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.Stream)
	e.str(c.ConcurrencyKey)
	e.int(c.ConcurrencyLimit)
	e.actor(c.Actor)
}

func (c *StreamDefaultsCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Stream = d.str()
	c.ConcurrencyKey = d.istr()
	c.ConcurrencyLimit = d.int()
	c.Actor = d.actor()
}

func (c *StreamDefaultsCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Stream)
	f.istr(3, &c.ConcurrencyKey)
	f.int(4, &c.ConcurrencyLimit)
	f.actor(5, &c.Actor)
	f.schema(6, &c.ResultSchema)
	objPtr(f, 7, &c.Rate)
}

func (c *StreamDefaultsCommand) apply(a *applier) *Result {
	if c.Stream == "" || c.ConcurrencyLimit < 0 {
		return fail(fmt.Errorf("stream defaults: %w: a stream name is required and a limit may not be negative", ErrInvalid))
	}
	rate := c.Rate
	if a.t.level < LevelPolicies {
		rate = nil
	} else if rate != nil {
		if err := rate.Valid(); err != nil {
			return fail(fmt.Errorf("stream defaults: %w", err))
		}
	}
	a.t.jobControl, a.t.version8 = true, true
	schema := c.ResultSchema
	if a.t.level < LevelPolicies {
		schema = "" // as a build without result contracts applies it
	}
	if c.ConcurrencyKey == "" && c.ConcurrencyLimit == 0 && schema == "" && rate == nil {
		a.setDefaults(c.Stream, nil)
		return &Result{}
	}
	d := &StreamDefaults{Stream: c.Stream, ConcurrencyKey: c.ConcurrencyKey, ConcurrencyLimit: c.ConcurrencyLimit, Rate: rate,
		ResultSchema: internSchema(schema), SetAt: c.Now, Actor: a.in.actor(c.Actor), Index: a.index}
	a.setDefaults(c.Stream, d)
	return &Result{Defaults: d}
}

// setDefaults replaces the map of stream defaults (published views share
// the old one, which never changes); nil d clears the stream's.
func (w *writer) setDefaults(stream string, d *StreamDefaults) {
	m := maps.Clone(w.t.defaults)
	if m == nil {
		m = map[string]*StreamDefaults{}
	}
	if d == nil {
		delete(m, stream)
	} else {
		m[stream] = d
	}
	if len(m) == 0 {
		m = nil
	}
	w.t.defaults = m
}

// applyDefaults fills in a new job's concurrency key and limit from its
// stream's defaults, where the create named none.
func (a *applier) applyDefaults(j *Job) {
	d := a.t.defaults[j.Stream]
	if d == nil {
		return
	}
	if j.Extra().ConcurrencyKey == "" && d.ConcurrencyKey != "" {
		j.extraMut().ConcurrencyKey, j.extraMut().ConcurrencyLimit = d.ConcurrencyKey, 0
	}
	if j.Extra().ConcurrencyKey != "" && j.Extra().ConcurrencyLimit == 0 {
		j.extraMut().ConcurrencyLimit = max(d.ConcurrencyLimit, 1)
	}
	if j.Extra().Rate == nil && d.Rate != nil {
		j.extraMut().Rate = d.Rate
	}
}

// defaultsList returns the streams' defaults by stream name.
func (t *tables) defaultsList() []*StreamDefaults {
	out := make([]*StreamDefaults, 0, len(t.defaults))
	for _, d := range t.defaults {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out
}

// Defaults returns a stream's defaults, or nil when it has none.
func (r *Reader) Defaults(stream string) *StreamDefaults { return r.view().defaults[stream] }

// AllDefaults returns every stream's defaults, by stream name.
func (r *Reader) AllDefaults() []*StreamDefaults { return r.view().defaultsList() }

func (e *enc) defaults(d *StreamDefaults) {
	e.str(d.Stream)
	e.str(d.ConcurrencyKey)
	e.int(d.ConcurrencyLimit)
	e.varint(d.SetAt)
	e.str(d.Actor)
	e.uvarint(d.Index)
}

func (d *dec) defaults() *StreamDefaults {
	return &StreamDefaults{Stream: d.str(), ConcurrencyKey: d.istr(), ConcurrencyLimit: d.int(), SetAt: d.varint(), Actor: d.istr(), Index: d.uvarint()}
}
