package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// maxDeadSkips bounds how many out-of-attempts jobs one claim-next entry
// may mark dead before giving up, so no entry does unbounded work.
const maxDeadSkips = 64

// applier applies one command to the writer's indexes. Every method
// validates fully before it writes, so a refused command leaves the state as
// it found it.
type applier struct {
	*writer
	index       uint64
	maxAttempts int32
	in          *interner
	events      *eventCounts // nil: not counted
	// caps (sorted) and capsKey are the capabilities of the claim being
	// applied (a ClaimCommand with capabilities), nil outside one.
	caps    []string
	capsKey string
	// token is the named token the command's actor carries: the events it
	// records name it (tokens.go).
	token string
	// schedule names the schedule whose fire creates the job being
	// applied (schedule.go), "" outside one.
	schedule string
}

func (a *applier) get(id string) (*Job, error) { return a.t.job(id), nil }

// put stores j in place of old, the stored version it is a modified copy
// of (nil for a new job).
//
// A routed job that finishes drops its route: only a queued or running
// job is ever routed again, and so every job with a route is in the
// routed index (and in the version 4 snapshots it calls for).
func (a *applier) put(old, j *Job, now int64) {
	if j.Extra().Route != nil && j.State != StateQueued && j.State != StateRunning {
		j.extraMut().Route = nil
	}
	j.ModifyIndex = a.index
	j.UpdatedAt = now
	a.stampToken(old, j)
	a.putJob(old, j)
	a.emitJob(old, j)
	a.countEvents(old, j)
	if old != nil && !old.State.Terminal() && j.State.Terminal() && a.t.dependents.Len() > 0 {
		a.settleDependents(j, now)
	}
	// Last, once nothing of this apply reads its events: no reader has j
	// before the writer's trees are published.
	j.sealIfFinished()
}

func (j *Job) addEvent(e Event) {
	e.Seq = int32(j.NumEvents() + 1)
	// Versions of a job share their history's backing array, so an append
	// always copies it (copyJob caps it). The copy is sized exactly: a
	// finished job keeps its history for the retention window, and append's
	// spare capacity would be a quarter of a three-event history.
	t := j.openTrail()
	h := make([]Event, len(t.history)+1)
	copy(h, t.history)
	h[len(t.history)] = e
	t.history = h
}

func fail(err error) *Result { return &Result{Err: err} }

func notFound(id string) *Result {
	return fail(fmt.Errorf("job %s: %w", id, ErrNotFound))
}

func (a *applier) create(c *CreateCommand) *Result { return a.createWith(c, nil) }

// createWith is create; options, if set, fills in the fields of the new
// job that CreateCommand has none for, before the job is stored.
func (a *applier) createWith(c *CreateCommand, options func(*Job)) *Result {
	if c.ID == "" || len(c.Payload) == 0 {
		return fail(fmt.Errorf("create: %w: id and payload are required", ErrInvalid))
	}
	if c.Rate != nil && a.t.level >= LevelPolicies {
		if err := c.Rate.Valid(); err != nil {
			return fail(fmt.Errorf("create: %w", err))
		}
	}
	if c.IdempotencyKey != "" {
		if j := a.t.jobByIdem(c.IdempotencyKey); j != nil {
			return &Result{Job: j, Duplicate: true}
		}
	}
	if existing, err := a.get(c.ID); err != nil {
		panic(err)
	} else if existing != nil {
		return fail(fmt.Errorf("create: %w: job %s already exists", ErrInvalid, c.ID))
	}
	if st := a.t.stream(c.Stream); st.Ended() {
		return fail(fmt.Errorf("create: stream %s: %w (it takes no new jobs)", c.Stream, ErrStreamEnded))
	}
	j := &Job{
		ID:             c.ID,
		Stream:         c.Stream,
		Target:         IdentOf(c.Target),
		Payload:        c.Payload,
		State:          StateQueued,
		MaxAttempts:    sat32(c.MaxAttempts),
		IdempotencyKey: c.IdempotencyKey,
		CreatedAt:      c.Now,
		CreateIndex:    a.index,
		QueueIndex:     a.index,
	}
	if c.LeaseSeconds != 0 || c.TaskClass != "" {
		x := j.extraMut()
		x.LeaseSeconds, x.TaskClass = c.LeaseSeconds, c.TaskClass
	}
	if j.Stream == "" {
		j.Stream = DefaultStream
	}
	if j.MaxAttempts <= 0 {
		j.MaxAttempts = a.maxAttempts
	}
	if options != nil {
		options(j)
	}
	if a.schedule != "" {
		j.extraMut().Schedule = a.schedule
	}
	if c.Rate != nil && a.t.level >= LevelPolicies {
		j.extraMut().Rate = c.Rate
	}
	a.applyDefaults(j)
	a.applyContract(j, c.ResultSchema)
	if r := j.Extra().Rate; r != nil {
		a.defineRate(r, c.Now)
	}
	j.setCreated(Event{Seq: 1, At: c.Now, Type: EventCreated, Actor: a.in.actor(c.Actor), To: codeQueued})
	a.put(nil, j, c.Now)
	return &Result{Job: j}
}

