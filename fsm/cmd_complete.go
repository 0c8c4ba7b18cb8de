package fsm

import "fmt"

// CompleteCommand finishes a running job with a result.
//
// Next, from LevelCompleteNext, is the same claimant's claim of its next
// job, applied in the same entry right after the complete when the
// complete is accepted (a repeat included: the claimant wants work either
// way) and not when it is refused. Its Actor must be the complete's. The
// claim's answer is Result.Next. One entry then carries a job's end and
// the next one's start, so a worker's loop costs one commit per job.
type CompleteCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Result []byte
	Stdout string
	Stderr string
	Next   *ClaimCommand
}

func init() {
	register(CmdComplete, "complete", func() command { return new(CompleteCommand) })
}

func (c *CompleteCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.bytes(c.Result)
	e.str(c.Stdout)
	e.str(c.Stderr)
}

func (c *CompleteCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Result = d.bytes()
	c.Stdout = d.str()
	c.Stderr = d.str()
}

func (c *CompleteCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.bytes(4, &c.Result)
	f.str(5, &c.Stdout)
	f.str(6, &c.Stderr)
	objPtr(f, 7, &c.Next)
}

func (c *CompleteCommand) apply(a *applier) *Result {
	r := a.complete(c)
	if c.Next != nil && r.Err == nil && a.t.level >= LevelCompleteNext {
		if c.Next.Actor != c.Actor {
			r.Next = fail(fmt.Errorf("complete: %w: the next claim's claimant is not the complete's", ErrInvalid))
		} else {
			r.Next = c.Next.apply(a)
		}
	}
	return r
}
