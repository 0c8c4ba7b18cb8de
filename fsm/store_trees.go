package fsm

import "github.com/google/btree"

// The declaration of the state's trees. Every index and catalog of tables
// is one line of treeDecls: its tree number (the writer's record that a
// batch changed it), how an empty one is made, and where it lives in
// tables. newTables, publish and a restore's rebuild all walk it, so a new
// tree is a field and a line here; a field left out of the declaration
// fails TestEveryTreeIsDeclared rather than serving stale views.

// Tree numbers, for the writer's record of which trees a batch changed.
// Trees that always change together may share one.
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
	tSchedules // the recurring schedules (schedule.go)
	tWorkerIDs // the worker ids' bindings, by id and by when last used
	tTokens    // the named tokens, by name and by hash (tokens.go)
	tRates     // the rate limits: buckets, rated jobs, admitted, due (ratelimit.go)
	tLanes     // tLanes+lane for each lane
	numTrees   = tLanes + numLanes
)

// cloner is what every tree is: something with an O(1) copy-on-write
// Clone (a btree, or a catalog over one).
type cloner[P any] interface{ Clone() P }

// treeDecl is one tree of tables.
type treeDecl struct {
	n int // its tree number
	// make sets t's tree to a new, empty one.
	make func(t *tables)
	// clone sets dst's tree to a clone of src's: dst then shares src's
	// nodes until src changes one. share sets it to src's tree itself
	// (src is a published view, which no one changes).
	clone, share func(dst, src *tables)
}

// tree declares the tree number n of tables, made by newTree, at the field
// field returns.
func tree[P cloner[P]](n int, newTree func() P, field func(t *tables) *P) treeDecl {
	return treeDecl{
		n:     n,
		make:  func(t *tables) { *field(t) = newTree() },
		clone: func(dst, src *tables) { *field(dst) = (*field(src)).Clone() },
		share: func(dst, src *tables) { *field(dst) = *field(src) },
	}
}

// btreeOf returns a maker of empty B-trees ordered by less.
func btreeOf[T any](less func(a, b T) bool) func() *btree.BTreeG[T] {
	return func() *btree.BTreeG[T] { return btree.NewG(btreeDegree, less) }
}

// treeDecls declares every tree of tables.
var treeDecls = declareTrees()

