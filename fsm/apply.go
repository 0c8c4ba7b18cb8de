package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/btree"
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
	maxAttempts int
	in          *interner
	events      *eventCounts // nil: not counted
	// caps (sorted) and capsKey are the capabilities of the claim being
	// applied (CapableCommand), nil outside one.
	caps    []string
	capsKey string
}

func (a *applier) get(id string) (*Job, error) { return a.t.job(id), nil }

// put stores j in place of old, the stored version it is a modified copy
// of (nil for a new job).
//
// A routed job that finishes drops its route: only a queued or running
// job is ever routed again, and so every job with a route is in the
// routed index (and in the version 4 snapshots it calls for).
func (a *applier) put(old, j *Job, now int64) {
	if j.Route != nil && j.State != StateQueued && j.State != StateRunning {
		j.Route = nil
	}
	j.ModifyIndex = a.index
	j.UpdatedAt = now
	a.putJob(old, j)
	a.emitJob(old, j)
	a.countEvents(old, j)
	if old != nil && !old.State.Terminal() && j.State.Terminal() && a.t.dependents.Len() > 0 {
		a.settleDependents(j, now)
	}
}

// jobWithCreated is a new job and the backing array of its history.
type jobWithCreated struct {
	Job
	ev [1]Event
}

func (j *Job) addEvent(e Event) {
	e.Seq = len(j.History) + 1
	// Versions of a job share their history's backing array, so an append
	// always copies it (copyJob caps it). The copy is sized exactly: a
	// finished job keeps its history for the retention window, and append's
	// spare capacity would be a quarter of a three-event history.
	h := make([]Event, len(j.History)+1)
	copy(h, j.History)
	h[len(j.History)] = e
	j.History = h
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
	// One allocation holds the job and its history's first event.
	jc := &jobWithCreated{Job: Job{
		ID:             c.ID,
		Stream:         c.Stream,
		Target:         c.Target,
		Payload:        c.Payload,
		State:          StateQueued,
		MaxAttempts:    c.MaxAttempts,
		LeaseSeconds:   c.LeaseSeconds,
		TaskClass:      c.TaskClass,
		IdempotencyKey: c.IdempotencyKey,
		CreatedAt:      c.Now,
		CreateIndex:    a.index,
		QueueIndex:     a.index,
	}}
	j := &jc.Job
	if j.Stream == "" {
		j.Stream = DefaultStream
	}
	if j.MaxAttempts <= 0 {
		j.MaxAttempts = a.maxAttempts
	}
	if options != nil {
		options(j)
	}
	a.applyDefaults(j)
	jc.ev[0] = Event{Seq: 1, At: c.Now, Type: EventCreated, Actor: a.in.actor(c.Actor), To: StateQueued}
	j.History = jc.ev[:1:1]
	a.put(nil, j, c.Now)
	return &Result{Job: j}
}

// eligible reports whether a claimant with the given identities may take j.
func eligible(j *Job, targets []string) bool {
	return j.Target == "" || slices.Contains(targets, j.Target)
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
	j := a.t.job(id)
	if j == nil {
		return notFound(id)
	}
	// A refusal carries the job, as every refusal of a job's command does
	// (the API shows it only to a caller that may read it).
	if err := a.claimRefusal(j); err != nil {
		return &Result{Job: j, Err: err}
	}
	if !eligible(j, targets) {
		return &Result{Job: j, Err: refuse(ErrTargetMismatch, "claim", j, "it is targeted at "+j.DescribeTarget())}
	}
	if j.Requires != "" && !covers(a.caps, j.Requires) {
		return &Result{Job: j, Err: refuse(ErrMissingCapability, "claim", j, "it requires "+j.Requires+"; the claim has "+cmp.Or(a.capsKey, "no capabilities"))}
	}
	if j.Attempts >= j.MaxAttempts {
		d := a.kill(j, g.Now, a.in.actor(g.Actor), "claim with no attempts left")
		return &Result{Job: d, Err: refuse(ErrMaxAttempts, "claim", d, fmt.Sprintf("attempts %d of %d used; job is dead", d.Attempts, d.MaxAttempts))}
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
	case j.DepsPending > 0:
		return refuse(ErrIllegalTransition, "claim", j, fmt.Sprintf("it waits for %d of the jobs it depends on", j.DepsPending))
	case j.ConcurrencyKey != "" && a.t.runningOfKey(j.ConcurrencyKey) >= keyLimit(j):
		return refuse(ErrIllegalTransition, "claim", j, fmt.Sprintf("%d jobs of its concurrency key %s run, its limit", a.t.runningOfKey(j.ConcurrencyKey), j.ConcurrencyKey))
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
		return &Result{Job: a.start(j, g), Claimed: true}
	}
	return &Result{}
}

