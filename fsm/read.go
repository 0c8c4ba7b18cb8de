package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// Reader reads the state. One from FSM.Read is a consistent view of the
// state at the moment it was made. One from FSM.Peek is for point lookups
// (Job, JobByIdempotencyKey, Heartbeat): each reads the latest applied state
// without taking a view, and the first method that walks or counts (List,
// Counts, the blob and reaper reads) takes one, which its later methods then
// share. A Reader from Peek is for one goroutine (taking its view sets it);
// one from Read may be shared. Holding a Reader blocks nothing.
type Reader struct {
	f *FSM
	t *tables // nil until a method needs a consistent view
}

// view returns the Reader's consistent view, taking it on first use.
func (r *Reader) view() *tables {
	if r.t == nil {
		r.t = r.f.current()
	}
	return r.t
}

// firstAt is the time of one tree's first item (first answers it), 0 when
// the tree is empty: a point lookup, for the leader's loops' looks.
func (r *Reader) firstAt(first func(t *tables) (int64, bool)) int64 {
	var at int64
	r.point(func(t *tables) {
		if a, ok := first(t); ok {
			at = a
		}
	})
	return at
}

// point runs a lookup on the Reader's view if it has one, else on the
// latest applied state. fn must not keep t.
func (r *Reader) point(fn func(t *tables)) {
	if r.t != nil {
		fn(r.t)
		return
	}
	r.f.latest(fn)
}

// Job returns the job with the given id, or ErrNotFound.
func (r *Reader) Job(id string) (*Job, error) {
	var j *Job
	r.point(func(t *tables) { j = t.job(id) })
	if j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("job %s: %w", id, ErrNotFound)
}

// JobByIdempotencyKey returns the job created with key, or nil.
func (r *Reader) JobByIdempotencyKey(key string) *Job {
	var j *Job
	r.point(func(t *tables) { j = t.jobByIdem(key) })
	return j
}

// RunningByAttempt returns the running job whose lease has attempt id id
// (a keyed claim's key), or nil.
func (r *Reader) RunningByAttempt(id string) *Job {
	var j *Job
	r.point(func(t *tables) { j = t.runningByAttempt(id) })
	return j
}

// ListFilter selects jobs for List. Zero fields match everything.
type ListFilter struct {
	State State
	// States, when set, keeps only jobs in one of these states (State, if
	// also set, must be one of them): List walks only their lanes.
	States []State
	Stream string
	// Target matches jobs targeted at this role, worker id or gateway.
	Target string
	// Schedule matches the jobs the recurring schedule of this name made.
	Schedule string
	// Visible, when set, keeps only jobs this filter accepts (role checks).
	Visible func(*Job) bool
	// After is a cursor: only jobs created after this create index.
	After uint64
	// Limit caps the page (default 100).
	Limit int
	// MaxScan bounds the jobs examined for one page (default
	// DefaultMaxScan; negative: no bound), so a filter that matches little
	// cannot make one request scan everything.
	MaxScan int
}

// DefaultMaxScan is ListFilter.MaxScan's default.
const DefaultMaxScan = 100_000

// List returns jobs in creation order matching f, and the cursor of the
// next page: 0 when the lanes it walks hold no job past the page. A page
// cut short by MaxScan has a cursor (the last job examined) and may be
// empty.
func (r *Reader) List(f ListFilter) ([]*Job, uint64, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.MaxScan == 0 {
		f.MaxScan = DefaultMaxScan
	}
	// Walk the lanes of the states asked for (all of them when none is),
	// merged by create index.
	m := laneMerge{heads: make([]laneHead, 0, numLanes)}
	for lane := range stateLane(numLanes) {
		if !f.walks(lane) {
			continue
		}
		h := laneHead{tr: r.view().lanes[lane], from: f.After + 1}
		if h.advance() {
			m.heads = append(m.heads, h)
		}
	}
	var out []*Job
	var last uint64
	scanned := 0
	defer func() { r.f.visited.Add(uint64(scanned)) }()
	for f.MaxScan < 0 || scanned < f.MaxScan {
		j := m.next()
		if j == nil {
			return out, 0, nil
		}
		scanned++
		last = j.CreateIndex
		if (f.State != "" && j.State != f.State) || (f.Stream != "" && j.Stream != f.Stream) ||
			(f.Target != "" && j.Target.String() != f.Target && gatewayOf(j) != f.Target) || (f.Visible != nil && !f.Visible(j)) ||
			(f.Schedule != "" && j.Extra().Schedule != f.Schedule) {
			continue
		}
		out = append(out, j)
		if len(out) == f.Limit {
			break
		}
	}
	if len(m.heads) == 0 {
		return out, 0, nil // the lanes end with this page
	}
	return out, last, nil
}

