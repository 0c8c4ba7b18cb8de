package queue

import (
	"context"
	"strings"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// MaxClaimStreams caps the streams one claim-next may name.
const MaxClaimStreams = 32

// ClaimNextInput asks for the oldest claimable job of the first of Streams
// that has one, waiting up to Wait (capped by Config.MaxClaimWait) for one;
// or, with JobID, for that job.
type ClaimNextInput struct {
	// JobID, if set, names the job to claim (the v0 claim by id): it is
	// claimed at once or refused, and Streams, Wait, ClaimID and MaxJobs
	// do not apply.
	JobID   string
	Streams []string
	Actor   fsm.Actor
	Wait    time.Duration
	// ClaimID, if set, makes the claim repeatable: the attempt it starts is
	// keyed by it, and the same claimant repeating the claim with the same
	// ClaimID (its first answer lost to a dead leader or a dropped
	// connection) gets the job that attempt took, with the same lease,
	// instead of a second job.
	ClaimID string
	// MaxJobs, above 1, asks for up to that many jobs in one entry
	// (ClaimNextBatch; at most fsm.MaxClaimBatch), each under its own
	// lease: as many as wait, once at least one does.
	MaxJobs int
	// Capabilities the worker has: the claim may take jobs whose
	// requirements they cover (and those that require nothing).
	Capabilities []string
}

// ValidClaimID reports whether id may key a claim: 8 to 64 letters,
// digits, '-' or '_'.
func ValidClaimID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// claimStreams checks the streams a claim names, in order; none means the
// default stream.
func claimStreams(streams []string) ([]string, error) {
	if len(streams) == 0 {
		return []string{fsm.DefaultStream}, nil
	}
	if len(streams) > MaxClaimStreams {
		return nil, invalid("at most %d streams per claim", MaxClaimStreams)
	}
	for _, st := range streams {
		if !ValidName(st) {
			return nil, invalid("stream %q is not a valid stream name", st)
		}
	}
	return streams, nil
}

// claimKeyPrefix sets a claim's key apart from the attempt ids servers
// draw, so a client's key can never name a server's attempt.
const claimKeyPrefix = "k_"

// claimApplyTimeout bounds the apply of one claim (see ClaimNext).
const claimApplyTimeout = 10 * time.Second

// ClaimNext claims the next job for in.Actor, on the leader. Every claim
// of every API (the worker contract, the v0 claim by id, the developer
// queue, the control plane's tasks, MCP) is this one. With nothing
// to claim it waits on a watch of the named queue lanes in the state
// store, so it wakes as soon as a matching job is committed. It returns a
// nil job when none came within the wait or the node is draining, and
// ErrLeadershipLost when this node stopped leading while it waited.
//
// A caller that leaves (ctx ends) while its claim commits does not leave a
// job running with nobody to work it: the claim is applied under a context
// the caller's departure does not cancel, and the job it took is given
// back at once.
func (s *Service) ClaimNext(ctx context.Context, in ClaimNextInput) (*fsm.Job, uint64, error) {
	in.MaxJobs = 1
	jobs, index, err := s.ClaimNextBatch(ctx, in)
	if len(jobs) == 0 {
		return nil, index, err
	}
	return jobs[0], index, err
}

// ClaimNextBatch is ClaimNext for up to in.MaxJobs jobs (at least 1): once
// one job can be claimed it takes as many as wait, up to MaxJobs, in one
// entry, each under its own lease. A keyed claim (ClaimID) takes one.
// While a node of the cluster does not apply the batch claim, it takes one.
func (s *Service) ClaimNextBatch(ctx context.Context, in ClaimNextInput) ([]*fsm.Job, uint64, error) {
	p, err := s.planClaim(ctx, in)
	if err != nil {
		return nil, 0, err
	}
	if in.JobID != "" {
		return s.claimByID(ctx, in.JobID, in.Actor, p.targets, p.caps)
	}
	return s.claimWaiting(ctx, p, in.Wait)
}

// claimPlan is a claim-next as checked: what its commands take.
type claimPlan struct {
	streams, targets, caps []string
	actor                  fsm.Actor
	key                    string
	maxJobs                int
}

// planClaim checks a claim (ClaimNextBatch's input) before anything is
// proposed.
func (s *Service) planClaim(ctx context.Context, in ClaimNextInput) (*claimPlan, error) {
	if in.MaxJobs <= 0 {
		in.MaxJobs = 1
	}
	if in.MaxJobs > fsm.MaxClaimBatch {
		return nil, invalid("max_jobs must be 1 to %d", fsm.MaxClaimBatch)
	}
	if in.MaxJobs > 1 && in.ClaimID != "" {
		return nil, invalid("claim_id names one attempt: it cannot key a claim of max_jobs > 1")
	}
	targets, err := s.claimTargets(s.state.Peek(), in.Actor)
	if err != nil {
		return nil, err
	}
	streams, err := claimStreams(in.Streams)
	if err != nil {
		return nil, err
	}
	if in.Wait < 0 {
		return nil, invalid("the wait must not be negative")
	}
	key := ""
	if in.ClaimID != "" {
		if !ValidClaimID(in.ClaimID) {
			return nil, invalid("claim_id must be 8 to 64 letters, digits, '-' or '_'")
		}
		key = claimKeyPrefix + in.ClaimID
	}
	capsKey, err := fsm.CapabilityKey(in.Capabilities, fsm.MaxCapabilities)
	if err != nil {
		return nil, labelsInvalid("capabilities", err)
	}
	if capsKey != "" {
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, ErrUpgradeInProgress
		}
		if err := s.seeCapabilities(ctx, capsKey); err != nil {
			return nil, err
		}
	}
	return &claimPlan{streams: streams, targets: targets, caps: fsm.Labels(capsKey), actor: in.Actor, key: key, maxJobs: in.MaxJobs}, nil
}