// eligible reports whether a claimant with the given identities may take j.
func eligible(j *Job, targets []string) bool {
	return j.Target == (Ident{}) || slices.Contains(targets, j.Target.String())
}

// grant is the lease a claim hands out: who takes it, when, and its
// attempt id and token.
type grant struct {
	Now        int64
	Actor      Actor
	AttemptID  string
	LeaseToken string
	LeaseNanos int64
}

func (g grant) check() error {
	if g.AttemptID == "" || g.LeaseToken == "" || g.LeaseNanos <= 0 {
		return fmt.Errorf("claim: %w: attempt id, lease token and lease are required", ErrInvalid)
	}
	return nil
}

// claimJob claims job id, which must be queued, eligible for targets and
// have attempts left (a job out of attempts dies here).
func (a *applier) claimJob(id string, targets []string, g grant) *Result {
	if err := g.check(); err != nil {
		return fail(err)
	}
	targets, err := a.claimTargets(targets, g.Actor)
	if err != nil {
		return fail(fmt.Errorf("claim: %w", err))
	}
	a.rateTick(g.Now)
	j := a.t.job(id)
	if j == nil {
		return notFound(id)
	}
	// A refusal carries the job, as every refusal of a job's command does
	// (the API shows it only to a caller that may read it).
	if err := a.claimRefusal(j); err != nil {
		return &Result{Job: j, Err: err}
	}
	if r := j.Extra().Rate; r != nil && !a.t.rateAllows(r, g.Now) {
		return &Result{Job: j, Err: refuse(ErrNotYetClaimable, "claim", j, "its rate limit (key "+r.Key+") allows no claim now; GET /rates says when it next does")}
	}
	if !eligible(j, targets) {
		return &Result{Job: j, Err: refuse(ErrTargetMismatch, "claim", j, "it is targeted at "+j.DescribeTarget())}
	}
	if j.Extra().Requires != "" && !covers(a.caps, j.Extra().Requires) {
		return &Result{Job: j, Err: refuse(ErrMissingCapability, "claim", j, "it requires "+j.Extra().Requires+"; the claim has "+cmp.Or(a.capsKey, "no capabilities"))}
	}
	if j.Attempts >= j.MaxAttempts {
		d := a.kill(j, g.Now, a.in.actor(g.Actor), "claim with no attempts left")
		return &Result{Job: d, Err: refuse(ErrMaxAttempts, "claim", d, fmt.Sprintf("attempts %d of %d used; job is dead", d.Attempts, d.MaxAttempts))}
	}
	if r := j.Extra().Rate; r != nil {
		a.spendRate(r, g.Now) // allowed: checked above
	}
	return &Result{Job: a.start(j, g), Claimed: true}
}