// walks reports whether List with f walks lane.
func (f *ListFilter) walks(lane stateLane) bool {
	if f.State != "" && lane != laneOf(f.State) {
		return false
	}
	if len(f.States) == 0 {
		return true
	}
	for _, s := range f.States {
		if lane == laneOf(s) {
			return true
		}
	}
	return false
}

// laneChunk is how many jobs a lane iterator reads from its tree at a time.
const laneChunk = 64

// laneHead iterates one lane in create-index order, reading it a chunk at a
// time, and holds the job it is at.
type laneHead struct {
	tr   *btree.BTreeG[seqItem]
	from uint64 // the next chunk starts at this create index
	buf  []*Job
	job  *Job
}

// advance moves to the lane's next job and reports whether there is one.
func (h *laneHead) advance() bool {
	if len(h.buf) == 0 && h.tr != nil {
		h.tr.AscendGreaterOrEqual(seqItem{seq: h.from}, func(it seqItem) bool {
			h.buf = append(h.buf, it.j)
			return len(h.buf) < laneChunk
		})
		if len(h.buf) < laneChunk {
			h.tr = nil // the lane ends in this chunk
		} else {
			h.from = h.buf[len(h.buf)-1].CreateIndex + 1
		}
	}
	if len(h.buf) == 0 {
		h.job = nil
		return false
	}
	h.job, h.buf = h.buf[0], h.buf[1:]
	return true
}

// laneMerge yields the jobs of several lanes in create-index order.
type laneMerge struct{ heads []laneHead }

func (m *laneMerge) next() *Job {
	best := -1
	for i := range m.heads {
		if best < 0 || m.heads[i].job.CreateIndex < m.heads[best].job.CreateIndex {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	j := m.heads[best].job
	if !m.heads[best].advance() {
		m.heads = append(m.heads[:best], m.heads[best+1:]...)
	}
	return j
}

// NextClaimable returns the job a claim-next over streams for targets and
// capabilities (a sorted list, as Labels gives; nil for none) by worker
// (Job.NotFor; "" for none) would take now (nil if none), and a watch that fires when that answer may have
// changed: a job entering one of those queues, or a restore. It looks at the
// latest state, not this view's: the watch is registered first, so no job
// queued after the look can be missed.
//
// When there is a job, the watch is released at once (and reads as fired):
// a caller that takes the job does not wait on it, and a watch left
// registered would stay until a job entered each of its lanes, which for a
// lane of one worker id may be never.
//
// A look that finds a job registers no watch at all (the claim path of a
// busy queue): it answers firedWatch. Only a look that finds none
// registers one, then looks again, so a job queued between the two looks
// is either seen by the second or fires the watch.
func (r *Reader) NextClaimable(streams, targets, caps []string, worker string) (*Job, *Watch) {
	var j *Job
	look := func(t *tables) { j = t.nextQueued(streams, targets, caps, worker) }
	if r.f.latest(look); j != nil {
		return j, firedWatch
	}
	wt := r.f.waiters.watch(streams, targets)
	r.f.latest(look)
	if j != nil {
		r.f.waiters.release(wt)
	}
	return j, wt
}

// NextQueued returns the job a claim-next of streams by a claimant with
// the given targets and capabilities (sorted) would take in this view, or
// nil; it watches nothing (a dry run).
func (r *Reader) NextQueued(streams, targets, caps []string, worker string) *Job {
	var j *Job
	r.point(func(t *tables) { j = t.nextQueued(streams, targets, caps, worker) })
	return j
}

// Blob returns a committed blob's metadata, or ErrNotFound.
func (r *Reader) Blob(id string) (*Blob, error) {
	if b := r.view().blob(id); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("blob %s: %w", id, ErrNotFound)
}

// BlobChunks calls fn with each chunk of a committed blob, in order.
func (r *Reader) BlobChunks(id string, fn func([]byte) error) error {
	b, err := r.Blob(id)
	if err != nil {
		return err
	}
	for i := 0; i < b.Chunks; i++ {
		c := r.view().chunk(id, i)
		if c == nil {
			return fmt.Errorf("blob %s chunk %d: %w", id, i, ErrBlobIncomplete)
		}
		if err := fn(c.Data); err != nil {
			return err
		}
	}
	return nil
}

// Counts returns the number of jobs in each state.
func (r *Reader) Counts() (map[State]int, error) {
	out := map[State]int{}
	t := r.view()
	for _, s := range []State{StateQueued, StateRunning, StateDone, StateFailed, StateDead, StateCancelled} {
		out[s] = t.lanes[laneOf(s)].Len()
	}
	return out, nil
}

// OldestFinished returns the finish time of the done job that finished
// first, or 0 when there is none.
func (r *Reader) OldestFinished() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.finished.Min(); return it.at, ok })
}