func declareTrees() []treeDecl {
	type (
		ids   = btree.BTreeG[idItem]
		times = btree.BTreeG[timeItem]
		queue = btree.BTreeG[queueItem]
	)
	d := []treeDecl{
		tree(tByID, btreeOf(lessID), func(t *tables) **ids { return &t.byID }),
		tree(tIdem, btreeOf(lessID), func(t *tables) **ids { return &t.idem }),
		tree(tAttempts, btreeOf(lessID), func(t *tables) **ids { return &t.attempts }),
		tree(tRouted, btreeOf(lessID), func(t *tables) **ids { return &t.routed }),
		tree(tQueue, btreeOf(lessQueue), func(t *tables) **queue { return &t.queue }),
		tree(tQueueAge, btreeOf(lessAge), func(t *tables) **btree.BTreeG[ageItem] { return &t.queueAge }),
		tree(tHeads, btreeOf(lessHead), func(t *tables) **queue { return &t.heads }),
		tree(tScheduled, btreeOf(lessTime), func(t *tables) **times { return &t.scheduled }),
		tree(tLease, btreeOf(lessTime), func(t *tables) **times { return &t.lease }),
		tree(tFinished, btreeOf(lessTime), func(t *tables) **times { return &t.finished }),
		tree(tTaskEnded, btreeOf(lessTime), func(t *tables) **times { return &t.taskEnded }),
		tree(tKeyed, newKeyedTree, func(t *tables) **btree.BTreeG[keyedItem] { return &t.keyed }),
		tree(tAdmitted, newAdmittedTree, func(t *tables) **btree.BTreeG[keyedItem] { return &t.admitted }),
		tree(tKeyRunning, newKeyCountTree, func(t *tables) **btree.BTreeG[keyCount] { return &t.keyRunning }),
		tree(tDependents, newDepTree, func(t *tables) **btree.BTreeG[depItem] { return &t.dependents }),
		tree(tReqs, btreeOf(lessReqCount), func(t *tables) **btree.BTreeG[reqCount] { return &t.reqs }),
		tree(tStats, btreeOf(lessStat), func(t *tables) **btree.BTreeG[statItem] { return &t.stats }),
		tree(tBlobs, btreeOf(lessBlob), func(t *tables) **btree.BTreeG[blobItem] { return &t.blobs }),
		tree(tChunks, btreeOf(lessChunk), func(t *tables) **btree.BTreeG[chunkItem] { return &t.chunks }),
		tree(tSessions, newCatalog[Session], func(t *tables) **catalog[Session] { return &t.sessions }),
		tree(tStreams, newCatalog[Stream], func(t *tables) **catalog[Stream] { return &t.streams }),
		tree(tGateways, newCatalog[Gateway], func(t *tables) **catalog[Gateway] { return &t.gateways }),
		tree(tWorkers, newCatalog[Worker], func(t *tables) **catalog[Worker] { return &t.workers }),
		tree(tSchedules, newCatalog[Schedule], func(t *tables) **catalog[Schedule] { return &t.schedules }),
		tree(tWorkerIDs, newBindingTree, func(t *tables) **btree.BTreeG[bindingItem] { return &t.workerIDs }),
		tree(tTokens, newCatalog[Token], func(t *tables) **catalog[Token] { return &t.tokens }),
		tree(tTokens, newCatalog[Token], func(t *tables) **catalog[Token] { return &t.tokenHashes }),
		tree(tWorkerIDs, newSeenTree, func(t *tables) **btree.BTreeG[seenItem] { return &t.workerSeen }),
		tree(tRates, btreeOf(lessRate), func(t *tables) **btree.BTreeG[rateRef] { return &t.rates }),
		tree(tRates, btreeOf(lessRateDue), func(t *tables) **btree.BTreeG[rateDueItem] { return &t.rateDue }),
		tree(tRates, newRatedTree, func(t *tables) **btree.BTreeG[keyedItem] { return &t.rated }),
		tree(tRates, newRateAdmittedTree, func(t *tables) **btree.BTreeG[keyedItem] { return &t.rateAdmitted }),
		tree(tRates, btreeOf(lessRateGroup), func(t *tables) **btree.BTreeG[rateGroupItem] { return &t.rateGroups }),
	}
	for lane := range numLanes {
		d = append(d, tree(tLanes+lane, newLaneTree, func(t *tables) **btree.BTreeG[seqItem] { return &t.lanes[lane] }))
	}
	return d
}

func newLaneTree() *btree.BTreeG[seqItem] { return btree.NewG(btreeDegree, lessSeq) }

func newTables() *tables {
	t := &tables{}
	for _, d := range treeDecls {
		d.make(t)
	}
	return t
}

// publish returns a read-only view of the working set, sharing the trees
// this writer has not changed since prev was published with prev. What is
// not a tree (the registry, the feed, the maps replaced whole, the flags
// and the level) is immutable or a value, so the view takes it as it is;
// every tree is declared, so none of the writer's own trees leaks into a
// view.
func (w *writer) publish(prev *tables) *tables {
	v := *w.t
	for _, d := range treeDecls {
		if w.dirty[d.n] {
			d.clone(&v, w.t)
		} else {
			d.share(&v, prev)
		}
	}
	v.index = prev.index
	w.dirty = [numTrees]bool{}
	return &v
}

// publishAll returns a read-only view of the whole working set (after a
// restore, when no earlier view shares its trees).
func (w *writer) publishAll() *tables {
	for i := range w.dirty {
		w.dirty[i] = true
	}
	return w.publish(&tables{})
}