// ready reports whether p's claim would take a job now; ws is what to
// watch for one otherwise.
func (p *claimPlan) ready(r *fsm.Reader) (bool, *fsm.Watch) {
	j, ws := r.NextClaimable(p.streams, p.targets, p.caps, p.actor.WorkerID)
	// A repeated keyed claim whose attempt runs: the command answers it
	// (or refuses a clash) without waiting for a queued job.
	return j != nil || (p.key != "" && r.RunningByAttempt(p.key) != nil), ws
}

// command is p's claim command, with fresh attempt ids and lease tokens:
// a batch when p asks for several jobs and every server applies batches,
// keyed when p has a key and every server applies keys.
func (s *Service) command(ctx context.Context, p *claimPlan) *fsm.ClaimCommand {
	cmd := &fsm.ClaimCommand{Now: s.now(), Streams: p.streams, Targets: p.targets, Actor: p.actor,
		LeaseNanos: s.cfg.Lease.Nanoseconds(), Capabilities: p.caps}
	if p.maxJobs > 1 && s.atLevel(ctx, fsm.LevelIdentity) {
		for range p.maxJobs {
			cmd.AttemptIDs = append(cmd.AttemptIDs, s.cfg.NewID())
			cmd.LeaseTokens = append(cmd.LeaseTokens, s.cfg.NewID())
		}
		return cmd
	}
	cmd.AttemptID, cmd.LeaseToken = s.cfg.NewID(), s.cfg.NewID()
	if p.key != "" && s.atLevel(ctx, fsm.LevelIdentity) {
		// Before every server applies keyed claims the claim is an ordinary
		// one (a repeat after a lost answer then takes a second job, and the
		// first waits for its lease to expire, as every claim did before).
		cmd.AttemptID, cmd.Keyed = p.key, true
	}
	return cmd
}

// claimed is the jobs a claim's answer took.
func claimed(res *fsm.Result) []*fsm.Job {
	switch {
	case res == nil || !res.Claimed:
		return nil
	case len(res.Jobs) > 0:
		return res.Jobs
	}
	return []*fsm.Job{res.Job}
}

// kept returns jobs, claimed for a caller, unless the caller left (ctx
// ended) while the claim committed: then it gives them back now rather
// than leave them to the reaper, and returns ctx's error.
func (s *Service) kept(ctx context.Context, jobs []*fsm.Job) ([]*fsm.Job, error) {
	if ctx.Err() == nil {
		return jobs, nil
	}
	for _, j := range jobs {
		s.giveBack(j)
	}
	return nil, ctx.Err()
}

