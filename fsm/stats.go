package fsm

import (
	"cmp"
	"encoding/hex"
	"io"
	"math"
	"slices"
	"sync/atomic"
)

// Figures for operators (the metrics of every node): jobs per stream and
// state, kept as a derived index so a scrape reads a few items per stream
// instead of walking the jobs; and counters of the job events this node
// applied. Neither is replicated state: the index is rebuilt from the jobs
// by a restore, and the counters are this process's own.

// statItem counts the jobs of one stream with one target in one state
// lane (by target, so a claw's counts leave out the jobs it may not see),
// the developer queue's tasks apart from the other jobs (task). Items with
// a zero count are deleted, so the index holds only streams that have
// jobs.
type statItem struct {
	stream, target string
	lane           stateLane
	task           bool
	n              int
}

func lessStat(a, b statItem) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.target != b.target {
		return a.target < b.target
	}
	if a.lane != b.lane {
		return a.lane < b.lane
	}
	return !a.task && b.task
}

// count adds d to the jobs of j's stream with j's target in lane, among
// the tasks if j is one.
func (w *writer) count(j *Job, lane stateLane, d int) {
	key := statItem{stream: j.Stream, target: j.Target.String(), lane: lane, task: j.IsTask()}
	it, _ := w.t.stats.Get(key)
	it.stream, it.target, it.lane, it.task = key.stream, key.target, key.lane, key.task
	it.n += d
	if it.n <= 0 {
		w.t.stats.Delete(it)
	} else {
		w.t.stats.ReplaceOrInsert(it)
	}
	w.dirty[tStats] = true
}

var laneStates = [numLanes]State{1: StateQueued, 2: StateRunning, 3: StateDone, 4: StateFailed, 5: StateDead, 6: StateCancelled}

// StreamCount is how many jobs of one stream are in one state.
type StreamCount struct {
	Stream string
	State  State
	N      int
}

// StreamCounts returns the number of jobs per stream and state, by stream
// name then state; states with no job are left out. Its cost grows with
// the number of streams and targets, not of jobs.
func (r *Reader) StreamCounts() []StreamCount { return r.StreamCountsFor(HeadRole) }

// StreamCountsFor is StreamCounts of the jobs whose target a caller of role
// may see (sees: untargeted, its role's, its role's workers', routed).
func (r *Reader) StreamCountsFor(role string) []StreamCount {
	t := r.view()
	var out []StreamCount
	t.stats.Ascend(func(it statItem) bool {
		if role != HeadRole && !t.seesTarget(role, it.target) {
			return true
		}
		s := laneStates[it.lane]
		if s == "" {
			s = "unknown"
		}
		if n := len(out); n > 0 && out[n-1].Stream == it.stream {
			// The stream's counts so far: add to its state's, if listed.
			for i := n - 1; i >= 0 && out[i].Stream == it.stream; i-- {
				if out[i].State == s {
					out[i].N += it.n
					return true
				}
			}
		}
		out = append(out, StreamCount{Stream: it.stream, State: s, N: it.n})
		return true
	})
	slices.SortStableFunc(out, func(a, b StreamCount) int {
		return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(laneOf(a.State), laneOf(b.State)))
	})
	return out
}

// TaskCounts counts the developer queue's tasks by state, from the
// per-stream counts: its cost grows with the number of streams and
// targets, not of jobs.
func (r *Reader) TaskCounts() map[State]int {
	out := map[State]int{}
	r.view().stats.Ascend(func(it statItem) bool {
		if it.task && laneStates[it.lane] != "" {
			out[laneStates[it.lane]] += it.n
		}
		return true
	})
	return out
}

// OldestQueued returns, per stream with queued jobs, when the job that has
// waited longest was last queued (unix nanoseconds), whatever the
// priorities: the first job of each stream in the queue-age index. Its
// cost grows with the number of streams, not of jobs.
func (r *Reader) OldestQueued() map[string]int64 { return r.OldestQueuedFor(HeadRole) }

// oldestScan bounds how many of a stream's longest-waiting jobs
// OldestQueuedFor looks at for one its caller may see.
const oldestScan = 64

// OldestQueuedFor is OldestQueued of the jobs whose target a caller of role
// may see: for each stream, the longest-waiting such job among its
// oldestScan longest-waiting jobs (a stream whose first ones are all
// another's shows none).
func (r *Reader) OldestQueuedFor(role string) map[string]int64 {
	out := map[string]int64{}
	t := r.view()
	q := t.queueAge
	from := ageItem{rank: math.MinInt64}
	visited := 0
	defer func() { r.f.visited.Add(uint64(visited)) }()
	for {
		var head ageItem
		found := false
		q.AscendGreaterOrEqual(from, func(it ageItem) bool {
			head, found = it, true
			return false
		})
		if !found {
			return out
		}
		visited++
		if role == HeadRole || t.seesTarget(role, head.j.Target.String()) {
			out[head.stream] = head.j.UpdatedAt
		} else {
			n := 0
			q.AscendGreaterOrEqual(head, func(it ageItem) bool {
				if it.stream != head.stream || n == oldestScan {
					return false
				}
				n++
				visited++
				if t.seesTarget(role, it.j.Target.String()) {
					out[head.stream] = it.j.UpdatedAt
					return false
				}
				return true
			})
		}
		// The next stream: the first item past every item of this one.
		from = ageItem{stream: head.stream + "\x00", rank: math.MinInt64}
	}
}

