package fsm

import (
	"context"
	"fmt"
	"math"
	"sync"

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
		stream, target, req string
		rank                int64
		seq                 uint64
		j                   *Job
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

func lessID(a, b idItem) bool   { return a.key < b.key }
func lessSeq(a, b seqItem) bool { return a.seq < b.seq }
func lessTime(a, b timeItem) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}
func lessQueue(a, b queueItem) bool {
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	if a.target != b.target {
		return a.target < b.target
	}
	if a.req != b.req {
		return a.req < b.req
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
	return idItem{j.IdempotencyKey, j}, j.IdempotencyKey != ""
}

func queueEntry(j *Job) (queueItem, bool) {
	return queueItem{j.Stream, j.Target, j.Requires, queueRank(j), j.CreateIndex, j}, claimable(j) && j.ConcurrencyKey == ""
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
	if j.Route == nil || (j.State != StateQueued && j.State != StateRunning) {
		return idItem{}, false
	}
	return idItem{gatewayOf(j) + "\x00" + j.ID, j}, true
}

// attemptEntry keys a running job by its lease's attempt id: a keyed claim
// (claim-next-keyed) repeated after a lost answer finds the job it took.
func attemptEntry(j *Job) (idItem, bool) {
	if j.State != StateRunning || j.Lease == nil || j.Lease.AttemptID == "" {
		return idItem{}, false
	}
	return idItem{j.Lease.AttemptID, j}, true
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

// Tree numbers, for the writer's record of which trees a batch changed.
const (
	tByID = iota
	tIdem
	tQueue
	tLease
	tFinished
	tBlobs
	tChunks
	tSessions
	tStreams
	tTaskEnded
	tAttempts
	tGateways
	tWorkers
	tRouted
	tStats
	tQueueAge
	tScheduled
	tKeyed
	tAdmitted
	tKeyRunning
	tDependents
	tReqs
	tHeads
	tWorkerIDs
	tLanes   // tLanes+lane for each lane
	numTrees = tLanes + numLanes
)

// tables is one set of indexes. A published *tables is never changed.
type tables struct {
	index uint64                   // a published view: the last entry it holds
	byID  *btree.BTreeG[idItem]    // every job, by id
	idem  *btree.BTreeG[idItem]    // jobs created with an idempotency key, by key
	queue *btree.BTreeG[queueItem] // queued jobs, by lane
	// queueAge holds the queued jobs by stream, then queue index: the
	// longest-waiting job of each stream, whatever the priorities.
	queueAge *btree.BTreeG[queueItem]
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
	sessions  *btree.BTreeG[sessionItem]
	streams   *btree.BTreeG[streamItem]
	taskEnded *btree.BTreeG[timeItem]
	registry  *Registry
	// attempts holds running jobs by their lease's attempt id. Attempt ids
	// a server draws are unique; a keyed claim's is the client's key, and
	// the claim refuses a key another running job holds, so one key names
	// at most one running job.
	attempts *btree.BTreeG[idItem]
	// The control plane's registry (controlplane.go), by id.
	gateways *btree.BTreeG[gatewayItem]
	workers  *btree.BTreeG[workerItem]
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
	// jobControl is set once a pause or a cancel has been applied: the
	// state may then hold what only version 6 snapshots carry.
	jobControl bool
	// reqs counts the queued jobs of each requirement set in each lane
	// (capabilities.go); capsSeen says when a claim with each capability
	// set was last applied (immutable, replaced whole); capabilities is
	// set once either is used: the state may then hold what only version
	// 7 snapshots carry.
	reqs         *btree.BTreeG[reqCount]
	heads        *btree.BTreeG[queueItem]
	capsSeen     map[string]int64
	capabilities bool
	// defaults holds the streams' job defaults (cmd_defaults.go), by
	// stream: immutable, replaced whole on a change; nil when none has
	// any. version8 is set once defaults have been set or a job created
	// with a dependency policy: the state may then hold what only version
	// 8 snapshots carry.
	defaults map[string]*StreamDefaults
	version8 bool
	// level is the cluster's level (level.go): the rules in force. From
	// LevelIdentity on the state may hold what only version 9 snapshots
	// carry: the level and the worker ids' bindings (identity.go), by id
	// and by when each was last used.
	level      int
	workerIDs  *btree.BTreeG[bindingItem]
	workerSeen *btree.BTreeG[seenItem]
}

func newTables() *tables {
	t := &tables{
		byID:       btree.NewG(btreeDegree, lessID),
		idem:       btree.NewG(btreeDegree, lessID),
		queue:      btree.NewG(btreeDegree, lessQueue),
		queueAge:   btree.NewG(btreeDegree, lessQueue),
		scheduled:  btree.NewG(btreeDegree, lessTime),
		keyed:      newKeyedTree(),
		admitted:   newAdmittedTree(),
		keyRunning: newKeyCountTree(),
		dependents: newDepTree(),
		lease:      btree.NewG(btreeDegree, lessTime),
		finished:   btree.NewG(btreeDegree, lessTime),
		blobs:      btree.NewG(btreeDegree, lessBlob),
		chunks:     btree.NewG(btreeDegree, lessChunk),

		sessions:  newSessionTree(),
		streams:   newStreamTree(),
		taskEnded: btree.NewG(btreeDegree, lessTime),
		attempts:  btree.NewG(btreeDegree, lessID),
		gateways:  newGatewayTree(),
		workers:   newWorkerTree(),
		routed:    btree.NewG(btreeDegree, lessID),
		stats:     btree.NewG(btreeDegree, lessStat),
		reqs:      btree.NewG(btreeDegree, lessReqCount),
		heads:     btree.NewG(btreeDegree, lessHead),

		workerIDs:  newBindingTree(),
		workerSeen: newSeenTree(),
	}
	for i := range t.lanes {
		t.lanes[i] = btree.NewG(btreeDegree, lessSeq)
	}
	return t
}

func (t *tables) job(id string) *Job {
	it, _ := t.byID.Get(idItem{key: id})
	return it.j
}

// runningByAttempt returns the running job whose lease has attempt id id,
// or nil.
func (t *tables) runningByAttempt(id string) *Job {
	if id == "" {
		return nil
	}
	it, _ := t.attempts.Get(idItem{key: id})
	return it.j
}

func (t *tables) jobByIdem(key string) *Job {
	if key == "" {
		return nil
	}
	it, _ := t.idem.Get(idItem{key: key})
	return it.j
}

// firstQueued returns the longest-waiting job of one lane, or nil.
func (t *tables) firstQueued(stream, target, req string) *Job {
	var j *Job
	t.queue.AscendGreaterOrEqual(queueItem{stream: stream, target: target, req: req, rank: math.MinInt64}, func(it queueItem) bool {
		if it.stream == stream && it.target == target && it.req == req {
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

// writer is the apply goroutine's working set: trees only it touches, the
// record of which it changed since the last publish, and the queue lanes
// that gained a job (whose waiters to wake).
type writer struct {
	t     *tables
	index uint64 // the last entry applied to t
	dirty [numTrees]bool
	woken []laneKey
	fed   bool // the feed gained an event since its readers were woken
	// feedHead is the feed's last seq, while a snapshot is restored.
	feedHead uint64
}

// update moves one index entry from old to new: a replace when the key is
// the same, else a delete and an insert. It reports whether the tree changed.
func update[T any](tr *btree.BTreeG[T], less func(a, b T) bool, old T, hadOld bool, nw T, hasNew bool) bool {
	switch {
	case hadOld && hasNew && !less(old, nw) && !less(nw, old):
		tr.ReplaceOrInsert(nw)
	case hadOld && hasNew:
		tr.Delete(old)
		tr.ReplaceOrInsert(nw)
	case hadOld:
		tr.Delete(old)
	case hasNew:
		tr.ReplaceOrInsert(nw)
	default:
		return false
	}
	return true
}

// jobEntries are the index entries one version of a job has (none for nil).
type jobEntries struct {
	present                               bool
	id                                    idItem
	idem                                  idItem
	hasIdem                               bool
	attempt                               idItem
	hasAttempt                            bool
	routed                                idItem
	hasRouted                             bool
	queue, age                            queueItem
	hasQueue, hasAge                      bool
	lease, done, ended, sched             timeItem
	hasLease, hasDone, hasEnded, hasSched bool
	lane                                  stateLane
	seq                                   seqItem
}

func entriesOf(j *Job) jobEntries {
	if j == nil {
		return jobEntries{}
	}
	e := jobEntries{present: true, id: idItem{j.ID, j}, lane: laneOf(j.State), seq: seqItem{j.CreateIndex, j}}
	e.idem, e.hasIdem = idemEntry(j)
	e.attempt, e.hasAttempt = attemptEntry(j)
	e.routed, e.hasRouted = routedEntry(j)
	e.queue, e.hasQueue = queueEntry(j)
	e.age, e.hasAge = queueItem{stream: j.Stream, rank: int64(j.QueueIndex), seq: j.CreateIndex, j: j}, claimable(j)
	e.lease, e.hasLease = leaseEntry(j)
	e.sched, e.hasSched = scheduledEntry(j)
	e.done, e.hasDone = finishedEntry(j)
	e.ended, e.hasEnded = taskEndedEntry(j)
	return e
}

// putJob replaces old with j in every index (old nil: a new job; j nil: a
// deletion).
func (w *writer) putJob(old, j *Job) {
	o, n := entriesOf(old), entriesOf(j)
	// The id index says which version is stored: old must be it, or the
	// other indexes would keep entries of a version they no longer hold.
	var prev idItem
	if n.present {
		prev, _ = w.t.byID.ReplaceOrInsert(n.id)
	} else {
		prev, _ = w.t.byID.Delete(o.id)
	}
	if prev.j != old {
		panic(fmt.Sprintf("fsm: store of job %s replaced a version other than the one it was given", prev.key))
	}
	w.dirty[tByID] = true
	w.mark(tIdem, update(w.t.idem, lessID, o.idem, o.hasIdem, n.idem, n.hasIdem))
	w.mark(tAttempts, update(w.t.attempts, lessID, o.attempt, o.hasAttempt, n.attempt, n.hasAttempt))
	w.mark(tRouted, update(w.t.routed, lessID, o.routed, o.hasRouted, n.routed, n.hasRouted))
	if w.queueUpdate(o.queue, o.hasQueue, n.queue, n.hasQueue) &&
		n.hasQueue && (!o.hasQueue || lessQueue(o.queue, n.queue) || lessQueue(n.queue, o.queue)) {
		// The job entered its lane: wake the claimants watching it.
		w.woken = append(w.woken, laneKey{j.Stream, j.Target})
	}
	w.mark(tQueueAge, update(w.t.queueAge, lessQueue, o.age, o.hasAge, n.age, n.hasAge))
	w.mark(tLease, update(w.t.lease, lessTime, o.lease, o.hasLease, n.lease, n.hasLease))
	w.mark(tScheduled, update(w.t.scheduled, lessTime, o.sched, o.hasSched, n.sched, n.hasSched))
	w.mark(tFinished, update(w.t.finished, lessTime, o.done, o.hasDone, n.done, n.hasDone))
	w.mark(tTaskEnded, update(w.t.taskEnded, lessTime, o.ended, o.hasEnded, n.ended, n.hasEnded))
	for lane := range stateLane(numLanes) {
		had, has := o.present && o.lane == lane, n.present && n.lane == lane
		w.mark(tLanes+int(lane), update(w.t.lanes[lane], lessSeq, o.seq, had, n.seq, has))
	}
	if o.present != n.present || (o.present && (o.lane != n.lane || old.Stream != j.Stream || old.Target != j.Target)) {
		if o.present {
			w.count(old.Stream, old.Target, o.lane, -1)
		}
		if n.present {
			w.count(j.Stream, j.Target, n.lane, 1)
		}
	}
	w.putKeyed(old, j)
	w.putDeps(old, j)
}

// mark records that tree n changed if changed, and returns changed.
func (w *writer) mark(n int, changed bool) bool {
	if changed {
		w.dirty[n] = true
	}
	return changed
}

func (w *writer) putBlob(b *Blob) {
	w.t.blobs.ReplaceOrInsert(blobItem{b.ID, b})
	w.dirty[tBlobs] = true
}

func (w *writer) putChunk(c *BlobChunk) {
	w.t.chunks.ReplaceOrInsert(chunkItem{c.BlobID, c.Seq, c})
	w.dirty[tChunks] = true
}

// publish returns a read-only view of the working set, sharing the trees
// this writer has not changed since prev was published with prev.
func (w *writer) publish(prev *tables) *tables {
	v := *prev
	cloneIf(&w.dirty[tByID], &v.byID, w.t.byID)
	cloneIf(&w.dirty[tIdem], &v.idem, w.t.idem)
	cloneIf(&w.dirty[tQueue], &v.queue, w.t.queue)
	cloneIf(&w.dirty[tQueueAge], &v.queueAge, w.t.queueAge)
	cloneIf(&w.dirty[tScheduled], &v.scheduled, w.t.scheduled)
	cloneIf(&w.dirty[tKeyed], &v.keyed, w.t.keyed)
	cloneIf(&w.dirty[tAdmitted], &v.admitted, w.t.admitted)
	cloneIf(&w.dirty[tKeyRunning], &v.keyRunning, w.t.keyRunning)
	cloneIf(&w.dirty[tDependents], &v.dependents, w.t.dependents)
	cloneIf(&w.dirty[tLease], &v.lease, w.t.lease)
	cloneIf(&w.dirty[tFinished], &v.finished, w.t.finished)
	cloneIf(&w.dirty[tBlobs], &v.blobs, w.t.blobs)
	cloneIf(&w.dirty[tChunks], &v.chunks, w.t.chunks)
	cloneIf(&w.dirty[tSessions], &v.sessions, w.t.sessions)
	cloneIf(&w.dirty[tStreams], &v.streams, w.t.streams)
	cloneIf(&w.dirty[tTaskEnded], &v.taskEnded, w.t.taskEnded)
	cloneIf(&w.dirty[tAttempts], &v.attempts, w.t.attempts)
	cloneIf(&w.dirty[tGateways], &v.gateways, w.t.gateways)
	cloneIf(&w.dirty[tWorkers], &v.workers, w.t.workers)
	cloneIf(&w.dirty[tRouted], &v.routed, w.t.routed)
	cloneIf(&w.dirty[tStats], &v.stats, w.t.stats)
	v.registry = w.t.registry // immutable: shared as it is
	v.feed = w.t.feed         // append-only blocks: shared as they are (feed.go)
	v.paused = w.t.paused     // immutable: shared as it is
	v.jobControl = w.t.jobControl
	cloneIf(&w.dirty[tReqs], &v.reqs, w.t.reqs)
	cloneIf(&w.dirty[tHeads], &v.heads, w.t.heads)
	v.capsSeen = w.t.capsSeen // immutable: shared as it is
	v.capabilities = w.t.capabilities
	v.defaults = w.t.defaults // immutable: shared as it is
	v.version8 = w.t.version8
	v.level = w.t.level
	if w.dirty[tWorkerIDs] {
		// The two binding trees change together.
		v.workerIDs, v.workerSeen = w.t.workerIDs.Clone(), w.t.workerSeen.Clone()
		w.dirty[tWorkerIDs] = false
	}
	for i := range v.lanes {
		cloneIf(&w.dirty[tLanes+i], &v.lanes[i], w.t.lanes[i])
	}
	return &v
}

// cloneIf points *dst at a clone of src if src changed since the last
// publish.
func cloneIf[T any](dirty *bool, dst **btree.BTreeG[T], src *btree.BTreeG[T]) {
	if *dirty {
		*dst = src.Clone()
		*dirty = false
	}
}

// publishAll returns a read-only view of the whole working set (after a
// restore, when no earlier view shares its trees).
func (w *writer) publishAll() *tables {
	for i := range w.dirty {
		w.dirty[i] = true
	}
	return w.publish(&tables{})
}

// laneKey names one queue lane: a stream and a target ("" for untargeted
// jobs).
type laneKey struct{ stream, target string }

// anyTarget, as a woken lane's target, wakes every lane of the stream (a
// resumed stream's jobs, whatever their targets, are claimable again). No
// real target is this string: targets are role names and worker ids.
const anyTarget = "\x00any"

// waiters wakes long-polling claimants when a job enters a queue lane they
// watch, or when a restore replaces the state.
type waiters struct {
	mu    sync.Mutex
	lanes map[laneKey]map[*Watch]struct{}
}

// Watch fires when a job may have entered one of the queue lanes it was
// registered for. Wait on it once, then drop it.
type Watch struct {
	w     *waiters
	ch    chan struct{}
	keys  []laneKey
	fired bool // guarded by w.mu
}

func (ws *waiters) watch(streams, targets []string) *Watch {
	wt := &Watch{w: ws, ch: make(chan struct{}), keys: make([]laneKey, 0, len(streams)*(1+len(targets)))}
	for _, s := range streams {
		wt.keys = append(wt.keys, laneKey{s, ""})
		for _, tg := range targets {
			if tg != "" {
				wt.keys = append(wt.keys, laneKey{s, tg})
			}
		}
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.lanes == nil {
		ws.lanes = make(map[laneKey]map[*Watch]struct{})
	}
	for _, k := range wt.keys {
		set := ws.lanes[k]
		if set == nil {
			set = make(map[*Watch]struct{})
			ws.lanes[k] = set
		}
		set[wt] = struct{}{}
	}
	return wt
}

// fire wakes every watch of the given lanes (all lanes when all is set).
func (ws *waiters) fire(keys []laneKey, all bool) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.lanes) == 0 {
		return
	}
	wake := func(set map[*Watch]struct{}) {
		for wt := range set {
			if !wt.fired {
				wt.fired = true
				close(wt.ch)
			}
		}
	}
	if all {
		for k, set := range ws.lanes {
			wake(set)
			delete(ws.lanes, k)
		}
		return
	}
	for _, k := range keys {
		if k.target == anyTarget {
			for lk, set := range ws.lanes {
				if lk.stream == k.stream {
					wake(set)
					delete(ws.lanes, lk)
				}
			}
			continue
		}
		if set, ok := ws.lanes[k]; ok {
			wake(set)
			delete(ws.lanes, k)
		}
	}
}

// release unregisters wt and marks it fired, so waiting on it returns at
// once.
func (ws *waiters) release(wt *Watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.unregister(wt)
	if !wt.fired {
		wt.fired = true
		close(wt.ch)
	}
}

// stop unregisters wt from the lanes it still watches.
func (ws *waiters) stop(wt *Watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.unregister(wt)
}

// unregister removes wt from its lanes; the caller holds ws.mu.
func (ws *waiters) unregister(wt *Watch) {
	for _, k := range wt.keys {
		if set, ok := ws.lanes[k]; ok {
			delete(set, wt)
			if len(set) == 0 {
				delete(ws.lanes, k)
			}
		}
	}
}

// WatchCtx blocks until the watch fires (nil) or ctx ends (its error), and
// unregisters the watch.
func (wt *Watch) WatchCtx(ctx context.Context) error {
	defer wt.w.stop(wt)
	select {
	case <-wt.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *tables) blob(id string) *Blob {
	it, _ := t.blobs.Get(blobItem{id: id})
	return it.b
}

func (t *tables) chunk(blob string, seq int) *BlobChunk {
	it, _ := t.chunks.Get(chunkItem{blob: blob, seq: seq})
	return it.c
}