// claimWaiting claims p's next jobs, waiting up to wait (capped by
// Config.MaxClaimWait) for one.
func (s *Service) claimWaiting(ctx context.Context, p *claimPlan, wait time.Duration) ([]*fsm.Job, uint64, error) {
	// The wait's context is made when a claim first has to wait: most find
	// a job at once, and its timer and drain hook would be garbage unused.
	// Its deadline counts from here all the same.
	deadline := time.Now().Add(min(wait, s.cfg.MaxClaimWait))
	var wctx context.Context
	var cancel func()
	var stopDrain func() bool
	defer func() {
		if cancel != nil {
			stopDrain()
			cancel()
		}
	}()

	s.claimWaiters.Add(1)
	defer s.claimWaiters.Add(-1)
	for {
		ok, ws := p.ready(s.state.Peek())
		if ok {
			actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), claimApplyTimeout)
			res, index, err := s.Propose(actx, fsm.CmdClaim, s.command(ctx, p))
			acancel()
			if err != nil {
				return nil, index, err
			}
			if jobs := claimed(res); jobs != nil {
				jobs, err = s.kept(ctx, jobs)
				return jobs, index, err
			}
			// Another claimant won the race; look again.
			continue
		}
		if wctx == nil {
			wctx, cancel = context.WithDeadline(ctx, deadline)
			// A node shutting down ends the wait early (Drain).
			stopDrain = context.AfterFunc(s.draining, cancel)
		}
		if err := ws.WatchCtx(wctx); err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			return nil, s.cluster.AppliedIndex(), nil
		}
		if !s.cluster.IsLeader() {
			return nil, 0, ErrLeadershipLost
		}
	}
}

// claimByID claims job id for actor, whose claims may take targets and
// who has the capabilities caps.
func (s *Service) claimByID(ctx context.Context, id string, actor fsm.Actor, targets, caps []string) ([]*fsm.Job, uint64, error) {
	if err := s.claimable(ctx, actor, id, targets); err != nil {
		return nil, 0, err
	}
	cmd := fsm.ClaimCommand{Now: s.now(), JobID: id, Targets: targets, Actor: actor,
		AttemptID: s.cfg.NewID(), LeaseToken: s.cfg.NewID(), LeaseNanos: s.cfg.Lease.Nanoseconds(), Capabilities: caps}
	res, index, err := s.Propose(ctx, fsm.CmdClaim, &cmd)
	if err != nil {
		return nil, index, err
	}
	return []*fsm.Job{res.Job}, index, nil
}

// capsRefresh is how old the record of a capability set may be before a
// claim with it writes a new one.
const capsRefresh = time.Minute

// seeCapabilities records that a worker with the capability set key is
// alive, when the state last heard of the set more than capsRefresh ago: a
// worker that long-polls and finds nothing writes at most one entry a
// minute, and status can tell which jobs no live worker can take.
func (s *Service) seeCapabilities(ctx context.Context, key string) error {
	if at := s.state.Peek().CapsSeenAt(key); at != 0 && s.now()-at < capsRefresh.Nanoseconds() {
		return nil
	}
	_, _, err := s.Propose(ctx, fsm.CmdClaim, &fsm.ClaimCommand{Now: s.now(), Capabilities: fsm.Labels(key), Probe: true})
	return err
}

// LiveWindow is how recently a worker with some capabilities must have
// been heard from (a claim, or a heartbeat of a job it claimed) to count
// as live when status says which jobs no live worker can take.
const LiveWindow = 10 * time.Minute

// HasWorkFor reports whether a claim of stream by actor with caps (a
// capability list) would take a job now.
func (s *Service) HasWorkFor(stream string, actor fsm.Actor, caps []string) bool {
	key, err := fsm.CapabilityKey(caps, fsm.MaxCapabilities)
	if err != nil {
		return false
	}
	r := s.state.Read()
	targets, err := s.claimTargets(r, actor)
	if err != nil {
		return false
	}
	return r.NextQueued([]string{stream}, targets, fsm.Labels(key), actor.WorkerID) != nil
}

// labelsInvalid is the bad-input error of a capability or requirement
// list fsm.CapabilityKey refused.
func labelsInvalid(field string, err error) error {
	return invalid("%s: %s", field, strings.TrimPrefix(err.Error(), fsm.ErrInvalid.Error()+": "))
}

// giveBack releases a job claimed for a caller that left before the answer.
func (s *Service) giveBack(j *fsm.Job) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l := j.Lease
	_, _, err := s.Propose(ctx, fsm.CmdRelease, &fsm.ReleaseCommand{Now: s.now(),
		Ref:   fsm.LeaseRef{JobID: j.ID, AttemptID: l.AttemptID, Token: l.Token},
		Actor: fsm.Actor{Role: l.Owner, WorkerID: l.WorkerID}, Reason: "claimant disconnected before the answer"})
	if err != nil {
		s.logger.Warn("could not release a job claimed for a departed caller; the reaper will", "job", j.ID, "error", err)
	}
}
