package fsm

import (
	"fmt"
	"hash/fnv"
	"math"
)

// PromoteCommand makes the scheduled jobs whose time has come (NotBefore
// at or before Now) claimable, oldest time first, at most Max of them: each
// enters its queue lane as a job queued now. The leader proposes it when
// the earliest scheduled time has passed (queue.Promoter).
type PromoteCommand struct {
	Now int64
	Max int
}

func init() {
	register(CmdPromote, "promote", func() command { return new(PromoteCommand) })
}

func (c *PromoteCommand) encode(e *enc) {
	e.varint(c.Now)
	e.int(c.Max)
}

func (c *PromoteCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Max = d.int()
}

func (c *PromoteCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.int(2, &c.Max)
}

func (c *PromoteCommand) apply(a *applier) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("promote: %w: max must be positive", ErrInvalid))
	}
	// The rate buckets that allow claims again open first.
	a.rateTick(c.Now)
	// Collect first: the index changes under us as we write.
	var due []*Job
	a.t.scheduled.Ascend(func(it timeItem) bool {
		if len(due) == c.Max || it.at > c.Now {
			return false
		}
		due = append(due, it.j)
		return true
	})
	res := &Result{}
	for _, old := range due {
		j := copyJob(old)
		j.NotBefore = 0
		j.QueueIndex = a.index
		a.put(old, j, c.Now)
		res.Jobs = append(res.Jobs, j)
	}
	return res
}

// NextScheduled returns the earliest time a scheduled job becomes
// claimable (unix nanoseconds), or 0 when none waits.
func (r *Reader) NextScheduled() int64 {
	return r.firstAt(func(t *tables) (int64, bool) { it, ok := t.scheduled.Min(); return it.at, ok })
}

// retryDelay is how long j (a copy whose failed attempt is counted in
// Attempts) waits before it can be claimed again: BackoffBase *
// 2^(Attempts-1) seconds, at most BackoffMax, less up to a fifth of it as
// jitter so that jobs failed together do not come back together. The
// jitter is drawn from the job's id and attempt, not a random source: every
// replica computes the same delay. 0 without a backoff.
func retryDelay(j *Job) int64 {
	if j.BackoffBase <= 0 {
		return 0
	}
	d := float64(j.BackoffBase) * math.Pow(2, float64(max(j.Attempts-1, 0)))
	if j.BackoffMax > 0 {
		d = min(d, float64(j.BackoffMax))
	}
	d = min(d, 365*24*3600) * 1e9
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", j.ID, j.Attempts)
	jitter := float64(h.Sum64()%1000) / 1000 * 0.2 // [0, 0.2)
	return int64(d * (1 - jitter))
}
