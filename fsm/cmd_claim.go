package fsm

import (
	"fmt"
	"slices"
)

// MaxClaimBatch caps the jobs one batch claim takes.
const MaxClaimBatch = 100

// ClaimCommand takes a queued job under a new lease: job JobID, if set and
// eligible for one of Targets; else the next job of the first stream in
// Streams that has one (the highest priority, then the oldest), among jobs
// untargeted or targeted at one of Targets. Finding nothing is an answer
// (Claimed false), not a refusal.
//
// Options:
//   - Keyed: AttemptID is a key the claimant chose, so the claim can be
//     repeated when its answer was lost: if a running job already holds
//     that attempt for the same claimant in one of Streams, the answer is
//     that job and its lease, unchanged (Duplicate). A key held by another
//     claimant's running attempt is refused (ErrExists).
//   - AttemptIDs and LeaseTokens: a batch, up to len(AttemptIDs) jobs, each
//     as the next would be taken, each under its own lease (AttemptIDs[i]
//     and LeaseTokens[i]); Result.Jobs are the jobs taken, in order.
//   - Capabilities: the worker's capabilities; the claim may take jobs
//     whose requirements they cover, and records that a worker with them
//     is alive. With Probe, it only records that.
type ClaimCommand struct {
	Now        int64
	JobID      string
	Streams    []string
	Targets    []string
	Actor      Actor
	AttemptID  string
	LeaseToken string
	// LeaseNanos is the cluster's default lease; a job's own LeaseSeconds wins.
	LeaseNanos   int64
	Keyed        bool
	AttemptIDs   []string
	LeaseTokens  []string
	Capabilities []string
	Probe        bool

	// The entry's form in a build before LevelTagged (0: a tagged entry):
	// claim, claim-next, claim-next-keyed or claim-batch, wrapped in a
	// capable command (capable, with its own time) when it had
	// capabilities.
	form       CommandType
	capable    bool
	capableNow int64
}

func init() {
	newClaim := func() command { return new(ClaimCommand) }
	register(CmdClaim, "claim", newClaim)
	registerForm(CmdClaim, "claim", CmdClaim, newClaim, decodeClaimV1)
	registerForm(CmdClaimNext, "claim-next", CmdClaim, newClaim, decodeClaimV1)
	registerForm(CmdClaimNextKeyed, "claim-next-keyed", CmdClaim, newClaim, decodeClaimV1)
	registerForm(CmdClaimBatch, "claim-batch", CmdClaim, newClaim, decodeClaimV1)
	registerForm(CmdCapable, "capable", CmdClaim, newClaim, decodeClaimV1)
}

func (c *ClaimCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.JobID)
	f.strs(3, &c.Streams)
	f.strs(4, &c.Targets)
	f.actor(5, &c.Actor)
	f.str(6, &c.AttemptID)
	f.str(7, &c.LeaseToken)
	f.i64(8, &c.LeaseNanos)
	f.bool(9, &c.Keyed)
	f.strs(10, &c.AttemptIDs)
	f.strs(11, &c.LeaseTokens)
	f.strs(12, &c.Capabilities)
	f.bool(13, &c.Probe)
}

func (c *ClaimCommand) setForm(t CommandType) { c.form = t }

// innerForm is the claim's form before LevelTagged, capabilities aside.
func (c *ClaimCommand) innerForm() CommandType {
	switch {
	case c.form != 0:
		return c.form
	case len(c.AttemptIDs) > 0:
		return CmdClaimBatch
	case c.Keyed:
		return CmdClaimNextKeyed
	case c.JobID != "":
		return CmdClaim
	}
	return CmdClaimNext
}

