package fsm

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config holds the few settings the state machine needs. They must be the
// same on every node: they shape replicated state.
type Config struct {
	// DefaultMaxAttempts applies to jobs created without maxAttempts (default 5).
	DefaultMaxAttempts int
	// Logger receives apply and restore messages.
	Logger hclog.Logger
}

// Result is what Apply returns for every command: the job (or blob) after
// the command, the answer details, and a domain error when the command was
// refused. A refused command changed nothing.
type Result struct {
	Job  *Job
	Jobs []*Job // reap: the jobs taken back; purge: the jobs deleted
	Blob *Blob
	// Session and Stream: the catalog entry a session or stream command
	// made or changed; Streams: the streams a session end ended.
	Session *Session
	Stream  *Stream
	Streams []*Stream
	// Gateway and Worker: the registry entry a control-plane command made,
	// changed or removed; Workers: the workers a gateway's deregistration
	// removed, or a health-set changed.
	Gateway  *Gateway
	Worker   *Worker
	Workers  []*Worker
	Gateways []*Gateway // health-set: the gateways it changed
	// Claimed is false when a claim-next found nothing to claim.
	Claimed bool
	// Duplicate is true when the command repeated one already applied
	// (idempotency key, or a finished attempt's complete/fail): the answer
	// is the first one's and nothing changed.
	Duplicate bool
	Requeued  bool
	DLQ       bool
	// Pause: a stream pause's record (nil after a resume, or a pause of
	// nothing).
	Pause *StreamPause
	// Defaults: a stream's job defaults as set (nil once cleared).
	Defaults *StreamDefaults
	// Token: the named token a token command made or revoked.
	Token *Token
	// Schedule: the schedule a schedule command made, changed, fired or
	// deleted (schedule.go).
	Schedule *Schedule
	// Next: the answer of a complete's next claim (CompleteCommand.Next),
	// nil when it had none or the complete was refused.
	Next *Result
	Err  error
}

// FSM is the job state machine. It implements raft.FSM and raft.BatchingFSM.
type FSM struct {
	cfg    Config
	logger hclog.Logger

	// w is the writer's working set of indexes; only ApplyBatch and Restore
	// (raft's one FSM goroutine) touch it, under wmu.
	wmu sync.Mutex
	w   writer
	// view is the latest published, read-only state (see current).
	view atomic.Pointer[tables]
	// waiters are long-polling claimants, woken when a job is queued.
	waiters waiters
	// feedCh is closed when the feed gains an event (feed.go).
	feedMu sync.Mutex
	feedCh chan struct{}
	// tokWatch wakes the watchers of the named tokens (tokens.go).
	tokWatch tokenWatch

	applied atomic.Uint64
	// level is the cluster level of the state applied so far (level.go),
	// for readers that must not wait for the writer's lock.
	level atomic.Int32
	// events counts the job events applied (stats.go).
	events eventCounts
	// visited counts the jobs reads walked (stats.go, JobsVisited).
	visited atomic.Uint64
	// chain is the running hash of applied commands (hash.go).
	chain *chain
	// scratch reads the tagged fields of each entry applied (the apply
	// goroutine's own, under the writer's lock).
	scratch fields
	// app is the applier of the entry being applied, set afresh for each
	// (the apply goroutine's own, under the writer's lock): one that lived
	// on applyOne's stack would escape through the command's apply, an
	// allocation per entry. Nothing keeps it past an apply.
	app applier

	// intern shares repeated strings of applied commands; ApplyBatch holds
	// its lock.
	intern *interner
}

// New returns an empty state machine.
func New(cfg Config) (*FSM, error) {
	if cfg.DefaultMaxAttempts <= 0 {
		cfg.DefaultMaxAttempts = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	f := &FSM{cfg: cfg, logger: cfg.Logger.Named("fsm"), intern: newInterner(), chain: &chain{}}
	f.chain.reset(0, Hash{}, true)
	f.w.t = newTables()
	f.view.Store(f.w.publishAll())
	return f, nil
}

// AppliedIndex is the Raft index of the last entry applied.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Apply applies one committed log entry. It returns a *Result for command
// entries and nil for others.
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries to the writer's indexes. It does not
// publish them: the next reader that needs them does (see current), so a
// node nobody reads from (a follower, mostly) copies no tree nodes at all,
// and a busy leader publishes at most once per batch.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out, woken, fed, toks := f.applyLocked(logs)
	if len(woken) > 0 {
		f.waiters.fire(woken, false)
	}
	if fed {
		f.feedFired()
	}
	if toks {
		f.tokensFired()
	}
	return out
}

// applyLocked applies logs under the writer's lock and returns the answers
// and the queue lanes that gained a job, and whether the feed gained an
// event.
func (f *FSM) applyLocked(logs []*raft.Log) ([]interface{}, []laneKey, bool, bool) {
	out := make([]interface{}, len(logs))
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.intern.mu.Lock()
	defer f.intern.mu.Unlock()
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		f.chain.fold(l.Index, l.Term, l.Data)
		out[i] = f.applyOne(&f.w, l.Index, l.Data)
		f.chain.publish()
	}
	if n := len(logs); n > 0 {
		f.w.index = logs[n-1].Index
		f.applied.Store(f.w.index)
		f.releaseStaleView()
	}
	f.level.Store(int32(f.w.t.level))
	woken, fed, toks := f.w.woken, f.w.fed, f.w.tokensChanged
	f.w.woken, f.w.fed, f.w.tokensChanged = nil, false, false
	return out, woken, fed, toks
}

