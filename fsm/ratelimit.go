package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// Rate limits. A job may carry a RateLimit: its key may be claimed at most
// Limit times per Period, cluster-wide, with up to Burst claims at once.
// Each key has one bucket in the state (a GCRA, the generic cell rate
// algorithm: a token bucket kept as one time). The bucket is advanced only
// by the leader-stamped Now of the commands that apply to it, so every
// replica computes the same answer, a new leader goes on where the old one
// stopped, and a snapshot carries it (record kind snapRate).
//
// Claiming is kept as cheap as for the concurrency keys (concurrency.go):
// a claimable job with a rate is not in its queue lane by itself. Per group
// (key, stream, target) only the group's first job is admitted into the
// lane, and only while the key's bucket is open (has a token). A claim that
// takes the last token closes the bucket: every group of the key leaves
// its lane, and the time the next token comes is put in a due index. The
// first claim or promote entry stamped at or after that time opens the
// bucket again and admits the groups, so a claim never looks at a job its
// rate holds back, and the leader's promoter proposes a promote entry at
// that time, which wakes the claims that wait (queue.Promoter).
//
// A job with a concurrency key as well enters the rate's groups only once
// its concurrency key admits it: a claim takes it when both allow.
//
// A key's rate is the one the latest create that names the key carried
// (its own, or its stream's default): jobs already queued wait under it
// from then on. The bucket lives while a job with the key is queued or
// running, and until it is full again after that.

type (
	// rateItem is one key's bucket in the rates index, with what the
	// writer keeps alongside: how many queued or running jobs have the
	// key, and the due time it is filed under (0: none).
	rateItem struct {
		RateBucket
		jobs int
		due  int64
	}
	// rateDueItem files a bucket under the time an entry must look at it:
	// when a blocked one allows a claim again, or an unused one is full.
	rateDueItem struct {
		at  int64
		key string
	}
	// rateRef is a bucket in the rates index: its key, and the bucket,
	// never changed once stored (a change stores a new one), so the
	// index's nodes stay small to copy.
	rateRef struct {
		key string
		it  *rateItem
	}
)

func lessRate(a, b rateRef) bool { return a.key < b.key }
func lessRateDue(a, b rateDueItem) bool {
	return a.at < b.at || (a.at == b.at && a.key < b.key)
}

// rateOf is j's rate limit, nil for none.
func rateOf(j *Job) *RateLimit {
	if j == nil {
		return nil
	}
	return j.Extra().Rate
}

// ratedEntry keys a claimable job with a rate but no concurrency key (a
// job with one enters through its key's admission, admitGroup).
func ratedEntry(j *Job) (keyedItem, bool) {
	r := j.Extra().Rate
	if r == nil || j.Extra().ConcurrencyKey != "" || !claimable(j) {
		return keyedItem{}, false
	}
	return keyedItem{r.Key, queueItemOf(j)}, true
}

func (t *tables) rate(key string) (rateItem, bool) {
	ref, ok := t.rates.Get(rateRef{key: key})
	if !ok {
		return rateItem{}, false
	}
	return *ref.it, true
}

// eachRate calls each for every bucket, by key, while it answers true.
func (t *tables) eachRate(each func(it *rateItem) bool) {
	t.rates.Ascend(func(ref rateRef) bool { return each(ref.it) })
}

func (w *writer) setRate(it rateItem) {
	p := new(rateItem)
	*p = it
	w.t.rates.ReplaceOrInsert(rateRef{it.Key, p})
	w.dirty[tRates] = true
}

// fileDue files the bucket under at (0: under nothing).
func (w *writer) fileDue(it *rateItem, at int64) {
	if it.due == at {
		return
	}
	if it.due != 0 {
		w.t.rateDue.Delete(rateDueItem{it.due, it.Key})
	}
	if at != 0 {
		w.t.rateDue.ReplaceOrInsert(rateDueItem{at, it.Key})
	}
	it.due = at
	w.dirty[tRates] = true
}