func (c *ClaimCommand) encodeV1(e *enc) CommandType {
	if c.Probe || len(c.Capabilities) > 0 {
		if c.capable {
			e.varint(c.capableNow)
		} else {
			e.varint(c.Now)
		}
		e.strs(c.Capabilities)
		if c.Probe {
			e.byte1(0)
		} else {
			inner := c.innerForm()
			e.byte1(byte(inner))
			c.encodeInnerV1(e, inner)
		}
		return CmdCapable
	}
	inner := c.innerForm()
	c.encodeInnerV1(e, inner)
	return inner
}

func (c *ClaimCommand) encodeInnerV1(e *enc, form CommandType) {
	e.varint(c.Now)
	if form == CmdClaim {
		e.str(c.JobID)
	}
	e.strs(c.Streams)
	e.strs(c.Targets)
	e.actor(c.Actor)
	if form == CmdClaimBatch {
		e.strs(c.AttemptIDs)
		e.strs(c.LeaseTokens)
	} else {
		e.str(c.AttemptID)
		e.str(c.LeaseToken)
	}
	e.varint(c.LeaseNanos)
}

func decodeClaimV1(d *dec, t CommandType) command {
	c := &ClaimCommand{}
	if t == CmdCapable {
		c.capable = true
		c.capableNow = d.varint()
		c.Capabilities = d.strs()
		t = CommandType(d.byte1())
		switch t {
		case 0:
			c.Probe, c.Now = true, c.capableNow
			return c
		case CmdClaim, CmdClaimNext, CmdClaimNextKeyed, CmdClaimBatch:
		default:
			d.fail(fmt.Sprintf("a capable command carries command type %d", t))
			return c
		}
	}
	c.form = t
	c.Keyed = t == CmdClaimNextKeyed
	c.Now = d.varint()
	if t == CmdClaim {
		c.JobID = d.str()
	}
	c.Streams = d.strs()
	c.Targets = d.strs()
	c.Actor = d.actor()
	if t == CmdClaimBatch {
		c.AttemptIDs = d.strs()
		c.LeaseTokens = d.strs()
	} else {
		c.AttemptID = d.str()
		c.LeaseToken = d.str()
	}
	c.LeaseNanos = d.varint()
	return c
}

func (c *ClaimCommand) apply(a *applier) *Result {
	if c.capable || c.Probe || len(c.Capabilities) > 0 {
		key, err := CapabilityKey(c.Capabilities, MaxCapabilities)
		if err != nil {
			return fail(fmt.Errorf("claim: %w", err))
		}
		if key == "" {
			return fail(fmt.Errorf("claim: %w: a capable claim names at least one capability", ErrInvalid))
		}
		now := c.Now
		if c.capable {
			now = c.capableNow
		}
		a.seeCaps(key, now)
		if c.Probe {
			return &Result{}
		}
		a.caps, a.capsKey = Labels(key), key
		defer func() { a.caps, a.capsKey = nil, "" }()
	}
	g := grant{Now: c.Now, Actor: c.Actor, AttemptID: c.AttemptID, LeaseToken: c.LeaseToken, LeaseNanos: c.LeaseNanos}
	switch c.innerForm() {
	case CmdClaimBatch:
		return c.claimBatch(a)
	case CmdClaimNextKeyed:
		if j := a.t.runningByAttempt(c.AttemptID); j != nil {
			l := j.Lease
			if l.Owner != c.Actor.Role || l.WorkerID != c.Actor.WorkerID || !slices.Contains(c.Streams, j.Stream) {
				return fail(fmt.Errorf("claim: %w: claim id %q names another claimant's running attempt", ErrExists, c.AttemptID))
			}
			return &Result{Job: j, Claimed: true, Duplicate: true}
		}
		return a.claimNext(c.Streams, c.Targets, g)
	case CmdClaim:
		if c.JobID == "" {
			// The claim-next of the builds before it had its own form.
			return a.claimNext(c.Streams, c.Targets, g)
		}
		return a.claimJob(c.JobID, c.Targets, g)
	}
	return a.claimNext(c.Streams, c.Targets, g)
}

func (c *ClaimCommand) claimBatch(a *applier) *Result {
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