// staleViewEntries is how far behind the writer the latest view may fall
// before the FSM lets go of it.
const staleViewEntries = 4096

// noView stands for a released view: its index matches no applied index,
// so the next reader publishes afresh, and it holds no trees.
var noView = &tables{}

// releaseStaleView lets go of the latest view once it is staleViewEntries
// behind the writer. Views are published only when read, so on a node
// nobody reads from (a follower, typically) the last view would otherwise
// stay the FSM's for good, and hold every job version and tree node the
// writer has replaced since: after a queue of 300,000 jobs was worked
// through, a follower's heap held about 400 bytes more per job than the
// leader's. A reader holding the view keeps it; the next reader publishes
// every tree again (each an O(1) clone). The caller holds wmu.
func (f *FSM) releaseStaleView() {
	v := f.view.Load()
	if v == noView || f.w.index-v.index < staleViewEntries {
		return
	}
	// The next publish shares nothing with noView: every tree is cloned
	// from the writer's.
	for i := range f.w.dirty {
		f.w.dirty[i] = true
	}
	f.view.Store(noView)
}

// current returns a view holding every entry applied so far: the latest
// published one when it is up to date, else a new one published now. A
// reader that waited for an index to be applied therefore sees it.
func (f *FSM) current() *tables {
	if v := f.view.Load(); v.index == f.applied.Load() {
		return v
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return f.publishLocked()
}

// publishLocked publishes the writer's state if the latest view is behind
// it. The caller holds wmu.
func (f *FSM) publishLocked() *tables {
	v := f.view.Load()
	if v.index != f.w.index {
		v = f.w.publish(v)
		v.index = f.w.index
		f.view.Store(v)
	}
	return v
}

func (f *FSM) applyOne(w *writer, index uint64, data []byte) interface{} {
	if len(data) == 0 {
		panic(fmt.Sprintf("fsm: empty log entry at index %d", index))
	}
	t := CommandType(data[0])
	if commandTable[t] == nil {
		if t&IgnoreUnknownFlag != 0 {
			f.logger.Warn("ignoring unknown optional command", "type", uint8(t), "index", index)
			return nil
		}
		panic(fmt.Sprintf("fsm: unknown command type %d at index %d", uint8(t), index))
	}
	f.app = applier{writer: w, index: index, maxAttempts: sat32(f.cfg.DefaultMaxAttempts), in: f.intern, events: &f.events}
	a := &f.app
	if t == CmdCreate {
		var c CreateCommand
		if err := decodeCreate(&c, data[1:], f.intern); err != nil {
			panic(fmt.Sprintf("fsm: decode %s at index %d: %v", t, index, err))
		}
		a.token = c.Actor.Token
		if c.form == CmdCreate || c.form == 0 && c.v1Form() == CmdCreate {
			return a.create(&c) // c stays on the stack
		}
		opts := c
		return opts.apply(a)
	}
	cmd, err := decodeBodyWith(&f.scratch, t, data[1:], f.intern)
	if err != nil {
		panic(fmt.Sprintf("fsm: decode %s at index %d: %v", t, index, err))
	}
	a.token = actorToken(t, cmd.(command))
	return cmd.(command).apply(a)
}

// Snapshot captures the state as of now; Persist streams it without holding
// any lock (a published view never changes).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	v := f.publishLocked()
	return &snapshot{t: v, index: v.index, hash: f.chain.hash, hashIndex: f.chain.index, hashKnown: f.chain.known}, nil
}

// Restore replaces the whole state with the snapshot's.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	t, hdr, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	index := hdr.Index
	f.wmu.Lock()
	f.w = writer{t: t, index: index}
	var h Hash
	known := copy(h[:], hdr.Hash) == len(h)
	if !known {
		f.logger.Warn("snapshot carries no state hash; this node's hash is unknown until it restores one that does", "index", index)
	}
	f.chain.reset(hdr.HashIndex, h, known)
	v := f.w.publishAll()
	v.index = index
	f.view.Store(v)
	f.applied.Store(index)
	f.level.Store(int32(t.level))
	f.wmu.Unlock()
	// Every waiter looks again at the new state.
	f.waiters.fire(nil, true)
	f.feedFired()
	f.tokensFired()
	return nil
}

// Read returns a consistent read-only view of the current state: every
// entry applied before the call. It is one atomic load, or, when entries
// were applied since the last view, a publish of the changed trees between
// two batches.
func (f *FSM) Read() *Reader {
	return &Reader{t: f.current(), f: f}
}

// Peek returns a Reader for point lookups of the latest state (see Reader):
// each lookup sees every entry applied before it, and none publishes a view
// (see latest). It is the read of the hot paths, the claim's look for a
// queued job and the heartbeat's look at its lease.
func (f *FSM) Peek() *Reader {
	return &Reader{f: f}
}

// latest runs fn on a state holding every entry applied so far: the latest
// published view when it is current, else the writer's own indexes under
// its lock. A point lookup so never publishes: a publish marks every tree
// changed since the last one shared, and the writer then copies a path of
// nodes in each of them on its next change, which on a node answering a
// lookup per apply batch (a claim's look for a queued job, a heartbeat) was
// the largest allocation of all. fn must be short and must not keep t.
func (f *FSM) latest(fn func(t *tables)) {
	if v := f.view.Load(); v.index == f.applied.Load() {
		fn(v)
		return
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	fn(f.w.t)
}
