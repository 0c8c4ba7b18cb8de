package fsm

import (
	"cmp"
	"math"
	"strings"
	"unique"

	"github.com/google/btree"
)

// The state lives in a handful of ordered in-memory indexes (copy-on-write
// B-trees), one per way the state machine looks jobs up. Each index holds a
// small key inline and a pointer to the job; jobs themselves are immutable
// once stored (a change stores a modified copy), so every index can share
// them.
//
// Exactly one writer (the apply goroutine) owns a working set of trees and
// changes them in place. When a reader needs state newer than the last view
// published, the writer's trees are published as a clone of the trees changed
// since: a clone is O(1) and marks the shared nodes read-only, so readers get
// an immutable, consistent view without holding any lock, and the writer
// copies a node only the first time it changes it after a publish (a path of
// 3-4 nodes per index). Snapshots are such views too: Persist walks one while
// applies continue.
//
// This replaced go-memdb, whose radix trees re-inserted a job into six
// indexes on every change, each insert copying a node per key byte and
// allocating a watch channel per leaf: that was most of the cost of an apply
// and a quarter of a queued job's memory.

// btreeDegree sets nodes of up to 2*16-1 items: shallow trees (4 levels for
// a million jobs) and a node copy of at most a few hundred bytes.
const btreeDegree = 16

// stateLane is a state's position in tables.lanes. Lane 0 holds any state
// this build does not know, so no job is ever left out of the lanes.
type stateLane byte

// numLanes counts the lanes: unknown, then the six states.
const numLanes = 7

func laneOf(s State) stateLane {
	switch s {
	case StateQueued:
		return 1
	case StateRunning:
		return 2
	case StateDone:
		return 3
	case StateFailed:
		return 4
	case StateDead:
		return 5
	case StateCancelled:
		return 6
	}
	return 0
}

// Index items. Each carries its key inline, so a lookup needs no job and a
// comparison reads no pointer.
type (
	// idItem keys a job by id (or idempotency key).
	idItem struct {
		// pfx is the key's first eight bytes, big-endian, zero-padded:
		// ids are random, so nearly every comparison ends on it without
		// reading the key's bytes (a cache miss each, in a tree of a
		// million). Build items with idOf.
		pfx uint64
		key string
		j   *Job
	}
	// seqItem keys a job by create index (the state lanes).
	seqItem struct {
		seq uint64
		j   *Job
	}
	// timeItem keys a job by a time, then create index (leases, retention).
	timeItem struct {
		at  int64
		seq uint64
		j   *Job
	}
	// queueItem keys a queued job by lane (stream, target and the
	// requirement key), then rank, then create index: the first item of a
	// lane is the job a claim takes next. The rank is
	// the queue index less PriorityAging per level of priority (queueRank):
	// among jobs of one priority the one that has waited longest (ties, as
	// after one reap, go in creation order).
	queueItem struct {
		lane queueLane
		rank int64
		seq  uint64
		j    *Job
	}
	// queueKey names a queue lane: a stream, a target and a requirement
	// key.
	queueKey struct{ stream, target, req string }
	// queueLane is a queueKey interned (unique.Make): an item holds one
	// pointer where three strings took 48 bytes, so an item is 32 bytes,
	// not 72, in indexes of every queued job, and two items are of one
	// lane exactly when their handles are equal. A lane's key lives as
	// long as an item holds it.
	queueLane = unique.Handle[queueKey]
	// ageItem keys a claimable job by stream, then queue index, then
	// create index (queueAge). It is a queue item without the lane's target
	// and requirement key, which that index does not order by.
	ageItem struct {
		stream string
		rank   int64 // the queue index
		seq    uint64
		j      *Job
	}
	blobItem struct {
		id string
		b  *Blob
	}
	chunkItem struct {
		blob string
		seq  int
		c    *BlobChunk
	}
)

func lessID(a, b idItem) bool {
	if a.pfx != b.pfx {
		return a.pfx < b.pfx
	}
	return a.key < b.key
}