// bucketFor returns the bucket of r's key, a full one with rate r when the
// state has none.
func (w *writer) bucketFor(r *RateLimit) rateItem {
	it, ok := w.t.rate(r.Key)
	if !ok {
		it = rateItem{RateBucket: RateBucket{RateLimit: *r}}
	}
	return it
}

// putRated keeps the rate indexes up to date as old is replaced by j
// (either nil): the count of a key's live jobs, and the rated queue of the
// jobs without a concurrency key.
func (w *writer) putRated(old, j *Job) {
	or, nr := rateOf(old), rateOf(j)
	if or == nil && nr == nil {
		return
	}
	wasLive := or != nil && !old.State.Terminal()
	isLive := nr != nil && !j.State.Terminal()
	if wasLive && (!isLive || or.Key != nr.Key) {
		w.countRated(or, -1)
	}
	if isLive && (!wasLive || or.Key != nr.Key) {
		w.countRated(nr, 1)
	}
	var o, n keyedItem
	var hadO, hasN bool
	if old != nil {
		o, hadO = ratedEntry(old)
	}
	if j != nil {
		n, hasN = ratedEntry(j)
	}
	if hadO && hasN && !lessKeyed(o, n) && !lessKeyed(n, o) && o.key == n.key {
		w.t.rated.ReplaceOrInsert(n)
		w.dirty[tRates] = true
		nk := n.q.key()
		w.admitRateGroup(n.key, nk.stream, nk.target, w.t.rateOpen(n.key))
		return
	}
	if hadO {
		w.rateDequeue(o.key, o.q)
	}
	if hasN {
		w.rateEnqueue(n.key, n.q)
	}
}

// countRated counts a live job of r's key in (d 1) or out (d -1). A
// bucket no live job uses is filed under the time it is full, when an
// entry drops it.
func (w *writer) countRated(r *RateLimit, d int) {
	it := w.bucketFor(r)
	it.jobs += d
	if it.jobs <= 0 {
		it.jobs = 0
		if !it.Blocked {
			w.fileDue(&it, max(it.TAT, 1))
		}
	} else if !it.Blocked {
		w.fileDue(&it, 0)
	}
	w.setRate(it)
}

// enqueue puts a job's item into its queue lane, or into its rate's
// groups when it has a rate; dequeue takes it out.
func (w *writer) enqueue(it queueItem) {
	if r := it.j.Extra().Rate; r != nil {
		w.rateEnqueue(r.Key, it)
		return
	}
	w.queueInsert(it)
}

func (w *writer) dequeue(it queueItem) {
	if r := it.j.Extra().Rate; r != nil {
		w.rateDequeue(r.Key, it)
		return
	}
	w.queueDelete(it)
}

func (w *writer) rateEnqueue(key string, q queueItem) {
	k := q.key()
	if _, replaced := w.t.rated.ReplaceOrInsert(keyedItem{key, q}); !replaced {
		w.countRateGroup(key, k.stream, k.target, 1)
	}
	w.dirty[tRates] = true
	w.admitRateGroup(key, k.stream, k.target, w.t.rateOpen(key))
}

func (w *writer) rateDequeue(key string, q queueItem) {
	k := q.key()
	if _, ok := w.t.rated.Delete(keyedItem{key, q}); ok {
		w.countRateGroup(key, k.stream, k.target, -1)
		w.dirty[tRates] = true
	}
	w.admitRateGroup(key, k.stream, k.target, w.t.rateOpen(key))
}

// rateOpen reports whether key's bucket is open (a key without one is).
func (t *tables) rateOpen(key string) bool {
	b, ok := t.rate(key)
	return !ok || !b.Blocked
}

