package fsm

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/btree"
)

// Bulk restore of the jobs. A snapshot holds the jobs in id order (the
// order of the byID tree it walks), so restore collects them and builds
// every job index at once rather than storing each job in turn: storing a
// random UUID's job lands at a random place of every index but byID (its
// place in the queue, the lanes and the time indexes has nothing to do
// with its id), a cache miss on every level of each. Instead each job's
// index entries are taken as it is read (the decoding goroutine is then
// still at work on the records after it, and the job is still in cache),
// each index's entries are sorted once the last job is in, and every tree
// is laid out from its sorted items (buildTree), the trees on as many cores
// as there are.
//
// The trees built hold what storing the jobs one at a time (putJob in id
// order) leaves in them, item for item. Where that cannot be shown from
// the snapshot alone the jobs are stored one at a time, as before: when the
// ids are not strictly ascending (a job twice, or a stream no build
// writes), or when two items of one index are equal (ReplaceOrInsert would
// keep the later one only). The concurrency keys' indexes follow rules of
// their own (concurrency.go): the jobs with a key are stored in them as
// putJob stores them, after the rest.

// Test hooks: oneByOne makes restores store every job one at a time, and
// bulkBuilds counts the restores that built the job indexes in bulk.
var (
	oneByOne   atomic.Bool
	bulkBuilds atomic.Int64
)

// bulkJobs collects the job records of a snapshot in the order read, with
// their index entries.
type bulkJobs struct {
	jobs     chunked[*Job]
	unsorted bool // an id not greater than the one before it
	last     string
	lane     chunked[stateLane]
	counts   [numLanes]int
	// The entries of the indexes built from sort keys: each job's create
	// index (the lanes' order), and the items of the queue indexes and
	// the time indexes.
	created, queue, age, lease, sched, done, ended keyed
	idem, attempts, routed                         []idItem
	deps                                           []depItem
	withKey                                        []*Job // jobs with a concurrency key
	withRate                                       []*Job // jobs with a rate limit
	stats                                          map[statItem]int
	// groups numbers the lanes (stream, target and requirements) of the
	// queue indexes' items in the order first seen; lanes are the lanes
	// by number, in the queue's order once sorted.
	groups    map[[3]string]uint32
	lanes     [][3]string
	handles   []queueLane // the lanes' handles, in the order of lanes
	lastGroup [3]string
	lastID    uint32
}

// chunked is a list grown in fixed chunks: nothing is copied as it grows
// (appending to one slice copies what it holds at every doubling, the
// pointers in it through the collector's write barrier).
type chunked[T any] struct {
	chunks [][]T
	n      int
}

const chunkLen = 4096

func (c *chunked[T]) add(v T) {
	if c.n%chunkLen == 0 {
		c.chunks = append(c.chunks, make([]T, 0, chunkLen))
	}
	last := &c.chunks[len(c.chunks)-1]
	*last = append(*last, v)
	c.n++
}

func (c *chunked[T]) at(i int) T { return c.chunks[i/chunkLen][i%chunkLen] }

// flat returns the list as one slice.
func (c *chunked[T]) flat() []T {
	out := make([]T, 0, c.n)
	for _, ch := range c.chunks {
		out = append(out, ch...)
	}
	return out
}

// sortKey is one entry of an index built from sort keys: the job i (its
// place in bulkJobs.jobs), ordered as the index orders its item by a, then
// b, then c, which also give the item.
type sortKey struct {
	a    uint32
	i    int32
	b, c uint64
}

func cmpKey(x, y sortKey) int {
	if x.a != y.a {
		return cmp.Compare(x.a, y.a)
	}
	if x.b != y.b {
		return cmp.Compare(x.b, y.b)
	}
	return cmp.Compare(x.c, y.c)
}

// signed maps an int64 to a uint64 of the same order, and unsigned back.
func signed(v int64) uint64   { return uint64(v) ^ 1<<63 }
func unsigned(v uint64) int64 { return int64(v ^ 1<<63) }

// keyed are the sort keys of one index: added as the jobs are read, then
// sorted.
type keyed struct {
	added chunked[sortKey]
	keys  []sortKey
}

// sort sorts the keys and reports whether no two are equal.
func (k *keyed) sort() bool {
	k.keys = radixSort(&k.added) // snapshot_sort.go
	k.added = chunked[sortKey]{}
	for i := 1; i < len(k.keys); i++ {
		if cmpKey(k.keys[i-1], k.keys[i]) == 0 {
			return false
		}
	}
	return true
}

// build fills tr with the item of each sorted key.
func build[T any](tr *btree.BTreeG[T], k *keyed, item func(k sortKey) T) {
	buildTree(tr, len(k.keys), func(i int) T { return item(k.keys[i]) })
}

func timeKey(it timeItem, i int) sortKey { return sortKey{i: int32(i), b: signed(it.at), c: it.seq} }

