package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/client"
	"github.com/spine-queue/spine/internal/testcluster"
)

func (lc *loadClient) create(ctx context.Context, n node) {
	key, maxAtt := lc.pendingKey, lc.pendingMax
	if key == "" {
		lc.creates++
		key = fmt.Sprintf("chaos-%d-c%d-%d", lc.r.cfg.Seed, lc.id, lc.creates)
		maxAtt = 50
		if lc.rng.IntN(5) == 0 {
			maxAtt = 3 // some jobs run out of attempts: dead, max_attempts, redrive
		}
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpCreate, n, "", fmt.Sprintf("max=%d", maxAtt))
	defer cancel()
	op.Key = key
	payload, _ := json.Marshal(map[string]any{"client": lc.id, "key": key})
	j, err := lc.api(n, testcluster.HeadToken).JobCreate(cctx, &client.JobCreateParams{
		// No retry backoff: the model (linfsm.go) has a failed job
		// with requeue claimable at once.
		Payload: payload, MaxAttempts: maxAtt, IdempotencyKey: key, Backoff: &client.Backoff{}})
	if err == nil {
		op.JobID, op.View = j.ID, viewOf(j)
		if j.Duplicate {
			op.Answer = "dup"
		}
		lc.pendingKey = ""
	} else {
		lc.pendingKey, lc.pendingMax = key, maxAtt
	}
	lc.finish(op, cp, err)
	if err == nil {
		lc.r.pool.see(j.ID, string(j.Status))
	} else if op.Outcome == Refused && op.Status/100 == 4 {
		lc.pendingKey = "" // refused for good: a new key next time
	}
}

func (lc *loadClient) grant(op *Op, job, token, attempt string, worker bool) *lease {
	l := &lease{job: job, token: token, attempt: attempt, index: op.Index, worker: worker}
	l.label = lc.r.hist.leaseLabel(attempt, op.Index)
	op.Attempt = attempt
	lc.held = append(lc.held, l)
	return l
}

func (lc *loadClient) claim(ctx context.Context, n node) {
	id := lc.r.pool.pick(lc.rng, "queued")
	if id == "" {
		return
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpClaim, n, id, "")
	defer cancel()
	j, err := lc.api(n, lc.token).JobClaim(cctx, id, &client.JobClaimParams{WorkerID: lc.workerID})
	if err == nil {
		op.View = viewOf(j)
	}
	lc.finish(op, cp, err)
	if err == nil && j.LeaseToken != "" {
		l := lc.grant(op, id, j.LeaseToken, j.AttemptID, false)
		op.Answer = l.label
	}
}

func (lc *loadClient) workerClaim(ctx context.Context, n node) {
	op, cctx, cp, cancel := lc.begin(ctx, OpWorkerClaim, n, "", "worker")
	defer cancel()
	wc, err := lc.api(n, lc.token).WorkerClaim(cctx, &client.WorkerClaimParams{WorkerID: lc.workerID, MaxWait: lc.r.cfg.MaxWait})
	if err == nil && wc.Claimed {
		op.JobID = wc.JobID
	}
	lc.finish(op, cp, err)
	if err != nil {
		return
	}
	if !wc.Claimed {
		op.Answer = "claimed:false"
		return
	}
	l := lc.grant(op, wc.JobID, wc.LeaseToken, wc.AttemptID, true)
	op.Answer = fmt.Sprintf("claimed %s attempt %d/%d", l.label, wc.Attempt, wc.MaxAttempts)
	lc.r.pool.see(wc.JobID, string(client.JobStatusRunning))
}

// nextClaim records the claim a worker complete's "next" made as a worker
// claim of its own, within the complete's call and answer: the job it
// answered (held from then on) or nothing. When the complete's outcome is
// unknown, or the Go client repeated it (repeated, after a lost answer
// whose claim is then never seen), a claim of unknown outcome is recorded
// too: it accounts for at most one job running that no answer named.
func (lc *loadClient) nextClaim(done *Op, a *client.WorkerAck, repeated bool) {
	if done.Outcome == Refused && !repeated {
		return // a refused complete claims nothing
	}
	if done.Outcome == Unknown || repeated {
		lc.r.hist.add(&Op{Client: lc.id, Kind: OpWorkerClaim, Node: done.Node, Args: "worker,next", Start: done.Start, End: done.End,
			Outcome: Unknown, Code: "next of a repeated complete"})
	}
	if done.Outcome != OK || a == nil || a.Next == nil {
		return
	}
	op := &Op{Client: lc.id, Kind: OpWorkerClaim, Node: done.Node, Args: "worker,next", Start: done.Start, End: done.End,
		Outcome: OK, Status: done.Status, Index: done.Index}
	if !a.Next.Claimed {
		op.Answer = "claimed:false"
		lc.r.hist.add(op)
		return
	}
	op.JobID = a.Next.JobID
	l := lc.grant(op, a.Next.JobID, a.Next.LeaseToken, a.Next.AttemptID, true)
	op.Answer = fmt.Sprintf("claimed %s attempt %d/%d", l.label, a.Next.Attempt, a.Next.MaxAttempts)
	lc.r.hist.add(op)
	lc.r.pool.see(a.Next.JobID, string(client.JobStatusRunning))
}