func (a *applier) nextQueued(streams, targets []string, worker string) *Job {
	return a.t.nextQueued(streams, targets, a.caps, worker)
}

func (a *applier) start(old *Job, g grant) *Job {
	j := copyJob(old)
	j.State = StateRunning
	j.Attempts++
	j.StartedAt = g.Now
	j.Progress, j.ProgressAt = nil, 0 // a new attempt reports its own
	j.ClaimCaps = a.capsKey
	j.Lease = &Lease{
		Owner:     g.Actor.Role,
		WorkerID:  g.Actor.WorkerID,
		AttemptID: g.AttemptID,
		Token:     g.LeaseToken,
		ExpiresAt: g.Now + j.leaseNanos(g.LeaseNanos),
	}
	j.AttemptLog = append(j.AttemptLog, Attempt{
		ID: g.AttemptID, Owner: g.Actor.Role, WorkerID: g.Actor.WorkerID, Token: g.LeaseToken,
		StartedAt: g.Now, Outcome: OutcomeRunning,
	})
	j.addEvent(Event{At: g.Now, Type: EventClaimed, Actor: a.in.actor(g.Actor), From: StateQueued, To: StateRunning,
		AttemptID: g.AttemptID, WorkerID: g.Actor.WorkerID, Text: "attempt " + strconv.Itoa(j.Attempts) + " of " + strconv.Itoa(j.MaxAttempts)})
	a.put(old, j, g.Now)
	a.useWorker(g.Actor, g.Now, true)
	return j
}

// kill marks a queued job dead because it has no attempts left.
func (a *applier) kill(old *Job, now int64, actor, why string) *Job {
	j := copyJob(old)
	j.State = StateDead
	j.FinishedAt = now
	j.addEvent(Event{At: now, Type: EventDead, Actor: actor, From: old.State, To: StateDead, Text: why})
	a.put(old, j, now)
	return j
}

// repeated recognises a complete or fail that repeats one already applied
// for a finished attempt of j, by the same claimant (strict: its role and
// worker), and returns the first answer.
func repeated(j *Job, ref LeaseRef, want Outcome, actor Actor, strict bool) *Result {
	if ref.AttemptID == "" || ref.Token == "" {
		return nil
	}
	at := j.FindAttempt(ref.AttemptID)
	if at == nil || at.Token != ref.Token || at.Outcome != want || !at.ByHolder || !ownsAttempt(at, actor, strict) {
		return nil
	}
	return &Result{Job: j, Duplicate: true, Requeued: at.Requeued, DLQ: at.DLQ}
}

func (a *applier) lookupRunning(op string, ref LeaseRef, actor Actor, want Outcome) (*Job, *Result) {
	old, err := a.get(ref.JobID)
	if err != nil {
		panic(err)
	}
	if old == nil {
		return nil, notFound(ref.JobID)
	}
	strict := a.t.level >= LevelIdentity
	if want != "" {
		if r := repeated(old, ref, want, actor, strict); r != nil {
			return nil, r
		}
	}
	if err := authorize(op, old, ref, actor, strict); err != nil {
		return nil, &Result{Job: old, Err: err}
	}
	return old, nil
}

// endAttempt closes the current attempt of j (a copy) and drops its lease.
func endAttempt(j *Job, now int64, outcome Outcome, jerr *JobError) *Attempt {
	at := j.CurrentAttempt()
	if at != nil {
		at.EndedAt = now
		at.Outcome = outcome
		at.Error = jerr
	}
	j.Lease = nil
	return at
}

