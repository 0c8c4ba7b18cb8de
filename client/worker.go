package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Handler runs one claimed job. Its context is cancelled when the lease is
// lost (the attempt is fenced off, or heartbeats failed for a whole lease),
// when head cancels the job (the cause is ErrJobCancelled) or the worker
// shuts down. Returning a *JobError chooses the failure's code
// and retryability; a *Release gives the job back instead (not for this
// worker, or with a cooldown); any other error fails the attempt as
// retryable with code "handler_error". A result that does not match the
// job's result contract (claim.ResultSchema) is refused by the cluster;
// the Worker then fails the job, not retryable, with code
// "result_mismatch" and every mismatch in its message.
type Handler func(ctx context.Context, claim *WorkerClaim) (result json.RawMessage, err error)

// Failure codes the Worker reports on its own.
const (
	CodeHandlerError = "handler_error"
	CodeHandlerPanic = "handler_panic"
	// CodeCancelled is the code of the fail a Worker reports for a job
	// head cancelled while its handler ran.
	CodeCancelled = "cancelled"
)

// ErrJobCancelled is the cause of a handler context cancelled because head
// cancelled the job (a heartbeat answer said so). A handler that then
// returns an error fails the job with code "cancelled", which ends it
// cancelled; one that still returns a result completes it.
var ErrJobCancelled = errors.New("job cancelled")

// Release is an error a Handler returns to give its job back without
// using an attempt: NotForMe when this worker cannot do the job (it is
// never handed it again, other workers get it at once), Cooldown to keep
// everyone from being handed it for that long (at most a day).
type Release struct {
	Reason   string
	Cooldown time.Duration
	NotForMe bool
}

func (r *Release) Error() string {
	if r.NotForMe {
		return "release (not for this worker): " + r.Reason
	}
	return "release: " + r.Reason
}

// ErrLeaseLost is the cause of a handler context cancelled because the
// lease is gone.
var ErrLeaseLost = errors.New("lease lost")

// WorkerConfig configures a [Worker].
type WorkerConfig struct {
	// WorkerID identifies this worker to the server (required).
	WorkerID string
	// Streams are claimed from in order; empty means ["default"].
	Streams []string
	// Capabilities the worker has (gpu, lang:python, ...): it is handed
	// only jobs whose requires it all has.
	Capabilities []string
	// MaxWait is the long-poll wait of each claim (default 20s; the server
	// caps it at 30s).
	MaxWait time.Duration
	// Handler runs each job (required).
	Handler Handler
	// Concurrency is how many jobs run at once (default 1). The worker
	// claims for all its free slots in one round trip (a batch claim,
	// max_jobs), so it never holds a lease on a job it has no slot for.
	Concurrency int
	// Logger receives the worker's events (default: the client's logger).
	Logger *slog.Logger
	// ResumeHeld makes Run start with the jobs the cluster says this
	// WorkerID still holds (GET /internal/worker/held): after a crash and
	// restart the worker runs them again at once (their checkpoints, if
	// any, in the claim) instead of leaving them until their leases run
	// out. Those beyond Concurrency are released. Use it only when no two
	// running workers share a WorkerID: a second process with the same id
	// would take the first one's jobs.
	ResumeHeld bool
}

// Worker runs the worker contract v1 loop on a [Client]:
//
//  1. claim (long poll) from the configured streams, as many jobs as it
//     has free slots (Concurrency) in one request;
//  2. run the handler under a context cancelled if the lease is lost;
//  3. heartbeat every heartbeat_interval_seconds while the handler runs;
//  4. complete with the result, or fail with the handler's error.
//
// A complete also asks for the slot's next job (the complete's "next",
// without a wait): when one is ready the slot runs it at once, and a job
// costs one round trip and one commit instead of two; otherwise the slot
// goes back to step 1.
//
// A handler that cannot do its job returns a *[Release] (NotForMe: true):
// the job goes back to the queue for another worker, and its attempt does
// not count.
//
// Shutdown: when Run's context is cancelled the handlers' contexts are
// cancelled too. A handler that still returns a result completes its job;
// one that returns an error (other than a *JobError) has its job released,
// with the reason "worker shut down: ..." in the job's history: the job is
// back in the queue at once instead of after the lease, and the attempt
// does not count, so redeploying workers never uses up a job's attempts.
type Worker struct {
	c   *Client
	cfg WorkerConfig
	log *slog.Logger
}

// NewWorker returns a worker using c.
func NewWorker(c *Client, cfg WorkerConfig) *Worker {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 20 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	log := cfg.Logger
	if log == nil {
		log = c.log
	}
	return &Worker{c: c, cfg: cfg, log: log.With("worker_id", cfg.WorkerID)}
}

// Run claims and runs jobs until ctx is cancelled, then waits for the jobs
// in flight to be reported and returns nil. It returns an error at once for
// a bad configuration or when the server refuses the worker's credentials.
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.Handler == nil {
		return errors.New("client: Worker: no handler")
	}
	if w.cfg.WorkerID == "" {
		return errors.New("client: Worker: no worker id")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var resumed []WorkerClaim
	if w.cfg.ResumeHeld {
		var err error
		if resumed, err = w.resumable(ctx); err != nil {
			return err
		}
	}
	var jobs sync.WaitGroup
	err := w.loop(ctx, &jobs, resumed)
	if err != nil {
		cancel(err)
	}
	jobs.Wait()
	return err
}