// admitRateGroup puts the first job of one group of a rated key into its
// lane while the key's bucket is open, and takes it out otherwise.
func (w *writer) admitRateGroup(key, stream, target string, open bool) {
	var head keyedItem
	hasHead := false
	if open {
		w.t.rated.AscendGreaterOrEqual(groupStart(key, stream, target), func(it keyedItem) bool {
			head, hasHead = it, it.inGroup(key, stream, target)
			return false
		})
	}
	w.admitRateHead(key, stream, target, head, hasHead)
}

// admitRateHead makes head (hasHead: there is one to admit) the group's
// job in its lane.
func (w *writer) admitRateHead(key, stream, target string, head keyedItem, hasHead bool) {
	cur, hasCur := w.t.rateAdmitted.Get(groupStart(key, stream, target))
	if hasCur && hasHead && cur == head {
		return
	}
	if hasCur {
		w.queueDelete(cur.q)
		w.t.rateAdmitted.Delete(cur)
		w.dirty[tRates] = true
	}
	if hasHead {
		w.queueInsert(head.q)
		w.t.rateAdmitted.ReplaceOrInsert(head)
		w.dirty[tRates] = true
		if !hasCur || cur.q.j.ID != head.q.j.ID || cur.q.rank != head.q.rank {
			w.woken = append(w.woken, laneKey{stream, target})
		}
	}
}

// closeKey takes every admitted job of key out of its lane.
func (w *writer) closeKey(key string) {
	var buf [4]keyedItem
	cur := buf[:0]
	w.t.rateAdmitted.AscendGreaterOrEqual(groupStart(key, "", ""), func(it keyedItem) bool {
		if it.key != key {
			return false
		}
		cur = append(cur, it)
		return true
	})
	for _, it := range cur {
		w.queueDelete(it.q)
		w.t.rateAdmitted.Delete(it)
		w.dirty[tRates] = true
	}
}

// openKey admits the first job of every group of key into its lane.
func (w *writer) openKey(key string) {
	from := groupStart(key, "", "")
	for {
		var head keyedItem
		found := false
		w.t.rated.AscendGreaterOrEqual(from, func(it keyedItem) bool {
			head, found = it, it.key == key
			return false
		})
		if !found {
			return
		}
		hk := head.q.key()
		w.admitRateHead(key, hk.stream, hk.target, head, true)
		from = groupStart(key, hk.stream, hk.target+"\x00")
	}
}

// admitRateKey brings every group of a rated key to its rule.
func (w *writer) admitRateKey(key string) {
	w.closeKey(key)
	if w.t.rateOpen(key) {
		w.openKey(key)
	}
}

// block closes a key's bucket until it allows a claim again.
func (w *writer) block(it rateItem) {
	it.Blocked = true
	w.fileDue(&it, it.AllowAt())
	w.setRate(it)
	w.closeKey(it.Key)
}

// rateAllows reports whether the bucket of r's key allows a claim at now.
func (t *tables) rateAllows(r *RateLimit, now int64) bool {
	it, ok := t.rate(r.Key)
	return !ok || (!it.Blocked && it.AllowAt() <= now)
}

// spendRate spends one token of r's key at now, if the bucket allows a
// claim; a bucket left empty closes, and its jobs leave their lanes. A
// bucket found empty (its jobs admitted under an earlier time than now, a
// new leader's clock behind the old one's) closes, and the answer is false.
func (w *writer) spendRate(r *RateLimit, now int64) bool {
	it := w.bucketFor(r)
	if it.Blocked || it.AllowAt() > now {
		if !it.Blocked {
			w.block(it)
		}
		return false
	}
	it.TAT = max(it.TAT, now) + it.interval()
	if it.AllowAt() > now {
		w.block(it)
		return true
	}
	w.setRate(it)
	return true
}

// defineRate makes r the rate of its key, from now on (the latest create
// naming a key sets it). A bucket that ran ahead under a slower rate is
// brought back to empty under the new one.
func (w *writer) defineRate(r *RateLimit, now int64) {
	it := w.bucketFor(r)
	if it.RateLimit == *r {
		return
	}
	it.RateLimit = *r
	it.TAT = min(it.TAT, now+it.tolerance()+it.interval())
	if it.Blocked {
		w.fileDue(&it, it.AllowAt())
	} else if it.jobs == 0 {
		w.fileDue(&it, max(it.TAT, 1))
	}
	w.setRate(it)
}