func (a *applier) heartbeat(c *HeartbeatCommand) *Result {
	old, r := a.lookupRunning("heartbeat", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	j := copyJob(old)
	j.Lease.ExpiresAt = c.Now + j.leaseNanos(c.LeaseNanos)
	j.addEvent(Event{At: c.Now, Type: EventHeartbeat, Actor: a.in.actor(c.Actor), AttemptID: j.Lease.AttemptID, WorkerID: c.Actor.WorkerID})
	a.put(old, j, c.Now)
	a.seeCaps(j.ClaimCaps, c.Now) // its worker is alive
	a.useWorker(Actor{Role: j.Lease.Owner, WorkerID: j.Lease.WorkerID}, c.Now, false)
	return &Result{Job: j}
}

func (a *applier) complete(c *CompleteCommand) *Result {
	old, r := a.lookupRunning("complete", c.Ref, c.Actor, OutcomeCompleted)
	if r != nil {
		return r
	}
	if old.IsTask() && !hasSummary(c.Result) {
		return &Result{Job: old, Err: fmt.Errorf("complete: %w: a task's result must be a JSON object with a string \"summary\" (the task stays running)", ErrInvalid)}
	}
	j := copyJob(old)
	at := endAttempt(j, c.Now, OutcomeCompleted, nil)
	at.ByHolder = c.Ref.Token != "" // authorize checked it is the lease's token
	j.State = StateDone
	j.Result = c.Result
	j.Error = nil
	j.Stdout, j.Stderr = c.Stdout, c.Stderr
	j.FinishedAt = c.Now
	j.addEvent(Event{At: c.Now, Type: EventCompleted, Actor: a.in.actor(c.Actor), From: StateRunning, To: StateDone,
		AttemptID: at.ID, WorkerID: c.Actor.WorkerID})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}

func (a *applier) fail(c *FailCommand) *Result {
	old, r := a.lookupRunning("fail", c.Ref, c.Actor, OutcomeFailed)
	if r != nil {
		return r
	}
	j := copyJob(old)
	jerr := c.Error
	at := endAttempt(j, c.Now, OutcomeFailed, &jerr)
	at.ByHolder = c.Ref.Token != ""
	j.Error = &jerr
	if c.Stdout != "" || c.Stderr != "" {
		j.Stdout, j.Stderr = c.Stdout, c.Stderr
	}
	res := &Result{Job: j}
	switch {
	case old.CancelRequested():
		// The worker stopped as asked: the job ends cancelled, whatever
		// the fail asked for.
		j.State = StateCancelled
		j.FinishedAt = c.Now
	case c.Requeue && j.Attempts < j.MaxAttempts:
		j.State = StateQueued
		j.QueueIndex = a.index
		if d := retryDelay(j); d > 0 {
			j.NotBefore = c.Now + d // the retry backoff
		}
		res.Requeued = true
	case c.Requeue:
		j.State = StateDead
		j.FinishedAt = c.Now
		res.DLQ = true
	default:
		j.State = StateFailed
		j.FinishedAt = c.Now
		res.DLQ = true
	}
	at.Requeued, at.DLQ = res.Requeued, res.DLQ
	if j.State == StateCancelled {
		a.cancelled(j, c.Now, a.in.actor(c.Actor), jerr.Message)
	} else {
		j.addEvent(Event{At: c.Now, Type: EventFailed, Actor: a.in.actor(c.Actor), From: StateRunning, To: j.State,
			AttemptID: at.ID, WorkerID: c.Actor.WorkerID, Text: jerr.Message})
	}
	a.put(old, j, c.Now)
	return res
}

func (a *applier) release(c *ReleaseCommand) *Result { return a.releaseUntil(c, 0, false) }

// releaseUntil is release; a notBefore after c.Now keeps the job from being
// claimed again until then (the promoter queues it then).
func (a *applier) releaseUntil(c *ReleaseCommand, notBefore int64, notForMe bool) *Result {
	old, r := a.lookupRunning("release", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	j := copyJob(old)
	if old.CancelRequested() {
		// Given back after a cancel: it ends cancelled, not queued again.
		endAttempt(j, c.Now, OutcomeCancelled, nil)
		a.cancelled(j, c.Now, a.in.actor(c.Actor), c.Reason)
		a.put(old, j, c.Now)
		return &Result{Job: j}
	}
	at := endAttempt(j, c.Now, OutcomeReleased, nil)
	// A release gives the attempt back: it does not count against the limit.
	j.Attempts--
	j.State = StateQueued
	j.QueueIndex = a.index
	if notBefore > c.Now {
		j.NotBefore = notBefore
	}
	if w := c.Actor.WorkerID; notForMe && !slices.Contains(j.NotFor, w) {
		j.NotFor = append(slices.Clone(j.NotFor[max(0, len(j.NotFor)-MaxNotFor+1):]), w)
	}
	j.addEvent(Event{At: c.Now, Type: EventReleased, Actor: a.in.actor(c.Actor), From: StateRunning, To: StateQueued,
		AttemptID: at.ID, WorkerID: c.Actor.WorkerID, Text: c.Reason})
	a.put(old, j, c.Now)
	return &Result{Job: j, Requeued: true}
}

func (a *applier) reap(c *ReapCommand) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("reap: %w: max must be positive", ErrInvalid))
	}
	// Collect first: the lease index changes under us as we write.
	var expired []*Job
	a.t.lease.Ascend(func(it timeItem) bool {
		if len(expired) == c.Max || it.at > c.Now {
			return false
		}
		expired = append(expired, it.j)
		return true
	})
	res := &Result{}
	for _, old := range expired {
		res.Jobs = append(res.Jobs, a.expire(old, c.Now, ""))
	}
	return res
}

// expire ends a running job's attempt as its lease running out does: the
// job is queued again, or dead when out of attempts; a task fails
// (auto-fail, seed 004). deadWorker, if set, is the registered worker
// whose death ended the lease early (cmd_health.go).
func (a *applier) expire(old *Job, now int64, deadWorker string) *Job {
	return a.expireDead(old, now, deadWorker, "")
}