// idOf is the item keying j by key.
func idOf(key string, j *Job) idItem {
	var p uint64
	for i := 0; i < 8; i++ {
		p <<= 8
		if i < len(key) {
			p |= uint64(key[i])
		}
	}
	return idItem{pfx: p, key: key, j: j}
}
func lessSeq(a, b seqItem) bool { return a.seq < b.seq }
func lessTime(a, b timeItem) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}
func lessQueue(a, b queueItem) bool {
	if a.lane != b.lane {
		return lessQueueKey(a.key(), b.key())
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}

func lessQueueKey(x, y queueKey) bool {
	if x.stream != y.stream {
		return x.stream < y.stream
	}
	if x.target != y.target {
		return x.target < y.target
	}
	return x.req < y.req
}

// cmpStreamTarget orders a and b by their lanes' streams, then targets
// (0: the same for both).
func cmpStreamTarget(a, b queueItem) int {
	if a.lane == b.lane {
		return 0
	}
	x, y := a.key(), b.key()
	return cmp.Or(strings.Compare(x.stream, y.stream), strings.Compare(x.target, y.target))
}

// laneOfQueue is the lane (stream, target, req).
func laneOfQueue(stream, target, req string) queueLane {
	return unique.Make(queueKey{stream, target, req})
}

// laneStart is the place before every item of lane (stream, target, req).
func laneStart(stream, target, req string) queueItem {
	return queueItem{lane: laneOfQueue(stream, target, req), rank: math.MinInt64}
}

// key is the item's lane (empty for the zero item).
func (it queueItem) key() queueKey {
	if it.lane == (queueLane{}) {
		return queueKey{}
	}
	return it.lane.Value()
}

func lessAge(a, b ageItem) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}
func lessBlob(a, b blobItem) bool { return a.id < b.id }
func lessChunk(a, b chunkItem) bool {
	return a.blob < b.blob || (a.blob == b.blob && a.seq < b.seq)
}

// Which index entries a job has.
func idemEntry(j *Job) (idItem, bool) {
	return idOf(j.IdempotencyKey, j), j.IdempotencyKey != ""
}

func queueEntry(j *Job) (queueItem, bool) {
	if !inQueueLane(j) {
		return queueItem{}, false
	}
	return queueItemOf(j), true
}

// inQueueLane reports whether j waits in its lane of the queue index by
// itself (not admitted there by a concurrency key or a rate).
func inQueueLane(j *Job) bool {
	return claimable(j) && j.Extra().ConcurrencyKey == "" && j.Extra().Rate == nil
}

// queueItemOf is j's item in its lane.
func queueItemOf(j *Job) queueItem {
	return queueItem{laneOfQueue(j.Stream, j.Target.String(), j.Extra().Requires), queueRank(j), j.CreateIndex, j}
}

// scheduledEntry keys a queued job waiting for its time by that time.
func scheduledEntry(j *Job) (timeItem, bool) {
	return timeItem{j.NotBefore, j.CreateIndex, j}, j.State == StateQueued && j.NotBefore != 0
}

// PriorityAging is how many log entries of waiting one level of priority
// is worth: a job of priority p is handed out as if it had entered its
// queue p*PriorityAging entries earlier. Higher priorities go first, FIFO
// within a priority, and a job is passed over only by jobs of higher
// priority that entered the queue less than (their priority - its
// priority) * PriorityAging entries after it: no job starves.
const PriorityAging = 1000

// Priority bounds.
const (
	MinPriority = -100
	MaxPriority = 100
)

// queueRank orders the queued jobs of a lane (lower first). Without
// priorities it is the queue index: first in, first out.
func queueRank(j *Job) int64 {
	return int64(j.QueueIndex) - int64(j.Priority)*PriorityAging
}

// routedEntry keys a routed job that is queued or running by its target
// gateway, then id: a gateway's load, and the jobs its death routes again.
func routedEntry(j *Job) (idItem, bool) {
	if j.Extra().Route == nil || (j.State != StateQueued && j.State != StateRunning) {
		return idItem{}, false
	}
	return idOf(gatewayOf(j)+"\x00"+j.ID, j), true
}