// claimRefusal says why queued job j may not be claimed now, whoever
// asks (nil: it may).
func (a *applier) claimRefusal(j *Job) error {
	switch {
	case j.State != StateQueued:
		return refuse(ErrIllegalTransition, "claim", j, "only a queued job can be claimed")
	case j.NotBefore != 0:
		// The refusal is the caller's answer, not state: its words may
		// change between builds.
		return refuse(ErrNotYetClaimable, "claim", j, "it is scheduled: not claimable before its runAt (a schedule, a retry backoff or a release's cooldown)")
	case j.Extra().DepsPending > 0:
		return refuse(ErrIllegalTransition, "claim", j, fmt.Sprintf("it waits for %d of the jobs it depends on", j.Extra().DepsPending))
	case j.Extra().ConcurrencyKey != "" && a.t.runningOfKey(j.Extra().ConcurrencyKey) >= keyLimit(j):
		return refuse(ErrIllegalTransition, "claim", j, fmt.Sprintf("%d jobs of its concurrency key %s run, its limit", a.t.runningOfKey(j.Extra().ConcurrencyKey), j.Extra().ConcurrencyKey))
	case a.t.stream(j.Stream).Ended():
		return refuse(ErrStreamEnded, "claim", j, "its stream "+j.Stream+" is ended")
	case a.t.isPaused(j.Stream):
		return refuse(ErrStreamPaused, "claim", j, "its stream "+j.Stream+" is paused")
	}
	return nil
}

// claimNext claims the oldest queued job of the first of streams that has
// one, among jobs untargeted or targeted at one of targets. Jobs found out
// of attempts die on the way (at most maxDeadSkips per entry); nothing to
// claim is an answer with Claimed false, not a refusal.
func (a *applier) claimNext(streams, targets []string, g grant) *Result {
	if err := g.check(); err != nil {
		return fail(err)
	}
	targets, err := a.claimTargets(targets, g.Actor)
	if err != nil {
		return fail(fmt.Errorf("claim: %w", err))
	}
	a.rateTick(g.Now)
	for skips := 0; skips <= maxDeadSkips; {
		j := a.nextQueued(streams, targets, g.Actor.WorkerID)
		if j == nil {
			return &Result{}
		}
		if j.Attempts >= j.MaxAttempts {
			a.kill(j, g.Now, a.in.actor(g.Actor), "claim with no attempts left")
			skips++
			continue
		}
		if r := j.Extra().Rate; r != nil && !a.spendRate(r, g.Now) {
			// Admitted under an earlier time than this entry's (a new
			// leader's clock behind the old one's): closed until it allows.
			skips++
			continue
		}
		return &Result{Job: a.start(j, g), Claimed: true}
	}
	return &Result{}
}

func (a *applier) nextQueued(streams, targets []string, worker string) *Job {
	return a.t.nextQueued(streams, targets, a.caps, worker)
}

// start takes queued job old under g's lease (a rate limit's token, if it
// has one, already spent).
func (a *applier) start(old *Job, g grant) *Job {
	j := copyJob(old)
	j.State = StateRunning
	j.Attempts++
	j.StartedAt = g.Now
	if j.extra != nil || a.capsKey != "" {
		x := j.extraMut()
		x.Progress, x.ProgressAt = nil, 0 // a new attempt reports its own
		x.ClaimCaps = a.capsKey
	}
	j.Lease = &Lease{
		Owner:     g.Actor.Role,
		WorkerID:  g.Actor.WorkerID,
		AttemptID: g.AttemptID,
		Token:     g.LeaseToken,
		ExpiresAt: g.Now + j.leaseNanos(g.LeaseNanos),
	}
	j.addAttempt(Attempt{
		ID: g.AttemptID, Owner: g.Actor.Role, WorkerID: g.Actor.WorkerID, Token: g.LeaseToken,
		StartedAt: g.Now, Outcome: OutcomeRunning,
	})
	j.addEvent(Event{At: g.Now, Type: EventClaimed, Actor: a.in.actor(g.Actor), From: StateQueued.Code(), To: StateRunning.Code(),
		AttemptID: g.AttemptID, WorkerID: g.Actor.WorkerID, Text: a.attemptText(j)})
	a.put(old, j, g.Now)
	a.useWorker(g.Actor, g.Now, true)
	return j
}

