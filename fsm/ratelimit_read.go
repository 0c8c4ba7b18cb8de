package fsm

// The rate limits as readers see them (ratelimit.go): the buckets, when the
// next one is due, and the jobs their rates hold back.

// NextRateDue is the earliest time a rate bucket is due (it allows a claim
// again, or is full and unused), 0 for none: the promoter's cue.
func (r *Reader) NextRateDue() int64 {
	var at int64
	r.point(func(t *tables) {
		if it, ok := t.rateDue.Min(); ok {
			at = it.at
		}
	})
	return at
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
// buckets are closed. Its cost grows with those jobs.
func (r *Reader) RateWaiting(role string, inStream func(stream string) bool) map[string]int {
	out := map[string]int{}
	r.point(func(t *tables) {
		t.rateWaiting(func(it keyedItem) {
			if (role == HeadRole || t.seesTarget(role, it.q.target)) && inStream(it.q.stream) {
				out[it.q.stream]++
			}
		})
	})
	return out
}

// RateKeyWaiting counts, per key, the queued jobs their rate holds back
// that a caller of role may see in the streams inStream accepts.
func (r *Reader) RateKeyWaiting(role string, inStream func(stream string) bool) map[string]int {
	out := map[string]int{}
	r.point(func(t *tables) {
		t.rateWaiting(func(it keyedItem) {
			if (role == HeadRole || t.seesTarget(role, it.q.target)) && inStream(it.q.stream) {
				out[it.key]++
			}
		})
	})
	return out
}

// rateWaiting calls each for every job a closed bucket holds back.
func (t *tables) rateWaiting(each func(it keyedItem)) {
	t.eachRate(func(b *rateItem) bool {
		if b.Blocked {
			t.rated.AscendGreaterOrEqual(groupStart(b.Key, "", ""), func(it keyedItem) bool {
				if it.key != b.Key {
					return false
				}
				each(it)
				return true
			})
		}
		return true
	})
}