// attemptEntry keys a running job by its lease's attempt id: a keyed claim
// (claim-next-keyed) repeated after a lost answer finds the job it took.
func attemptEntry(j *Job) (idItem, bool) {
	if j.State != StateRunning || j.Lease == nil || j.Lease.AttemptID == "" {
		return idItem{}, false
	}
	return idOf(j.Lease.AttemptID, j), true
}

func leaseEntry(j *Job) (timeItem, bool) {
	if j.State != StateRunning || j.Lease == nil {
		return timeItem{}, false
	}
	return timeItem{j.Lease.ExpiresAt, j.CreateIndex, j}, true
}

// finishedEntry keys the jobs retention deletes by finish time: done and
// cancelled ones.
func finishedEntry(j *Job) (timeItem, bool) {
	return timeItem{j.FinishedAt, j.CreateIndex, j}, j.State == StateDone || j.State == StateCancelled
}

// tables is one set of indexes. A published *tables is never changed.
// Every tree field is declared once in treeDecls (store_trees.go); any
// other field must be a value or immutable (replaced whole on a change),
// since a publish hands it to readers as it is.
type tables struct {
	index uint64                   // a published view: the last entry it holds
	byID  *btree.BTreeG[idItem]    // every job, by id
	idem  *btree.BTreeG[idItem]    // jobs created with an idempotency key, by key
	queue *btree.BTreeG[queueItem] // queued jobs, by lane
	// queueAge holds the queued jobs by stream, then queue index: the
	// longest-waiting job of each stream, whatever the priorities.
	queueAge *btree.BTreeG[ageItem]
	// scheduled holds the queued jobs waiting for their time (NotBefore),
	// by that time: what the leader's promote command looks at.
	scheduled *btree.BTreeG[timeItem]
	// The concurrency keys (concurrency.go): claimable jobs with a key by
	// key and lane, the first job of each group admitted into its lane,
	// and how many jobs of each key run.
	keyed, admitted *btree.BTreeG[keyedItem]
	keyRunning      *btree.BTreeG[keyCount]
	// dependents lists each job waiting on others under each of them
	// (depends.go).
	dependents *btree.BTreeG[depItem]
	lease      *btree.BTreeG[timeItem] // running jobs, by lease expiry
	finished   *btree.BTreeG[timeItem] // done jobs, by finish time (retention)
	// lanes holds every job in its state's lane, by create index: listing
	// by state, and counting, never look at other states.
	lanes  [numLanes]*btree.BTreeG[seqItem]
	blobs  *btree.BTreeG[blobItem]
	chunks *btree.BTreeG[chunkItem]
	// The developer queue (devq.go): its catalogs, finished tasks by finish
	// time (task retention), and the registry in force (nil: none loaded;
	// immutable, replaced whole).
	sessions  *catalog[Session] // by name
	streams   *catalog[Stream]  // by name
	taskEnded *btree.BTreeG[timeItem]
	registry  *Registry
	// attempts holds running jobs by their lease's attempt id. Attempt ids
	// a server draws are unique; a keyed claim's is the client's key, and
	// the claim refuses a key another running job holds, so one key names
	// at most one running job.
	attempts *btree.BTreeG[idItem]
	// The control plane's registry (controlplane.go), by id.
	gateways *catalog[Gateway]
	workers  *catalog[Worker]
	// routed holds routed jobs still queued or running, by target gateway.
	routed *btree.BTreeG[idItem]
	// stats counts jobs per stream and state lane (stats.go): a derived
	// index, rebuilt by a restore like the others.
	stats *btree.BTreeG[statItem]
	// The event feed (feed.go): shared with published views by value.
	feed feedLog
	// paused holds the streams an operator paused (cmd_pause.go), by name:
	// immutable, replaced whole on a change; nil when none is.
	paused map[string]*StreamPause
	// jobControl latches once job control is used: a pause, a cancel, a
	// progress report, a release with a cooldown, or a create with a
	// priority, schedule, backoff, concurrency key or dependencies. Jobs
	// and streams may then hold fields only snapshot version 6 carries
	// (snapVersions); it is replicated state, set by applies alone.
	jobControl bool
	// reqs counts the queued jobs of each requirement set in each lane
	// (capabilities.go); capsSeen says when a claim with each capability
	// set was last applied (immutable, replaced whole). capabilities
	// latches once capability routing is used (a job requires
	// capabilities, a claim offers some, a release names a worker the job
	// is not for): the state may then hold what only snapshot version 7
	// carries.
	reqs         *btree.BTreeG[reqCount]
	heads        *btree.BTreeG[queueItem]
	capsSeen     map[string]int64
	capabilities bool
	// defaults holds the streams' job defaults (cmd_defaults.go), by
	// stream: immutable, replaced whole on a change; nil when none has
	// any. version8 latches once stream job defaults are set or a job is
	// created with options (create-opts: a dependency policy): streams may
	// then hold defaults and jobs a dependency policy, which only snapshot
	// version 8 carries. (Its name predates snapVersions; a rename waits
	// for the command files that set it to settle.)
	defaults map[string]*StreamDefaults
	version8 bool
	// level is the cluster's level (level.go): the rules in force. From
	// LevelIdentity on the state may hold what only version 9 snapshots
	// carry: the level and the worker ids' bindings (identity.go), by id
	// and by when each was last used.
	level      int
	workerIDs  *btree.BTreeG[bindingItem]
	workerSeen *btree.BTreeG[seenItem]
	// The named tokens (tokens.go), by name and by their secret's hash.
	tokens, tokenHashes *catalog[Token]
	// schedules holds the recurring schedules (schedule.go), by name.
	schedules *catalog[Schedule]
	// The rate limits (ratelimit.go): each key's bucket, the buckets by
	// due time, the claimable jobs with a rate by key and lane, and the
	// first job of each group admitted into its lane.
	rates        *btree.BTreeG[rateRef]
	rateDue      *btree.BTreeG[rateDueItem]
	rated        *btree.BTreeG[keyedItem]
	rateAdmitted *btree.BTreeG[keyedItem]
	// rateGroups counts the rated jobs of each group (key, stream,
	// target), so that what a closed bucket holds back is counted per
	// group, not job by job.
	rateGroups *btree.BTreeG[rateGroupItem]
}