// pickLease returns lease i of held (or of old, when stale), and the
// argument text naming it.
func (lc *loadClient) pickLease(i int, stale bool) (*lease, string) {
	if stale {
		l := lc.old[i]
		return l, l.label + "(old)"
	}
	return lc.held[i], lc.held[i].label
}

// retire moves a held lease to the old ones: it is over (or may be).
func (lc *loadClient) retire(l *lease) {
	for i, h := range lc.held {
		if h == l {
			lc.held = append(lc.held[:i], lc.held[i+1:]...)
			break
		}
	}
	lc.old = append(lc.old, l)
	if len(lc.old) > maxOld {
		lc.old = lc.old[1:]
	}
}

// after decides what becomes of a held lease after a call on it: a refusal
// ends it, as does an acknowledged end (done below by the caller).
func (lc *loadClient) after(op *Op, l *lease, stale bool) {
	if stale {
		return
	}
	if op.Outcome == Refused && op.Status/100 == 4 {
		lc.retire(l)
	}
}

// useWorkerRoute chooses between the v0 and the worker-contract routes:
// mostly the one the lease came from.
func (lc *loadClient) useWorkerRoute(l *lease) bool {
	if l.worker {
		return lc.rng.IntN(4) != 0
	}
	return lc.rng.IntN(4) == 0
}

func (lc *loadClient) heartbeat(ctx context.Context, n node, i int, stale bool) {
	l, args := lc.pickLease(i, stale)
	worker := lc.useWorkerRoute(l)
	variant := lc.rng.IntN(3) // 0: Go client, 1: X-Spine-Min-Index, 2: ?consistent (v0 only)
	withAttempt := !worker && lc.rng.IntN(10) < 7
	if withAttempt {
		args += ",+attempt"
	}
	if worker {
		args += ",worker"
		if variant == 2 {
			variant = 1
		}
	}
	minIndex := uint64(0)
	switch variant {
	case 1:
		args += ",min-index"
		minIndex = max(l.index, lc.maxIndex)
	case 2:
		args += ",consistent"
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpHeartbeat, n, l.job, args)
	defer cancel()
	op.Attempt = l.attempt
	attempt := ""
	if withAttempt {
		attempt = l.attempt
	}
	switch {
	case worker && variant == 0:
		_, err := lc.api(n, lc.token).WorkerHeartbeat(cctx, &client.WorkerHeartbeatParams{WorkerID: lc.workerID, JobID: l.job, LeaseToken: l.token})
		lc.finish(op, cp, err)
	case worker:
		lc.raw(cctx, op, n, http.MethodPost, "/internal/worker/heartbeat", lc.token,
			&api.WorkerHeartbeatRequest{WorkerID: lc.workerID, JobID: l.job, LeaseToken: l.token}, minIndex)
	case variant == 0:
		j, err := lc.api(n, lc.token).JobHeartbeat(cctx, l.job, &client.JobLeaseParams{LeaseToken: l.token, AttemptID: attempt})
		if err == nil {
			op.View = viewOf(j)
		}
		lc.finish(op, cp, err)
	default:
		path := "/jobs/" + url.PathEscape(l.job) + "/heartbeat"
		if variant == 2 {
			path += "?consistent"
		}
		body := &api.JobHeartbeatRequest{LeaseToken: l.token, AttemptID: attempt}
		if data, ok := lc.raw(cctx, op, n, http.MethodPost, path, lc.token, body, minIndex); ok {
			lc.rawJob(op, data)
		}
	}
	lc.after(op, l, stale)
}

