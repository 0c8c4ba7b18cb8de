package fsm

import (
	"fmt"
	"slices"
)

// ClaimNextKeyedCommand is a claim-next whose attempt id is a key the
// claimant chose, so the claim can be repeated when its answer was lost
// (the leader died between commit and answer, the connection dropped): if
// a running job already holds that attempt for the same claimant in one of
// Streams, the answer is that job and its lease, unchanged (Duplicate);
// otherwise it claims as ClaimNextCommand does. A key held by another
// claimant's running attempt is refused (ErrExists).
type ClaimNextKeyedCommand struct {
	ClaimNextCommand
}

func init() {
	register(CmdClaimNextKeyed, "claim-next-keyed", func() command { return new(ClaimNextKeyedCommand) })
}

func (c *ClaimNextKeyedCommand) apply(a *applier) *Result {
	if j := a.t.runningByAttempt(c.AttemptID); j != nil {
		l := j.Lease
		if l.Owner != c.Actor.Role || l.WorkerID != c.Actor.WorkerID || !slices.Contains(c.Streams, j.Stream) {
			return fail(fmt.Errorf("claim: %w: claim id %q names another claimant's running attempt", ErrExists, c.AttemptID))
		}
		return &Result{Job: j, Claimed: true, Duplicate: true}
	}
	return c.ClaimNextCommand.apply(a)
}