// rateTick opens the buckets that allow a claim again at now, and drops
// the full ones no job uses: what the due index files at or before now.
func (w *writer) rateTick(now int64) {
	if w.t.rateDue.Len() == 0 {
		return
	}
	for range maxRateTicks {
		d, ok := w.t.rateDue.Min()
		if !ok || d.at > now {
			return
		}
		w.t.rateDue.DeleteMin()
		it, ok := w.t.rate(d.key)
		w.dirty[tRates] = true
		if !ok {
			continue
		}
		it.due = 0
		if it.Blocked {
			if at := it.AllowAt(); at > now {
				w.fileDue(&it, at)
				w.setRate(it)
				continue
			}
			it.Blocked = false
			w.openKey(it.Key) // reads the groups, not the bucket
		}
		if it.jobs == 0 {
			if it.TAT <= now {
				w.t.rates.Delete(rateRef{key: it.Key})
				continue
			}
			w.fileDue(&it, it.TAT)
		}
		w.setRate(it)
	}
}

func newRatedTree() *btree.BTreeG[keyedItem]        { return btree.NewG(btreeDegree, lessKeyed) }
func newRateAdmittedTree() *btree.BTreeG[keyedItem] { return btree.NewG(btreeDegree, lessGroup) }

func init() {
	registerSnap(snapRow(snapRate, "Rates", 11,
		func(t *tables, _ int, r *recordWriter) {
			t.eachRate(func(it *rateItem) bool {
				b := it.RateBucket
				return r.add(&b, func(*enc) {})
			})
		},
		func(*dec, int) *RateBucket { return &RateBucket{} },
		func(w *writer, b *RateBucket) error { return w.restoreRate(b) }))
}

// restoreRate puts back a key's bucket. The jobs, restored before it,
// counted the key's live jobs into a bucket of their own rate; the
// record's rate and time replace it, and the key's groups are admitted as
// the record says.
func (w *writer) restoreRate(b *RateBucket) error {
	if err := b.RateLimit.Valid(); err != nil {
		return fmt.Errorf("restore: rate bucket record %q: %w", b.Key, err)
	}
	if w.ratesRestored == nil {
		w.ratesRestored = map[string]bool{}
	}
	if w.ratesRestored[b.Key] {
		return fmt.Errorf("restore: rate bucket record %q twice", b.Key)
	}
	w.ratesRestored[b.Key] = true
	it, _ := w.t.rate(b.Key)
	it.RateBucket = *b
	switch {
	case it.Blocked:
		w.fileDue(&it, it.AllowAt())
	case it.jobs == 0:
		w.fileDue(&it, max(it.TAT, 1))
	default:
		w.fileDue(&it, 0)
	}
	w.setRate(it)
	w.admitRateKey(b.Key)
	return nil
}

// rateGroupItem counts the rated jobs of one group: a key's claimable jobs
// of one stream and target.
type rateGroupItem struct {
	key, stream, target string
	n                   int
}

func lessRateGroup(a, b rateGroupItem) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	if a.stream != b.stream {
		return a.stream < b.stream
	}
	return a.target < b.target
}

// countRateGroup adds d to the rated jobs of a group.
func (w *writer) countRateGroup(key, stream, target string, d int) {
	g, _ := w.t.rateGroups.Get(rateGroupItem{key: key, stream: stream, target: target})
	g.key, g.stream, g.target = key, stream, target
	g.n += d
	if g.n <= 0 {
		w.t.rateGroups.Delete(g)
	} else {
		w.t.rateGroups.ReplaceOrInsert(g)
	}
	w.dirty[tRates] = true
}