func (lc *loadClient) complete(ctx context.Context, n node, i int, stale bool) {
	l, args := lc.pickLease(i, stale)
	worker := lc.useWorkerRoute(l)
	withAttempt := worker || lc.rng.IntN(10) < 7
	if withAttempt {
		args += ",+attempt"
	}
	if worker {
		args += ",worker"
	}
	// Half the worker completes also claim the next job.
	next := worker && lc.rng.IntN(2) == 0
	if next {
		args += ",next"
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpComplete, n, l.job, args)
	defer cancel()
	op.Attempt = l.attempt
	result := json.RawMessage(`{"summary":"chaos"}`)
	var err error
	if worker {
		var a *client.WorkerAck
		p := &client.WorkerCompleteParams{WorkerID: lc.workerID, JobID: l.job, AttemptID: l.attempt, LeaseToken: l.token, Result: result}
		if next {
			p.Next = &client.WorkerNextParams{}
		}
		a, err = lc.api(n, lc.token).WorkerComplete(cctx, p)
		if err == nil && !a.OK {
			err = fmt.Errorf("worker complete answered ok:false")
		}
		if next {
			defer func() { lc.nextClaim(op, a, cp.writes.Load() > 1) }()
		}
	} else {
		attempt := ""
		if withAttempt {
			attempt = l.attempt
		}
		var j *client.Job
		j, err = lc.api(n, lc.token).JobComplete(cctx, l.job, &client.JobCompleteParams{Result: result, LeaseToken: l.token, AttemptID: attempt})
		if err == nil {
			op.View = viewOf(j)
		}
	}
	lc.finish(op, cp, err)
	if op.Outcome == OK {
		lc.r.pool.see(l.job, string(client.JobStatusDone))
		if !stale {
			lc.retire(l)
		}
		return
	}
	lc.after(op, l, stale)
}

func (lc *loadClient) fail(ctx context.Context, n node, i int, stale bool) {
	l, args := lc.pickLease(i, stale)
	worker := lc.useWorkerRoute(l)
	requeue := lc.rng.IntN(3) != 0
	args += fmt.Sprintf(",requeue=%v", requeue)
	withAttempt := worker || lc.rng.IntN(10) < 7
	if withAttempt {
		args += ",+attempt"
	}
	if worker {
		args += ",worker"
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpFail, n, l.job, args)
	defer cancel()
	op.Attempt = l.attempt
	jerr := &client.JobError{Code: "chaos", Message: "injected failure", Retryable: requeue}
	var err error
	if worker {
		var a *client.WorkerAck
		a, err = lc.api(n, lc.token).WorkerFail(cctx, &client.WorkerFailParams{WorkerID: lc.workerID,
			JobID: l.job, AttemptID: l.attempt, LeaseToken: l.token, Error: jerr})
		if err == nil {
			op.Answer = fmt.Sprintf("requeued=%v dlq=%v", a.Requeued, a.DLQ)
		}
	} else {
		attempt := ""
		if withAttempt {
			attempt = l.attempt
		}
		var j *client.Job
		j, err = lc.api(n, lc.token).JobFail(cctx, l.job, &client.JobFailParams{Error: jerr, Requeue: &requeue,
			LeaseToken: l.token, AttemptID: attempt})
		if err == nil {
			op.View = viewOf(j)
		}
	}
	lc.finish(op, cp, err)
	if op.Outcome == OK && worker && !requeue {
		lc.r.pool.see(l.job, string(client.JobStatusFailed))
	}
	if op.Outcome == OK && !stale {
		lc.retire(l)
		return
	}
	lc.after(op, l, stale)
}

func (lc *loadClient) release(ctx context.Context, n node, i int, stale bool) {
	l, args := lc.pickLease(i, stale)
	withAttempt := lc.rng.IntN(10) < 7
	if withAttempt {
		args += ",+attempt"
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpRelease, n, l.job, args)
	defer cancel()
	op.Attempt = l.attempt
	attempt := ""
	if withAttempt {
		attempt = l.attempt
	}
	j, err := lc.api(n, lc.token).JobRelease(cctx, l.job, &client.JobReleaseParams{Reason: "chaos", LeaseToken: l.token, AttemptID: attempt})
	if err == nil {
		op.View = viewOf(j)
	}
	lc.finish(op, cp, err)
	if op.Outcome == OK && !stale {
		lc.retire(l)
		return
	}
	lc.after(op, l, stale)
}

func (lc *loadClient) redrive(ctx context.Context, n node) {
	id := lc.r.pool.pick(lc.rng, "failed", "dead")
	if id == "" {
		return
	}
	op, cctx, cp, cancel := lc.begin(ctx, OpRedrive, n, id, "")
	defer cancel()
	j, err := lc.api(n, testcluster.HeadToken).DLQRedrive(cctx, id)
	if err == nil {
		op.View = viewOf(j)
	}
	lc.finish(op, cp, err)
}

func (lc *loadClient) get(ctx context.Context, n node) {
	id := lc.r.pool.pick(lc.rng)
	if id == "" {
		return
	}
	op, cctx, _, cancel := lc.begin(ctx, OpGet, n, id, "consistent")
	defer cancel()
	if data, ok := lc.raw(cctx, op, n, http.MethodGet, "/jobs/"+url.PathEscape(id)+"?consistent", testcluster.HeadToken, nil, 0); ok {
		lc.rawJob(op, data)
	}
}
