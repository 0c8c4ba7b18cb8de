package fsm

// The rate limits as readers see them (ratelimit.go): the buckets, when the
// next one is due, and the jobs their rates hold back.

// NextRateDue is the earliest time a rate bucket is due (it allows a claim
// again, or is full and unused), 0 for none: the promoter's cue.
func (r *Reader) NextRateDue() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.rateDue.Min(); return it.at, ok })
}

// RateBuckets returns every key's bucket, by key.
func (r *Reader) RateBuckets() []RateBucket {
	var out []RateBucket
	r.point(func(t *tables) {
		t.eachRate(func(it *rateItem) bool {
			out = append(out, it.RateBucket)
			return true
		})
	})
	return out
}

// RateBucketOf returns a key's bucket.
func (r *Reader) RateBucketOf(key string) (RateBucket, bool) {
	var b RateBucket
	var ok bool
	r.point(func(t *tables) {
		var it rateItem
		it, ok = t.rate(key)
		b = it.RateBucket
	})
	return b, ok
}

// RateWaiting counts, per stream, the queued jobs their rate holds back
// that a caller of role may see: the claimable jobs of the keys whose
// buckets are closed. Its cost grows with those keys' groups (stream and
// target), not with their jobs.
func (r *Reader) RateWaiting(role string, inStream func(stream string) bool) map[string]int {
	out := map[string]int{}
	r.point(func(t *tables) {
		t.rateWaiting(role, inStream, func(g rateGroupItem) { out[g.stream] += g.n })
	})
	return out
}

// RateKeyWaiting counts, per key, the queued jobs their rate holds back
// that a caller of role may see in the streams inStream accepts.
func (r *Reader) RateKeyWaiting(role string, inStream func(stream string) bool) map[string]int {
	out := map[string]int{}
	r.point(func(t *tables) {
		t.rateWaiting(role, inStream, func(g rateGroupItem) { out[g.key] += g.n })
	})
	return out
}

// rateWaiting calls each for every group of a closed bucket whose jobs a
// caller of role may see, in the streams inStream accepts.
func (t *tables) rateWaiting(role string, inStream func(stream string) bool, each func(g rateGroupItem)) {
	t.eachRate(func(b *rateItem) bool {
		if b.Blocked {
			t.rateGroups.AscendGreaterOrEqual(rateGroupItem{key: b.Key}, func(g rateGroupItem) bool {
				if g.key != b.Key {
					return false
				}
				if (role == HeadRole || t.seesTarget(role, g.target)) && inStream(g.stream) {
					each(g)
				}
				return true
			})
		}
		return true
	})
}