// NextLeaseExpiry returns the earliest lease expiry among running jobs, or
// 0 when none is running.
func (r *Reader) NextLeaseExpiry() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.lease.Min(); return it.at, ok })
}

// Heartbeat answers heartbeat c from the Reader's state when it needs no
// log entry: the job is missing, or the caller may not heartbeat it (the
// entry would be refused the same way), or the caller holds the lease and
// it still has more than (1 - renewFraction) of its length left at c.Now, so
// extending it would move its expiry by less than renewFraction of a lease.
// It runs the same checks the heartbeat entry runs. ok is false when the
// lease is due for renewal and the heartbeat must be written.
//
// Every lease a node has applied is committed, so no failover takes back
// what the answer says; which node's state may answer a client, and after
// waiting for what, is the API's choice (httpapi's heartbeat).
func (r *Reader) Heartbeat(c *HeartbeatCommand, renewFraction float64) (res *Result, ok bool) {
	var j *Job
	r.point(func(t *tables) { j = t.job(c.Ref.JobID) })
	if j == nil {
		return notFound(c.Ref.JobID), true
	}
	if err := authorize("heartbeat", j, c.Ref, c.Actor, true); err != nil {
		return &Result{Job: j, Err: err}, true
	}
	if renewFraction <= 0 {
		return nil, false
	}
	lease := j.leaseNanos(c.LeaseNanos)
	if float64(j.Lease.ExpiresAt-c.Now) < float64(lease)*(1-renewFraction) {
		return nil, false
	}
	return &Result{Job: j}, true
}

// Session returns the session name, or ErrNotFound.
func (r *Reader) Session(name string) (*Session, error) {
	if s := r.view().session(name); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("session %s: %w", name, ErrNotFound)
}

// Sessions returns every session, by name.
func (r *Reader) Sessions() []*Session {
	var out []*Session
	r.view().sessions.ascend(func(s *Session) bool {
		out = append(out, s)
		return true
	})
	return out
}

// Stream returns the registered stream name, or ErrNotFound.
func (r *Reader) Stream(name string) (*Stream, error) {
	var s *Stream
	r.point(func(t *tables) { s = t.stream(name) })
	if s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("stream %s: %w", name, ErrNotFound)
}

// Streams returns the registered streams of session (all when ""), by name.
func (r *Reader) Streams(session string) []*Stream {
	var out []*Stream
	r.view().streams.ascend(func(s *Stream) bool {
		if session == "" || s.Session == session {
			out = append(out, s)
		}
		return true
	})
	return out
}

// Registry returns the registry in force, or nil when none was loaded.
//
// The registry is replaced whole on every change, never changed in place,
// so a point lookup may hand out the writer's own.
func (r *Reader) Registry() *Registry {
	var reg *Registry
	r.point(func(t *tables) { reg = t.registry })
	return reg
}

// PeekTask returns the task a claim of stream would take next (the oldest
// queued untargeted job), or nil; an ended or paused stream hands out none.
func (r *Reader) PeekTask(stream string) *Job {
	var j *Job
	r.point(func(t *tables) {
		if !t.stream(stream).Ended() && !t.isPaused(stream) {
			j = t.firstQueued(stream, "", "")
		}
	})
	return j
}

// OldestTaskEnded returns the finish time of the finished task that
// finished first, or 0 when there is none.
func (r *Reader) OldestTaskEnded() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.taskEnded.Min(); return it.at, ok })
}
