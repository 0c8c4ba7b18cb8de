package fsm

// ClaimCommand takes a queued job under a new lease. With JobID set it claims
// that job; otherwise the oldest queued job of the first stream in Streams
// that has one, among jobs untargeted or targeted at one of Targets.
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

func (c *ClaimCommand) apply(a *applier) *Result { return a.claim(c) }
