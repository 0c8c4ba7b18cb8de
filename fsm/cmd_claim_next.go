package fsm

// ClaimNextCommand takes the oldest queued job of the first stream in
// Streams that has one, among jobs untargeted or targeted at one of
// Targets, under a new lease. Finding nothing is an answer (Claimed false),
// not a refusal.
type ClaimNextCommand struct {
	Now        int64
	Streams    []string
	Targets    []string
	Actor      Actor
	AttemptID  string
	LeaseToken string
	// LeaseNanos is the cluster's default lease; a job's own LeaseSeconds wins.
	LeaseNanos int64
}

func init() {
	register(CmdClaimNext, "claim-next", func() command { return new(ClaimNextCommand) })
}

func (c *ClaimNextCommand) encode(e *enc) {
	e.varint(c.Now)
	e.strs(c.Streams)
	e.strs(c.Targets)
	e.actor(c.Actor)
	e.str(c.AttemptID)
	e.str(c.LeaseToken)
	e.varint(c.LeaseNanos)
}

func (c *ClaimNextCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Streams = d.strs()
	c.Targets = d.strs()
	c.Actor = d.actor()
	c.AttemptID = d.str()
	c.LeaseToken = d.str()
	c.LeaseNanos = d.varint()
}

func (c *ClaimNextCommand) apply(a *applier) *Result {
	return a.claimNext(c.Streams, c.Targets, grant{Now: c.Now, Actor: c.Actor, AttemptID: c.AttemptID,
		LeaseToken: c.LeaseToken, LeaseNanos: c.LeaseNanos})
}