func (t *tables) job(id string) *Job {
	it, _ := t.byID.Get(idOf(id, nil))
	return it.j
}

// runningByAttempt returns the running job whose lease has attempt id id,
// or nil.
func (t *tables) runningByAttempt(id string) *Job {
	if id == "" {
		return nil
	}
	it, _ := t.attempts.Get(idOf(id, nil))
	return it.j
}

func (t *tables) jobByIdem(key string) *Job {
	if key == "" {
		return nil
	}
	it, _ := t.idem.Get(idOf(key, nil))
	return it.j
}

// firstQueued returns the longest-waiting job of one lane, or nil.
func (t *tables) firstQueued(stream, target, req string) *Job {
	var j *Job
	from := laneStart(stream, target, req)
	t.queue.AscendGreaterOrEqual(from, func(it queueItem) bool {
		if it.lane == from.lane {
			j = it.j
		}
		return false
	})
	return j
}

// nextQueued returns the longest-waiting queued job of the first stream (in
// order) that has one a claimant with the given targets and capabilities
// (sorted) may take: untargeted jobs and jobs targeted at one of targets,
// that require nothing or only capabilities among caps, and that worker
// (if not "") did not release as not for it. Ended and paused streams are
// skipped.
func (t *tables) nextQueued(streams, targets, caps []string, worker string) *Job {
	for _, s := range streams {
		if t.stream(s).Ended() || t.isPaused(s) {
			continue // an ended or paused stream's queued jobs stay, unclaimed
		}
		best := t.bestOfLane(s, "", caps, worker, nil)
		for _, tg := range targets {
			if tg == "" {
				continue
			}
			best = t.bestOfLane(s, tg, caps, worker, best)
		}
		if best != nil {
			return best
		}
	}
	return nil
}

func (t *tables) blob(id string) *Blob {
	it, _ := t.blobs.Get(blobItem{id: id})
	return it.b
}

func (t *tables) chunk(blob string, seq int) *BlobChunk {
	it, _ := t.chunks.Get(chunkItem{blob: blob, seq: seq})
	return it.c
}
