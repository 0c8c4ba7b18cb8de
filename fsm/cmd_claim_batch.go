package fsm

import "fmt"

// MaxClaimBatch caps the jobs one batch claim takes.
const MaxClaimBatch = 100

// ClaimBatchCommand takes up to len(AttemptIDs) jobs in one entry, each as
// ClaimNextCommand would take the next one (the oldest of the first stream
// that has one), each under its own lease: AttemptIDs[i] and
// LeaseTokens[i] fence the i-th. Fewer jobs than asked, or none, is an
// answer, not a refusal. Result.Jobs are the jobs taken, in order.
type ClaimBatchCommand struct {
	Now         int64
	Streams     []string
	Targets     []string
	Actor       Actor
	AttemptIDs  []string
	LeaseTokens []string
	LeaseNanos  int64
}

func init() {
	register(CmdClaimBatch, "claim-batch", func() command { return new(ClaimBatchCommand) })
}

func (c *ClaimBatchCommand) encode(e *enc) {
	e.varint(c.Now)
	e.strs(c.Streams)
	e.strs(c.Targets)
	e.actor(c.Actor)
	e.strs(c.AttemptIDs)
	e.strs(c.LeaseTokens)
	e.varint(c.LeaseNanos)
}

func (c *ClaimBatchCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Streams = d.strs()
	c.Targets = d.strs()
	c.Actor = d.actor()
	c.AttemptIDs = d.strs()
	c.LeaseTokens = d.strs()
	c.LeaseNanos = d.varint()
}

func (c *ClaimBatchCommand) apply(a *applier) *Result {
	n := len(c.AttemptIDs)
	if n == 0 || n > MaxClaimBatch || len(c.LeaseTokens) != n {
		return fail(fmt.Errorf("claim batch: %w: 1 to %d attempt ids, as many lease tokens", ErrInvalid, MaxClaimBatch))
	}
	res := &Result{}
	for i := 0; i < n; i++ {
		r := a.claimNext(c.Streams, c.Targets, grant{Now: c.Now, Actor: c.Actor, AttemptID: c.AttemptIDs[i],
			LeaseToken: c.LeaseTokens[i], LeaseNanos: c.LeaseNanos})
		if r.Err != nil {
			if len(res.Jobs) == 0 {
				return r
			}
			break
		}
		if !r.Claimed {
			break
		}
		res.Jobs = append(res.Jobs, r.Job)
	}
	if len(res.Jobs) > 0 {
		res.Job, res.Claimed = res.Jobs[0], true
	}
	return res
}