// JobEvent counters: one per event type a job's history records
// (EventCreated…), and AutoFailed for tasks the reaper failed.
const AutoFailed = "auto_failed"

// countedEvents are the event types the counters keep, in a fixed order.
var countedEvents = [...]string{eventWords[EventCreated], eventWords[EventClaimed], eventWords[EventStarted],
	eventWords[EventCompleted], eventWords[EventFailed], eventWords[EventReleased], eventWords[EventReaped],
	eventWords[EventDead], eventWords[EventRedriven], eventWords[EventRouted], eventWords[EventComment], AutoFailed,
	eventWords[EventCancelRequested], eventWords[EventCancelled], eventWords[EventCompleteRefused]}

type eventCounts struct {
	// from: entries at or below this index are not counted (a restarted
	// node replaying its log counted them in its previous life).
	from atomic.Uint64
	n    [len(countedEvents)]atomic.Uint64
}

func eventSlot(typ string) int {
	for i, e := range countedEvents {
		if e == typ {
			return i
		}
	}
	return -1
}

// countEvents counts the events j gained over old.
func (a *applier) countEvents(old, j *Job) {
	if a.events == nil || a.index <= a.events.from.Load() || j == nil {
		return
	}
	n := 0
	if old != nil {
		n = old.NumEvents()
	}
	for i := n; i < j.NumEvents(); i++ {
		ev := j.EventAt(i)
		if k := eventSlot(ev.Type.String()); k >= 0 {
			a.events.n[k].Add(1)
		}
		if ev.Type == EventReaped && j.Error != nil && j.Error.Code == AutoFailCode && ev.To.State() == StateFailed {
			a.events.n[eventSlot(AutoFailed)].Add(1)
		}
	}
}

// CountEventsAfter makes the event counters skip entries at or below index:
// a node sets it to its log's last index before it starts replaying.
func (f *FSM) CountEventsAfter(index uint64) { f.events.from.Store(index) }

// EventCounts returns how many job events of each type this node applied
// since it started (heartbeats are not counted), by type.
func (f *FSM) EventCounts() map[string]uint64 {
	out := make(map[string]uint64, len(countedEvents))
	for i, e := range countedEvents {
		out[e] = f.events.n[i].Load()
	}
	return out
}

// JobsVisited is how many jobs this node's reads have walked since it
// started: the jobs a List examined for its pages, and those the figures
// per stream looked at. It measures what reads cost; the share of one
// page that needs no jobs but per-stream figures does not grow with the
// number of jobs in the state.
func (f *FSM) JobsVisited() uint64 { return f.visited.Load() }

// EventCounts is FSM.EventCounts, for a holder of a Reader.
func (r *Reader) EventCounts() map[string]uint64 { return r.f.EventCounts() }

// Summary counts what a state holds: what `spine snapshot inspect` shows
// of a backup, and what a restore is checked against.
type Summary struct {
	// Index is the Raft index of the last entry the state holds.
	Index      uint64        `json:"index"`
	Jobs       map[State]int `json:"jobs"`
	Streams    int           `json:"streams"`
	Sessions   int           `json:"sessions"`
	Blobs      int           `json:"blobs"`
	Gateways   int           `json:"gateways"`
	Workers    int           `json:"workers"`
	FeedEvents int           `json:"feed_events"`
	// Registry is whether a tool registry (spine.yml) is loaded.
	Registry bool `json:"registry"`
	// StateHash is the running hash of the commands the state was built
	// from ("" when unknown).
	StateHash string `json:"state_hash,omitempty"`
}

// Summary counts the view's contents.
func (r *Reader) Summary() Summary {
	t := r.view()
	s := Summary{Index: t.index, Jobs: map[State]int{}, Streams: t.streams.len(), Sessions: t.sessions.len(),
		Blobs: t.blobs.Len(), Gateways: t.gateways.len(), Workers: t.workers.len(), Registry: t.registry != nil}
	for lane, st := range laneStates {
		if st != "" {
			s.Jobs[st] = t.lanes[lane].Len()
		}
	}
	if oldest := t.feed.oldest(); oldest != 0 {
		s.FeedEvents = int(t.feed.latest - oldest + 1)
	}
	return s
}

// SummarizeSnapshot reads a snapshot as Restore would, into a state
// machine of its own, and summarizes it: a snapshot it reads whole is one a
// node can restore.
func SummarizeSnapshot(rc io.ReadCloser) (Summary, error) {
	f, err := New(Config{})
	if err != nil {
		return Summary{}, err
	}
	if err := f.Restore(rc); err != nil {
		return Summary{}, err
	}
	s := f.Read().Summary()
	if _, h, ok := f.StateHash(); ok {
		s.StateHash = hex.EncodeToString(h[:])
	}
	return s, nil
}