// attemptText is the text of a claim's event, "attempt 2 of 3": for the
// usual small numbers one shared string per pair, not one per claim that a
// finished job keeps in its history. Larger numbers are not interned, so
// that they cannot fill the interner's table (at most 210 pairs are).
func (a *applier) attemptText(j *Job) string {
	var buf [48]byte
	b := strconv.AppendInt(append(buf[:0], "attempt "...), int64(j.Attempts), 10)
	b = strconv.AppendInt(append(b, " of "...), int64(j.MaxAttempts), 10)
	if j.Attempts > maxSharedAttemptText || j.MaxAttempts > maxSharedAttemptText {
		return string(b)
	}
	return a.in.bytes(b)
}

const maxSharedAttemptText = 20

func (a *applier) comment(c *CommentCommand) *Result {
	old, err := a.get(c.JobID)
	if err != nil {
		panic(err)
	}
	if old == nil {
		return notFound(c.JobID)
	}
	if c.Text == "" {
		return fail(fmt.Errorf("comment: %w: text is required", ErrInvalid))
	}
	j := copyJob(old)
	j.extraMut().Comments = append(j.Extra().Comments, Comment{At: c.Now, Actor: a.in.actor(c.Actor), Text: c.Text})
	j.addEvent(Event{At: c.Now, Type: EventComment, Actor: a.in.actor(c.Actor), Text: c.Text})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}

func (a *applier) redrive(c *RedriveCommand) *Result {
	old, err := a.get(c.JobID)
	if err != nil {
		panic(err)
	}
	if old == nil {
		return notFound(c.JobID)
	}
	if old.State != StateFailed && old.State != StateDead && old.State != StateCancelled {
		return &Result{Job: old, Err: refuse(ErrIllegalTransition, "redrive", old, "only a failed, dead or cancelled job can be re-driven")}
	}
	j := copyJob(old)
	j.State = StateQueued
	j.NotBefore = 0
	if x := j.extra; x != nil {
		x.CancelRequestedAt, x.CancelReason = 0, ""
		x.DepsPending = 0 // re-driven: it runs now, whatever it waited for
	}
	j.Attempts = 0
	j.QueueIndex = a.index
	j.FinishedAt = 0
	j.addEvent(Event{At: c.Now, Type: EventRedriven, Actor: a.in.actor(c.Actor), From: old.State.Code(), To: StateQueued.Code()})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}

func (a *applier) blobChunk(c *BlobChunkCommand) *Result {
	if c.BlobID == "" || c.Seq < 0 {
		return fail(fmt.Errorf("blob chunk: %w", ErrInvalid))
	}
	a.putChunk(&BlobChunk{BlobID: c.BlobID, Seq: c.Seq, Data: c.Data})
	return &Result{}
}

func (a *applier) blobCommit(c *BlobCommitCommand) *Result {
	// An id is required, as for a chunk: a blob without one could not be
	// read back or restored. No leader has written such an entry (the
	// service draws every blob id), so no log replays differently.
	if c.BlobID == "" {
		return fail(fmt.Errorf("blob commit: %w: a blob id is required", ErrInvalid))
	}
	if b := a.t.blob(c.BlobID); b != nil {
		return &Result{Blob: b, Duplicate: true}
	}
	var size int64
	for i := 0; i < c.Chunks; i++ {
		ch := a.t.chunk(c.BlobID, i)
		if ch == nil {
			return fail(fmt.Errorf("blob %s chunk %d: %w", c.BlobID, i, ErrBlobIncomplete))
		}
		size += int64(len(ch.Data))
	}
	if size != c.Size {
		return fail(fmt.Errorf("blob %s: %w: have %d bytes, want %d", c.BlobID, ErrBlobIncomplete, size, c.Size))
	}
	b := &Blob{ID: c.BlobID, Size: c.Size, ContentType: c.ContentType, Chunks: c.Chunks, CreatedAt: c.Now}
	a.putBlob(b)
	return &Result{Blob: b}
}
