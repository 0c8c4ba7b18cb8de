package queue

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/spine-queue/spine/fsm"
)

// StreamInfo is what the state holds about one stream: its jobs by state,
// when its longest-waiting job was queued, an operator's pause and job
// defaults, and its developer-queue catalog entry, if it has one.
type StreamInfo struct {
	Name           string
	Counts         map[fsm.State]int
	OldestQueuedAt int64 // unix nanoseconds; 0 when nothing is queued
	Pause          *fsm.StreamPause
	Defaults       *fsm.StreamDefaults
	Catalog        *fsm.Stream
	// Unmatched are the requirement sets of claimable jobs that no worker
	// heard from within LiveWindow has the capabilities for.
	Unmatched []fsm.Unmatched
	// RateLimited counts the queued jobs their key's rate holds back.
	RateLimited int
}

// StreamInfos lists every stream the state knows of, by name, as a caller
// of role may see it: those with jobs it may see (in any state, counted
// among those only), those in the developer queue's catalog, and those
// paused or given defaults. Its cost grows with the number of streams and
// targets, not of jobs.
func (s *Service) StreamInfos(c Caller) []StreamInfo {
	role := c.ViewRole()
	r := s.state.Read()
	by := map[string]*StreamInfo{}
	get := func(name string) *StreamInfo {
		si := by[name]
		if si == nil {
			si = &StreamInfo{Name: name, Counts: map[fsm.State]int{}}
			by[name] = si
		}
		return si
	}
	for _, c := range r.StreamCountsFor(role) {
		get(c.Stream).Counts[c.State] += c.N
	}
	for name, at := range r.OldestQueuedFor(role) {
		get(name).OldestQueuedAt = at
	}
	for _, p := range r.Paused() {
		get(p.Stream).Pause = p
	}
	for _, d := range r.AllDefaults() {
		get(d.Stream).Defaults = d
	}
	for name, u := range r.UnmatchedFor(role, s.now()-LiveWindow.Nanoseconds()) {
		get(name).Unmatched = u
	}
	for _, st := range r.Streams("") {
		get(st.Name).Catalog = st
	}
	for name, n := range r.RateWaiting(role, c.InScope) {
		get(name).RateLimited = n
	}
	out := make([]StreamInfo, 0, len(by))
	for _, si := range by {
		if c.InScope(si.Name) {
			out = append(out, *si)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// StreamInfo returns what the state holds about one stream; a name the state
// knows nothing of is a stream with no jobs (any name may be paused or
// given jobs).
func (s *Service) StreamInfo(c Caller, name string) StreamInfo {
	for _, si := range s.StreamInfos(c) {
		if si.Name == name {
			return si
		}
	}
	return StreamInfo{Name: name, Counts: map[fsm.State]int{}}
}

// PauseStream pauses (pause true) or resumes a stream: while paused, claims
// skip it and a claim by id is refused (409 stream_paused); producers go on
// adding jobs. Both are idempotent. The answer is the pause in force after
// the command (nil once resumed).
func (s *Service) PauseStream(ctx context.Context, name string, pause bool, reason string, actor fsm.Actor) (*fsm.StreamPause, uint64, error) {
	if !ValidName(name) {
		return nil, 0, invalid("stream name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	}
	if len(reason) > MaxTextBytes {
		return nil, 0, invalid("reason is larger than %d bytes", MaxTextBytes)
	}
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdStreamPause, &fsm.StreamPauseCommand{Now: s.now(), Stream: name, Pause: pause, Reason: reason, Actor: actor})
	if err != nil {
		return nil, idx, err
	}
	return res.Pause, idx, nil
}

// StreamDefaults returns every stream's job defaults, by stream name.
func (s *Service) StreamDefaults() map[string]*fsm.StreamDefaults {
	out := map[string]*fsm.StreamDefaults{}
	for _, d := range s.state.Read().AllDefaults() {
		out[d.Stream] = d
	}
	return out
}

// SetStreamDefaults sets the defaults of the jobs created in a stream from
// now on: a job created with no concurrency key gets key (if not ""), and
// one with a key but no limit gets limit (1 if 0). A key and a limit both
// empty clear them. The answer is the defaults in force after the command
// (nil once cleared).
func (s *Service) SetStreamDefaults(ctx context.Context, name, key string, limit int, actor fsm.Actor) (*fsm.StreamDefaults, uint64, error) {
	return s.SetDefaults(ctx, name, DefaultsInput{ConcurrencyKey: key, ConcurrencyLimit: limit}, actor)
}

// DefaultsInput are a stream's job defaults, all of them: a set replaces
// the ones in force.
type DefaultsInput struct {
	ConcurrencyKey   string
	ConcurrencyLimit int
	// ResultSchema is the result contract of the jobs created without one
	// (contract.go); empty for none.
	ResultSchema json.RawMessage
	// Rate is the rate limit of the jobs created without one (nil: none).
	Rate *RateInput
}

// SetDefaults sets the defaults of the jobs created in a stream from now
// on, as SetStreamDefaults, with every default; all empty clear them.
func (s *Service) SetDefaults(ctx context.Context, name string, in DefaultsInput, actor fsm.Actor) (*fsm.StreamDefaults, uint64, error) {
	key, limit := in.ConcurrencyKey, in.ConcurrencyLimit
	rate, err := s.rateFor(ctx, in.Rate)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case !ValidName(name):
		return nil, 0, invalid("stream name must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	case key != "" && !ValidName(key):
		return nil, 0, invalid("concurrencyKey must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	case limit < 0 || limit > maxConcurrencyLimit:
		return nil, 0, invalid("concurrencyLimit must be 1 to %d", maxConcurrencyLimit)
	}
	schema, err := s.resultSchema(ctx, in.ResultSchema)
	if err != nil {
		return nil, 0, err
	}
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, 0, ErrUpgradeInProgress
	}
	res, idx, err := s.Propose(ctx, fsm.CmdStreamDefaults, &fsm.StreamDefaultsCommand{Now: s.now(), Stream: name,
		ConcurrencyKey: key, ConcurrencyLimit: limit, Actor: actor, ResultSchema: schema, Rate: rate})
	if err != nil {
		return nil, idx, err
	}
	return res.Defaults, idx, nil
}