// add collects one job record.
func (b *bulkJobs) add(j *Job) error {
	if j.ID == "" {
		return fmt.Errorf("restore: job record without an id")
	}
	n := b.jobs.n
	if n > 0 && b.last >= j.ID {
		b.unsorted = true
	}
	b.last = j.ID
	b.jobs.add(j)
	if b.unsorted || n >= math.MaxInt32 {
		b.unsorted = true
		return nil // stored one at a time: nothing else to collect
	}
	e := entriesOf(j)
	b.lane.add(e.lane)
	b.created.added.add(sortKey{i: int32(n), b: j.CreateIndex})
	b.counts[e.lane]++
	if e.hasQueue {
		b.queue.added.add(sortKey{a: b.group(queueKey{j.Stream, j.Target.String(), j.Extra().Requires}), i: int32(n), b: signed(e.queue.rank), c: e.queue.seq})
	}
	if e.hasAge {
		b.age.added.add(sortKey{a: b.group(queueKey{stream: e.age.stream}), i: int32(n), b: signed(e.age.rank), c: e.age.seq})
	}
	if e.hasLease {
		b.lease.added.add(timeKey(e.lease, n))
	}
	if e.hasSched {
		b.sched.added.add(timeKey(e.sched, n))
	}
	if e.hasDone {
		b.done.added.add(timeKey(e.done, n))
	}
	if e.hasEnded {
		b.ended.added.add(timeKey(e.ended, n))
	}
	if e.hasIdem {
		b.idem = append(b.idem, e.idem)
	}
	if e.hasAttempt {
		b.attempts = append(b.attempts, e.attempt)
	}
	if e.hasRouted {
		b.routed = append(b.routed, e.routed)
	}
	if waitingOnDeps(j) {
		for _, d := range j.Extra().DependsOn {
			b.deps = append(b.deps, depItem{d, j.ID, j})
		}
	}
	if j.Extra().ConcurrencyKey != "" {
		b.withKey = append(b.withKey, j)
	}
	if j.Extra().Rate != nil {
		b.withRate = append(b.withRate, j)
	}
	if b.stats == nil {
		b.stats = map[statItem]int{}
	}
	b.stats[statItem{stream: j.Stream, target: j.Target.String(), lane: e.lane, task: j.IsTask()}]++
	return nil
}

// group numbers the lane of a queue item (stream, target, requirements).
func (b *bulkJobs) group(k queueKey) uint32 {
	g := [3]string{k.stream, k.target, k.req}
	if b.groups != nil && g == b.lastGroup {
		return b.lastID
	}
	if b.groups == nil {
		b.groups = map[[3]string]uint32{}
	}
	id, ok := b.groups[g]
	if !ok {
		id = uint32(len(b.groups))
		b.groups[g] = id
	}
	b.lastGroup, b.lastID = g, id
	return id
}

// sortGroups numbers the queue indexes' lanes in the queue's order.
func (b *bulkJobs) sortGroups() {
	b.lanes = make([][3]string, 0, len(b.groups))
	for g := range b.groups {
		b.lanes = append(b.lanes, g)
	}
	slices.SortFunc(b.lanes, func(x, y [3]string) int {
		return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]), cmp.Compare(x[2], y[2]))
	})
	rank := make([]uint32, len(b.lanes))
	b.handles = make([]queueLane, len(b.lanes))
	for r, g := range b.lanes {
		rank[b.groups[g]] = uint32(r)
		b.handles[r] = laneOfQueue(g[0], g[1], g[2])
	}
	for _, keys := range []*chunked[sortKey]{&b.queue.added, &b.age.added} {
		for _, ch := range keys.chunks {
			for i := range ch {
				ch[i].a = rank[ch[i].a]
			}
		}
	}
}

// queueItem is the item of a sorted key of a queue index.
func (b *bulkJobs) queueItem(k sortKey) queueItem {
	return queueItem{b.handles[k.a], unsigned(k.b), k.c, b.jobs.at(int(k.i))}
}

// ageItem is the item of a sorted key of the queue-age index.
func (b *bulkJobs) ageItem(k sortKey) ageItem {
	return ageItem{b.lanes[k.a][0], unsigned(k.b), k.c, b.jobs.at(int(k.i))}
}

// timeItem is the item of a sorted key of a time index.
func (b *bulkJobs) timeItem(k sortKey) timeItem {
	return timeItem{unsigned(k.b), k.c, b.jobs.at(int(k.i))}
}

// flush stores the jobs collected in w: all at once when the trees are
// empty and the jobs' entries can be ordered, else with store, one at a
// time in the order read.
func (b *bulkJobs) flush(w *writer, store func(w *writer, j *Job) error) error {
	defer func() { *b = bulkJobs{} }()
	if b.jobs.n == 0 {
		return nil
	}
	if !b.unsorted && !oneByOne.Load() && w.t.byID.Len() == 0 && b.sort() {
		b.build(w)
		bulkBuilds.Add(1)
		return nil
	}
	for i := range b.jobs.n {
		if err := store(w, b.jobs.at(i)); err != nil {
			return err
		}
	}
	return nil
}

