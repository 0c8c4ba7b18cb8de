package fsm

// ClaimCommand claims job JobID under a new lease, if it is queued and
// eligible for one of Targets.
//
// Entries written before claim-next had its own type (ClaimNextCommand)
// carry an empty JobID and Streams: they claim the next job, and are still
// applied so. A leader writes that form only while some server of the
// cluster does not apply ClaimNextCommand yet (queue.Service.ClaimNext).
type ClaimCommand struct {
	Now        int64
	JobID      string
	Streams    []string
	Targets    []string
	Actor      Actor
	AttemptID  string
	LeaseToken string
	// LeaseNanos is the cluster's default lease; a job's own LeaseSeconds wins.
	LeaseNanos int64
}

func init() {
	register(CmdClaim, "claim", func() command { return new(ClaimCommand) })
}

func (c *ClaimCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.JobID)
	e.strs(c.Streams)
	e.strs(c.Targets)
	e.actor(c.Actor)
	e.str(c.AttemptID)
	e.str(c.LeaseToken)
	e.varint(c.LeaseNanos)
}

func (c *ClaimCommand) decode(d *dec) {
	c.Now = d.varint()
	c.JobID = d.str()
	c.Streams = d.strs()
	c.Targets = d.strs()
	c.Actor = d.actor()
	c.AttemptID = d.str()
	c.LeaseToken = d.str()
	c.LeaseNanos = d.varint()
}

func (c *ClaimCommand) apply(a *applier) *Result {
	g := grant{Now: c.Now, Actor: c.Actor, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken, LeaseNanos: c.LeaseNanos}
	if c.JobID == "" {
		return a.claimNext(c.Streams, c.Targets, g) // the form before ClaimNextCommand
	}
	return a.claimJob(c.JobID, c.Targets, g)
}