// resumable returns the jobs this worker id still holds that it can run
// (at most Concurrency), each confirmed by a heartbeat that also restarts
// its lease; it releases the others. An error is returned only when the
// server refuses the worker's credentials.
func (w *Worker) resumable(ctx context.Context) ([]WorkerClaim, error) {
	held, err := w.c.WorkerHeld(ctx, w.cfg.WorkerID)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) {
			return nil, fmt.Errorf("client: Worker: held jobs: %w", err)
		}
		w.log.Warn("spine worker: could not read the jobs it holds; starting afresh", "err", err)
		return nil, nil
	}
	var out []WorkerClaim
	for i := range held {
		c := &held[i]
		log := w.log.With("job_id", c.JobID, "attempt_id", c.AttemptID)
		if len(out) == w.cfg.Concurrency {
			w.release(ctx, c, &Release{Reason: "worker restarted with no free slot for it"}, log)
			continue
		}
		if _, err := w.c.WorkerHeartbeat(ctx, &WorkerHeartbeatParams{WorkerID: w.cfg.WorkerID, JobID: c.JobID, LeaseToken: c.LeaseToken}); err != nil {
			log.Warn("spine worker: a held job could not be resumed", "err", err)
			continue
		}
		log.Info("spine worker: resuming a job it held before a restart")
		out = append(out, *c)
	}
	return out, nil
}

// loop starts the resumed jobs, then claims jobs for the free slots, each
// run in its own goroutine (counted in jobs), until ctx is cancelled (nil)
// or the server refuses the worker's credentials (the error).
func (w *Worker) loop(ctx context.Context, jobs *sync.WaitGroup, resumed []WorkerClaim) error {
	// slots holds a token for each job running or being claimed for.
	slots := make(chan struct{}, w.cfg.Concurrency)
	// start runs a job that holds a slot, and frees the slot when done.
	// A job's complete may hand the slot its next job.
	start := func(c *WorkerClaim) {
		jobs.Go(func() {
			defer func() { <-slots }()
			for c != nil {
				c = w.run(ctx, c)
			}
		})
	}
	for i := range resumed {
		slots <- struct{}{}
		start(&resumed[i])
	}
	failures := 0
	for {
		select { // wait for a free slot
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		free := 1 + takeFree(slots)
		params := &WorkerClaimParams{WorkerID: w.cfg.WorkerID, Streams: w.cfg.Streams, MaxWait: w.cfg.MaxWait, Capabilities: w.cfg.Capabilities}
		if free > 1 {
			params.MaxJobs = free
		}
		claim, err := w.c.WorkerClaim(ctx, params)
		var taken []WorkerClaim
		switch {
		case err == nil && len(claim.Jobs) > 0:
			taken = claim.Jobs
		case err == nil && claim.Claimed:
			taken = []WorkerClaim{*claim}
		}
		for i := range taken {
			start(&taken[i])
		}
		for range free - len(taken) {
			<-slots
		}
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrForbidden) {
			return fmt.Errorf("client: Worker: claim: %w", err)
		}
		failures++
		w.log.Warn("spine worker: claim failed", "err", err)
		if !sleepCtx(ctx, w.c.backoff(failures)) {
			return nil
		}
	}
}