// sort sorts every index's items, and reports whether no two items of
// one index are equal.
func (b *bulkJobs) sort() bool {
	var tied atomic.Bool
	keys := func(sort func() bool) func() {
		return func() {
			if !sort() {
				tied.Store(true)
			}
		}
	}
	b.sortGroups()
	inParallel([]func(){
		keys(b.created.sort), keys(b.queue.sort), keys(b.age.sort),
		keys(b.lease.sort), keys(b.sched.sort), keys(b.done.sort), keys(b.ended.sort),
		sorter(&tied, b.idem, lessID), sorter(&tied, b.attempts, lessID), sorter(&tied, b.routed, lessID),
		sorter(&tied, b.deps, lessDep),
	})
	return !tied.Load()
}

// sorter returns a task sorting items by less that sets tied if two are
// equal.
func sorter[T any](tied *atomic.Bool, items []T, less func(a, b T) bool) func() {
	return func() {
		if !sortUnique(items, less) {
			tied.Store(true)
		}
	}
}

// sortUnique sorts items by less and reports whether no two are equal.
func sortUnique[T any](items []T, less func(a, b T) bool) bool {
	slices.SortFunc(items, func(a, b T) int {
		if less(a, b) {
			return -1
		}
		if less(b, a) {
			return 1
		}
		return 0
	})
	for i := 1; i < len(items); i++ {
		if !less(items[i-1], items[i]) {
			return false
		}
	}
	return true
}

// inParallel runs every task, on as many goroutines at once as the
// process has cores. Each task must touch only what no other does.
func inParallel(tasks []func()) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tasks)) {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(len(tasks)); i = next.Add(1) - 1 {
				tasks[i]()
			}
		})
	}
	wg.Wait()
}

// build fills w's empty job indexes from the sorted items, each tree on
// its own, as many at once as there are cores.
func (b *bulkJobs) build(w *writer) {
	t := w.t
	var lanes [numLanes][]seqItem
	for l, n := range b.counts {
		lanes[l] = make([]seqItem, 0, n)
	}
	for _, k := range b.created.keys {
		l := b.lane.at(int(k.i))
		lanes[l] = append(lanes[l], seqItem{k.b, b.jobs.at(int(k.i))})
	}
	stats := make([]statItem, 0, len(b.stats))
	for k, n := range b.stats {
		k.n = n
		stats = append(stats, k)
	}
	sortUnique(stats, lessStat)
	tasks := []func(){
		func() {
			buildTree(t.byID, b.jobs.n, func(i int) idItem {
				j := b.jobs.at(i)
				return idOf(j.ID, j)
			})
		},
		func() { build(t.queue, &b.queue, b.queueItem) }, func() { build(t.queueAge, &b.age, b.ageItem) },
		func() { build(t.lease, &b.lease, b.timeItem) }, func() { build(t.scheduled, &b.sched, b.timeItem) },
		func() { build(t.finished, &b.done, b.timeItem) }, func() { build(t.taskEnded, &b.ended, b.timeItem) },
		func() { buildSorted(t.idem, b.idem) }, func() { buildSorted(t.attempts, b.attempts) },
		func() { buildSorted(t.routed, b.routed) }, func() { buildSorted(t.dependents, b.deps) },
		func() { buildSorted(t.stats, stats) }, func() { b.buildReqs(t) },
	}
	for l := range t.lanes {
		tasks = append(tasks, func() { buildSorted(t.lanes[l], lanes[l]) })
	}
	inParallel(tasks)
	// The concurrency keys admit a group's first job into its lane by
	// rules of their own: those jobs are kept as putJob keeps them.
	// So do the rate limits (ratelimit.go).
	for _, j := range b.withRate {
		w.putRated(nil, j)
	}
	for _, j := range b.withKey {
		w.putKeyed(nil, j)
	}
}

// buildReqs builds the requirement sets' counts and heads from the queue's
// items: how many jobs each set of each lane has, and its first job. The
// queue holds the jobs of a lane's set together, in order, and its sets in
// the order of the reqs index.
func (b *bulkJobs) buildReqs(t *tables) {
	var reqs []reqCount
	var heads []queueItem
	for _, k := range b.queue.keys {
		if b.lanes[k.a][2] == "" {
			continue // no requirements
		}
		it := b.queueItem(k)
		if n := len(reqs); n > 0 && reqs[n-1].head.lane == it.lane {
			reqs[n-1].n++
			continue
		}
		ik := it.key()
		reqs = append(reqs, reqCount{stream: ik.stream, target: ik.target, req: ik.req, n: 1, head: it})
		heads = append(heads, it)
	}
	buildSorted(t.reqs, reqs)
	sortUnique(heads, lessHead)
	buildSorted(t.heads, heads)
}