// expireDead is expire for a lease a death ended: of worker deadWorker
// itself, or, when deadGateway is set, of that gateway of the worker (or,
// with no worker, the push gateway the task was delivered to). The
// event (and a task's auto-fail message) names what died; a gateway's
// death is named from LevelDelivery on (event text is replicated state),
// and below it reads as the worker's, as older builds write it.
func (a *applier) expireDead(old *Job, now int64, deadWorker, deadGateway string) *Job {
	dead := ""
	switch {
	case deadWorker == "" && deadGateway != "":
		dead = "gateway " + deadGateway // a task delivered to it (dispatch.go)
	case deadWorker != "":
		dead = "worker " + deadWorker
		if deadGateway != "" && a.t.level >= LevelDelivery {
			dead = "gateway " + deadGateway + " of worker " + deadWorker
		}
	}
	j := copyJob(old)
	if old.CancelRequested() {
		// Its worker never reported after the cancel: the lease's end
		// ends the job cancelled, not queued again.
		at := endAttempt(j, now, OutcomeCancelled, nil)
		text := "lease expired after a cancel"
		if dead != "" {
			text = dead + " declared dead after a cancel"
		}
		j.addEvent(Event{At: now, Type: EventReaped, Actor: "reaper", From: StateRunning, To: StateCancelled,
			AttemptID: at.ID, WorkerID: at.WorkerID, Text: text})
		a.cancelled(j, now, "reaper", text)
		a.put(old, j, now)
		return j
	}
	var jerr *JobError
	if j.IsTask() {
		// A task's lease is twice its timeout: its worker crashed or lost
		// its way, and the task fails rather than runs again (seed 004).
		jerr = &JobError{Code: AutoFailCode, Message: autoFailMessage(j.Timeout)}
		switch {
		case dead == "":
		case deadWorker == "":
			jerr.Message = "Auto-failed: the gateway " + deadGateway + " it was delivered to was declared dead with no complete/fail reported."
		case deadGateway != "" && a.t.level >= LevelDelivery:
			jerr.Message = "Auto-failed: the gateway " + deadGateway + " of its worker " + deadWorker + " was declared dead with no complete/fail reported."
		default:
			jerr.Message = "Auto-failed: its worker " + deadWorker + " was declared dead with no complete/fail reported."
		}
	}
	at := endAttempt(j, now, OutcomeExpired, jerr)
	text := "lease expired"
	if dead != "" {
		text = dead + " declared dead"
	}
	switch {
	case jerr != nil:
		at.DLQ = true
		j.Error = jerr
		j.State = StateFailed
		j.FinishedAt = now
		text = jerr.Message
	case j.Attempts >= j.MaxAttempts:
		j.State = StateDead
		j.FinishedAt = now
	default:
		j.State = StateQueued
		j.QueueIndex = a.index
	}
	j.addEvent(Event{At: now, Type: EventReaped, Actor: "reaper", From: StateRunning, To: j.State,
		AttemptID: at.ID, WorkerID: at.WorkerID, Text: text})
	a.put(old, j, now)
	return j
}

// purge deletes done jobs that finished before c.Before, oldest first, at
// most c.Max of them. Their idempotency keys are freed with them.
func (a *applier) purge(c *PurgeCommand) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("purge: %w: max must be positive", ErrInvalid))
	}
	if a.t.level >= LevelIdentity {
		a.dropLapsedBindings(c.Now-WorkerIDIdle, c.Max)
	}
	return &Result{Jobs: a.deleteFinished(a.t.finished, c.Before, c.Max)}
}

// deleteFinished deletes the jobs of a finish-time index (done jobs, or
// finished tasks) that finished before before, oldest first, at most max
// of them, and returns them.
func (a *applier) deleteFinished(idx *btree.BTreeG[timeItem], before int64, max int) []*Job {
	// Collect first: the index changes under us as we delete.
	var old []*Job
	idx.Ascend(func(it timeItem) bool {
		if len(old) == max || it.at >= before {
			return false
		}
		old = append(old, it.j)
		return true
	})
	for _, j := range old {
		a.putJob(j, nil)
	}
	return old
}

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
	j.Comments = append(j.Comments, Comment{At: c.Now, Actor: a.in.actor(c.Actor), Text: c.Text})
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
	j.CancelRequestedAt, j.CancelReason = 0, ""
	j.NotBefore, j.DepsPending = 0, 0 // re-driven: it runs now, whatever it waited for
	j.Attempts = 0
	j.QueueIndex = a.index
	j.FinishedAt = 0
	j.addEvent(Event{At: c.Now, Type: EventRedriven, Actor: a.in.actor(c.Actor), From: old.State, To: StateQueued})
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
