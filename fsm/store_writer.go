package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// The writer: the apply goroutine's working set of trees, how a job is
// stored in every index, and how the trees are published to readers.

// writer is the apply goroutine's working set: trees only it touches, the
// record of which it changed since the last publish, and the queue lanes
// that gained a job (whose waiters to wake).
type writer struct {
	t     *tables
	index uint64 // the last entry applied to t
	dirty [numTrees]bool
	woken []laneKey
	fed   bool // the feed gained an event since its readers were woken
	// tokensChanged: the named tokens changed since their watchers were
	// woken (tokens.go).
	tokensChanged bool
	// feedHead is the feed's last seq, while a snapshot is restored.
	feedHead uint64
	// ratesRestored holds the rate buckets a restore has read.
	ratesRestored map[string]bool
}

// update moves one index entry from old to new: a replace when the key is
// the same, else a delete and an insert. It reports whether the tree changed.
func update[T any](tr *btree.BTreeG[T], less func(a, b T) bool, old T, hadOld bool, nw T, hasNew bool) bool {
	switch {
	case hadOld && hasNew && !less(old, nw) && !less(nw, old):
		insertRun(tr, less, nw)
	case hadOld && hasNew:
		tr.Delete(old)
		insertRun(tr, less, nw)
	case hadOld:
		tr.Delete(old)
	case hasNew:
		insertRun(tr, less, nw)
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
	queue                                 queueItem
	age                                   ageItem
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
	e := jobEntries{present: true, id: idOf(j.ID, j), lane: laneOf(j.State), seq: seqItem{j.CreateIndex, j}}
	e.idem, e.hasIdem = idemEntry(j)
	e.attempt, e.hasAttempt = attemptEntry(j)
	e.routed, e.hasRouted = routedEntry(j)
	// The queue item's lane is left out: the writer interns it
	// (withLanes), a restore per lane.
	e.queue, e.hasQueue = queueItem{rank: queueRank(j), seq: j.CreateIndex, j: j}, inQueueLane(j)
	e.age, e.hasAge = ageItem{stream: j.Stream, rank: int64(j.QueueIndex), seq: j.CreateIndex, j: j}, claimable(j)
	e.lease, e.hasLease = leaseEntry(j)
	e.sched, e.hasSched = scheduledEntry(j)
	e.done, e.hasDone = finishedEntry(j)
	e.ended, e.hasEnded = taskEndedEntry(j)
	return e
}

// withLanes gives the queue items of o and n their lanes, n the lane of o
// when the job stays in it.
func withLanes(o, n *jobEntries) {
	if o.hasQueue {
		o.queue.lane = queueItemOf(o.queue.j).lane
	}
	if n.hasQueue {
		if oj, nj := o.queue.j, n.queue.j; o.hasQueue && oj.Stream == nj.Stream && oj.Target == nj.Target && oj.Extra().Requires == nj.Extra().Requires {
			n.queue.lane = o.queue.lane
		} else {
			n.queue.lane = queueItemOf(nj).lane
		}
	}
}

// putJob replaces old with j in every index (old nil: a new job; j nil: a
// deletion).
func (w *writer) putJob(old, j *Job) {
	if j != nil {
		j.compactExtra()
	}
	o, n := entriesOf(old), entriesOf(j)
	withLanes(&o, &n)
	// The id index says which version is stored: old must be it, or the
	// other indexes would keep entries of a version they no longer hold.
	var prev idItem
	if n.present {
		prev, _ = insertRun(w.t.byID, lessID, n.id)
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
		w.woken = append(w.woken, laneKey{j.Stream, j.Target.String()})
	}
	w.mark(tQueueAge, update(w.t.queueAge, lessAge, o.age, o.hasAge, n.age, n.hasAge))
	w.mark(tLease, update(w.t.lease, lessTime, o.lease, o.hasLease, n.lease, n.hasLease))
	w.mark(tScheduled, update(w.t.scheduled, lessTime, o.sched, o.hasSched, n.sched, n.hasSched))
	w.mark(tFinished, update(w.t.finished, lessTime, o.done, o.hasDone, n.done, n.hasDone))
	w.mark(tTaskEnded, update(w.t.taskEnded, lessTime, o.ended, o.hasEnded, n.ended, n.hasEnded))
	for lane := range stateLane(numLanes) {
		had, has := o.present && o.lane == lane, n.present && n.lane == lane
		w.mark(tLanes+int(lane), update(w.t.lanes[lane], lessSeq, o.seq, had, n.seq, has))
	}
	if o.present != n.present || (o.present && (o.lane != n.lane || old.Stream != j.Stream || old.Target != j.Target || old.IsTask() != j.IsTask())) {
		if o.present {
			w.count(old, o.lane, -1)
		}
		if n.present {
			w.count(j, n.lane, 1)
		}
	}
	w.putRated(old, j)
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
