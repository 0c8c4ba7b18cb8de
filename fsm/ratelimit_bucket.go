package fsm

import (
	"fmt"
	"math"
)

// A rate limit and a key's bucket (ratelimit.go): the objects, their
// fields and the bucket's arithmetic.

// Rate bounds.
const (
	MaxRateLimit  = 1_000_000
	MaxRateBurst  = 1_000_000
	MaxRatePeriod = int64(7 * 24 * 3600 * 1e9) // a week, in nanoseconds
	MinRatePeriod = int64(1e6)                 // a millisecond
	// maxRateTicks bounds the buckets one entry opens or drops; the rest
	// wait for the next entry (the promoter proposes one while any is due).
	maxRateTicks = 1024
)

// RateLimit is a key's rate: at most Limit claims per PeriodNanos, up to
// Burst (0: Limit) at once.
type RateLimit struct {
	Key         string
	Limit       int
	PeriodNanos int64
	Burst       int
}

func (r *RateLimit) fields(f *fields) {
	f.istr(1, &r.Key)
	f.int(2, &r.Limit)
	f.i64(3, &r.PeriodNanos)
	f.int(4, &r.Burst)
}

// Valid says what is wrong with r, if anything.
func (r *RateLimit) Valid() error {
	switch {
	case r.Key == "":
		return fmt.Errorf("%w: a rate limit needs a key", ErrInvalid)
	case r.Limit < 1 || r.Limit > MaxRateLimit:
		return fmt.Errorf("%w: a rate limit's limit must be 1 to %d", ErrInvalid, MaxRateLimit)
	case r.PeriodNanos < MinRatePeriod || r.PeriodNanos > MaxRatePeriod:
		return fmt.Errorf("%w: a rate limit's period must be 1ms to 7 days", ErrInvalid)
	case r.Burst < 0 || r.Burst > MaxRateBurst:
		return fmt.Errorf("%w: a rate limit's burst must be 0 (the limit) to %d", ErrInvalid, MaxRateBurst)
	}
	return nil
}

// burst is how many claims may go at once.
func (r *RateLimit) burst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// interval is the time one token takes to come back, rounded up (so the
// bucket never allows more than the rate).
func (r *RateLimit) interval() int64 {
	n := int64(max(r.Limit, 1))
	return max((r.PeriodNanos+n-1)/n, 1)
}

// tolerance is how far ahead of now the bucket's time may run: the burst
// less one claim.
func (r *RateLimit) tolerance() int64 {
	b, t := int64(r.burst()-1), r.interval()
	if b > 0 && t > (math.MaxInt64/4)/b {
		return math.MaxInt64 / 4
	}
	return b * t
}

// RateBucket is a key's bucket as the state holds it: its rate, the
// theoretical arrival time of the next claim (TAT: the bucket is full at
// or before it, and allows a claim at now while TAT - tolerance <= now),
// and whether an entry found it empty (Blocked: its groups are out of
// their lanes until the due time).
type RateBucket struct {
	RateLimit
	TAT     int64
	Blocked bool
}

func (b *RateBucket) fields(f *fields) {
	f.istr(1, &b.Key)
	f.int(2, &b.Limit)
	f.i64(3, &b.PeriodNanos)
	f.int(4, &b.Burst)
	f.i64(5, &b.TAT)
	f.bool(6, &b.Blocked)
}

// AllowAt is the first time the bucket allows a claim.
func (b *RateBucket) AllowAt() int64 { return b.TAT - b.tolerance() }

// Tokens is how many claims the bucket allows at now.
func (b *RateBucket) Tokens(now int64) int {
	burst, t := int64(b.burst()), b.interval()
	if b.TAT <= now {
		return int(burst)
	}
	if now < b.AllowAt() {
		return 0
	}
	return int(min(burst, (now-b.AllowAt())/t+1))
}

// rateField is objPtr for a *RateLimit through its concrete method: the
// create command's field list, the hottest, so lets nothing escape (a
// nested object read through the fielder interface moves the encoder to
// the heap, one allocation per create encoded or decoded).
func rateField(f *fields, n int, p **RateLimit) {
	if f.w {
		if *p != nil {
			at, last := f.open(n)
			(*p).fields(f)
			f.close(at, last)
		}
		return
	}
	if f.at(n, kindBytes) {
		v := new(RateLimit)
		if rest, ok := f.enter(int(f.key >> 3)); ok {
			v.fields(f)
			f.leave(rest)
		}
		*p = v
	}
}