// takeFree takes every free slot left without waiting and returns how
// many it took.
func takeFree(slots chan struct{}) int {
	n := 0
	for {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
}

// run executes one claimed job and reports its outcome; next is the job
// its complete claimed for the same slot, if any.
func (w *Worker) run(ctx context.Context, claim *WorkerClaim) (next *WorkerClaim) {
	log := w.log.With("job_id", claim.JobID, "attempt_id", claim.AttemptID)
	if ctx.Err() != nil {
		// Shutting down before it started (a complete's next job): give
		// it back now, its attempt unused.
		w.release(context.WithoutCancel(ctx), claim, &Release{Reason: "worker shut down before starting it"}, log)
		return nil
	}
	rep := &jobReport{w: w, claim: claim}
	hctx, cancel := context.WithCancelCause(context.WithValue(ctx, reportKey{}, rep))
	defer cancel(nil)

	done := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		w.heartbeat(hctx, claim, rep, done, cancel, log)
	}()
	result, herr := w.callHandler(hctx, claim)
	close(done)
	<-hbDone

	if errors.Is(context.Cause(hctx), ErrLeaseLost) {
		log.Warn("spine worker: lease lost; result dropped")
		return nil
	}
	// Report even when shutting down: the job is ours until we say so.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), w.c.timeout)
	defer rcancel()
	if herr == nil {
		params := &WorkerCompleteParams{
			WorkerID: w.cfg.WorkerID, JobID: claim.JobID, AttemptID: claim.AttemptID,
			LeaseToken: claim.LeaseToken, Stream: claim.Stream, MessageID: claim.MessageID, Result: result,
		}
		if ctx.Err() == nil {
			params.Next = &WorkerNextParams{WorkerID: w.cfg.WorkerID, Streams: w.cfg.Streams, Capabilities: w.cfg.Capabilities}
		}
		ack, err := w.c.WorkerComplete(rctx, params)
		ms := ResultMismatches(err)
		if ms == nil {
			if err != nil {
				log.Error("spine worker: complete failed", "err", err)
				return nil
			}
			if ack.Next != nil && ack.Next.Claimed {
				return ack.Next
			}
			return nil
		}
		// The result breaks the job's contract (its result_schema): the
		// handler would answer the same again, so the job fails, not
		// retried, with the mismatches for whoever looks at it.
		log.Warn("spine worker: result does not match the job's result_schema", "mismatches", len(ms))
		herr = &JobError{Code: CodeResultMismatch, Message: mismatchesText(ms)}
	}
	var (
		je  *JobError
		rel *Release
	)
	switch {
	case errors.Is(context.Cause(hctx), ErrJobCancelled):
		je = &JobError{Code: CodeCancelled, Message: "cancelled: " + herr.Error()}
	case errors.As(herr, &rel):
		w.release(rctx, claim, rel, log)
		return nil
	case errors.As(herr, &je):
	case ctx.Err() != nil:
		w.release(rctx, claim, &Release{Reason: "worker shut down: " + herr.Error()}, log)
		return nil
	default:
		je = &JobError{Code: CodeHandlerError, Message: herr.Error(), Retryable: true}
	}
	ack, err := w.c.WorkerFail(rctx, &WorkerFailParams{
		WorkerID: w.cfg.WorkerID, JobID: claim.JobID, AttemptID: claim.AttemptID,
		LeaseToken: claim.LeaseToken, Stream: claim.Stream, MessageID: claim.MessageID, Error: je,
	})
	if err != nil {
		log.Error("spine worker: fail failed", "err", err)
		return nil
	}
	log.Info("spine worker: job failed", "code", je.Code, "requeued", ack.Requeued, "dlq", ack.DLQ)
	return nil
}

// release gives claim's job back as rel says, without using an attempt.
func (w *Worker) release(ctx context.Context, claim *WorkerClaim, rel *Release, log *slog.Logger) {
	ack, err := w.c.WorkerRelease(ctx, &WorkerReleaseParams{
		WorkerID: w.cfg.WorkerID, JobID: claim.JobID, AttemptID: claim.AttemptID, LeaseToken: claim.LeaseToken,
		Stream: claim.Stream, MessageID: claim.MessageID, Reason: rel.Reason, CooldownMS: rel.Cooldown.Milliseconds(), NotForMe: rel.NotForMe,
	})
	if err != nil {
		log.Error("spine worker: release failed", "err", err)
		return
	}
	log.Info("spine worker: job released", "reason", rel.Reason, "not_for_me", rel.NotForMe, "status", ack.Status)
}

func (w *Worker) callHandler(ctx context.Context, claim *WorkerClaim) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &JobError{Code: CodeHandlerPanic, Message: fmt.Sprint(p), Stack: string(debug.Stack()), Retryable: true}
		}
	}()
	return w.cfg.Handler(ctx, claim)
}

// heartbeat extends the lease until done closes. A fencing refusal, or no
// successful heartbeat for a whole lease, cancels the handler with
// ErrLeaseLost.
func (w *Worker) heartbeat(ctx context.Context, claim *WorkerClaim, rep *jobReport, done <-chan struct{},
	cancel context.CancelCauseFunc, log *slog.Logger) {
	interval := claim.HeartbeatInterval()
	ttl := claim.LeaseTTL()
	lastOK := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep.mu.Lock()
		progress := rep.progress
		rep.progress = nil
		rep.mu.Unlock()
		hctx, hcancel := context.WithTimeout(ctx, max(interval, time.Second))
		hb, err := w.c.WorkerHeartbeat(hctx, &WorkerHeartbeatParams{
			WorkerID: w.cfg.WorkerID, JobID: claim.JobID, LeaseToken: claim.LeaseToken, Progress: progress,
		})
		hcancel()
		if err != nil && progress != nil {
			rep.mu.Lock()
			if rep.progress == nil { // not replaced meanwhile: try again next time
				rep.progress = progress
			}
			rep.mu.Unlock()
		}
		switch {
		case err == nil && hb.Cancel:
			log.Info("spine worker: job cancelled by head; stopping its handler")
			cancel(ErrJobCancelled)
			return
		case err == nil:
			lastOK = time.Now()
		case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrForbidden):
			log.Warn("spine worker: heartbeat refused", "err", err)
			cancel(fmt.Errorf("%w: %v", ErrLeaseLost, err))
			return
		default:
			log.Warn("spine worker: heartbeat failed", "err", err)
			if ttl > 0 && time.Since(lastOK) >= ttl {
				cancel(fmt.Errorf("%w: no heartbeat for %v", ErrLeaseLost, ttl))
				return
			}
		}
	}
}

// sleepCtx waits d or until ctx is done; it reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
