package fsm

import (
	"github.com/google/btree"
)

// Per-key concurrency. A job may carry a ConcurrencyKey and a
// ConcurrencyLimit: at most that many jobs of one key run at once,
// cluster-wide. The rest wait without blocking other keys: a queued job
// with a key is not in its queue lane by itself; for each group of such
// jobs (one key, one lane) only the group's first job is admitted into the
// lane, and only while fewer than its limit of the key's jobs run. A claim
// that takes it admits the next one if the key still has room; a job of
// the key that stops running (complete, fail, release, expiry, cancel)
// re-admits the key's groups. Every step is a few index operations: the
// claim path never looks at a job it could not take.

type (
	// keyedItem keys a claimable job with a concurrency key by key, then
	// as its lane orders it: q is the item that admits it into the lane.
	keyedItem struct {
		key string
		q   queueItem
	}
	// keyCount is how many jobs of a key run.
	keyCount struct {
		key string
		n   int
	}
)

func lessKeyed(a, b keyedItem) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	// A group (key and lane) in queue order; its jobs' requirements, part
	// of the lane in the queue index, do not split the group.
	x, y := a.q, b.q
	if c := cmpStreamTarget(x, y); c != 0 {
		return c < 0
	}
	if x.rank != y.rank {
		return x.rank < y.rank
	}
	return x.seq < y.seq
}

func lessKeyCount(a, b keyCount) bool { return a.key < b.key }

// lessGroup orders the admitted jobs: one per group (key, then lane).
func lessGroup(a, b keyedItem) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return cmpStreamTarget(a.q, b.q) < 0
}

// groupStart is the first place of a group in the keyed index.
func groupStart(key, stream, target string) keyedItem {
	return keyedItem{key, laneStart(stream, target, "")}
}

// inGroup reports whether it is of key's group (stream, target).
func (it keyedItem) inGroup(key, stream, target string) bool {
	k := it.q.key()
	return it.key == key && k.stream == stream && k.target == target
}

func newKeyedTree() *btree.BTreeG[keyedItem]    { return btree.NewG(btreeDegree, lessKeyed) }
func newAdmittedTree() *btree.BTreeG[keyedItem] { return btree.NewG(btreeDegree, lessGroup) }
func newKeyCountTree() *btree.BTreeG[keyCount]  { return btree.NewG(btreeDegree, lessKeyCount) }

// claimable reports whether j waits in a queue for a claim (queued, its
// time come).
func claimable(j *Job) bool {
	return j.State == StateQueued && j.NotBefore == 0 && j.Extra().DepsPending == 0
}

// keyedEntry keys a claimable job that has a concurrency key.
func keyedEntry(j *Job) (keyedItem, bool) {
	if j.Extra().ConcurrencyKey == "" || !claimable(j) {
		return keyedItem{}, false
	}
	return keyedItem{j.Extra().ConcurrencyKey, queueItemOf(j)}, true
}

// keyLimit is the most jobs of j's key that may run while j is claimed.
func keyLimit(j *Job) int { return max(j.Extra().ConcurrencyLimit, 1) }

// runningOfKey is how many jobs of key run.
func (t *tables) runningOfKey(key string) int {
	it, _ := t.keyRunning.Get(keyCount{key: key})
	return it.n
}

func (w *writer) addRunning(key string, d int) {
	it, _ := w.t.keyRunning.Get(keyCount{key: key})
	it.key = key
	it.n += d
	if it.n <= 0 {
		w.t.keyRunning.Delete(it)
	} else {
		w.t.keyRunning.ReplaceOrInsert(it)
	}
	w.dirty[tKeyRunning] = true
}

// putKeyed keeps the concurrency indexes up to date as old is replaced by
// j (either nil): the keyed queue, the running counts, and the jobs
// admitted into their lanes.
func (w *writer) putKeyed(old, j *Job) {
	var ok, nk string
	if old != nil {
		ok = old.Extra().ConcurrencyKey
	}
	if j != nil {
		nk = j.Extra().ConcurrencyKey
	}
	if ok == "" && nk == "" {
		return
	}
	var o, n keyedItem
	var hadO, hasN bool
	if old != nil {
		o, hadO = keyedEntry(old)
	}
	if j != nil {
		n, hasN = keyedEntry(j)
	}
	w.mark(tKeyed, update(w.t.keyed, lessKeyed, o, hadO, n, hasN))
	wasRunning := old != nil && ok != "" && old.State == StateRunning
	isRunning := j != nil && nk != "" && j.State == StateRunning
	if wasRunning && (!isRunning || ok != nk) {
		w.addRunning(ok, -1)
	}
	if isRunning && (!wasRunning || ok != nk) {
		w.addRunning(nk, 1)
	}
	if ok != "" {
		w.admitKey(ok)
	}
	if nk != "" && nk != ok {
		w.admitKey(nk)
	}
}

// admitKey brings every lane group of key to its rule: its first job is in
// the queue index if and only if fewer than that job's limit of the key's
// jobs run.
func (w *writer) admitKey(key string) {
	// The groups: those with claimable jobs and those with an admitted one.
	type group struct{ stream, target string }
	var groups []group
	seen := map[group]bool{}
	add := func(g group) {
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	from := groupStart(key, "", "")
	for {
		var head keyedItem
		found := false
		w.t.keyed.AscendGreaterOrEqual(from, func(it keyedItem) bool {
			head, found = it, it.key == key
			return false
		})
		if !found {
			break
		}
		hk := head.q.key()
		add(group{hk.stream, hk.target})
		from = groupStart(key, hk.stream, hk.target+"\x00")
	}
	w.t.admitted.AscendGreaterOrEqual(groupStart(key, "", ""), func(it keyedItem) bool {
		if it.key != key {
			return false
		}
		k := it.q.key()
		add(group{k.stream, k.target})
		return true
	})
	running := w.t.runningOfKey(key)
	for _, g := range groups {
		w.admitGroup(key, g.stream, g.target, running)
	}
}

// admitGroup puts the first job of one group into its lane, or takes the
// admitted one out, as the key's running count allows.
func (w *writer) admitGroup(key, stream, target string, running int) {
	var head keyedItem
	hasHead := false
	w.t.keyed.AscendGreaterOrEqual(groupStart(key, stream, target), func(it keyedItem) bool {
		head, hasHead = it, it.inGroup(key, stream, target)
		return false
	})
	want := hasHead && running < keyLimit(head.q.j)
	cur, hasCur := w.t.admitted.Get(groupStart(key, stream, target))
	if hasCur && want && cur == head {
		return
	}
	if hasCur {
		w.dequeue(cur.q)
		w.t.admitted.Delete(cur)
		w.dirty[tQueue], w.dirty[tAdmitted] = true, true
	}
	if want {
		w.enqueue(head.q)
		w.t.admitted.ReplaceOrInsert(head)
		w.dirty[tQueue], w.dirty[tAdmitted] = true, true
		if !hasCur || cur.q.j.ID != head.q.j.ID || cur.q.rank != head.q.rank {
			w.woken = append(w.woken, laneKey{stream, target})
		}
	}
}

// RunningOfKey is how many jobs of a concurrency key run.
func (r *Reader) RunningOfKey(key string) int {
	var n int
	r.point(func(t *tables) { n = t.runningOfKey(key) })
	return n
}
