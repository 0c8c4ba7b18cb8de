package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

type prodStats struct {
	ok, errN atomic.Int64
	lat      lat
	eb       errBox
	minIdx   atomic.Uint64
}

func (p *prodStats) noteIndex(idx uint64) {
	for {
		cur := p.minIdx.Load()
		if cur != 0 && cur <= idx {
			return
		}
		if p.minIdx.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// produce creates jobs until the shared counter reaches total; each failed
// create lowers *target (if set) so the workers do not wait for it.
func (r *runner) produce(ctx context.Context, stop context.CancelFunc, g int, stream string, next *atomic.Int64, total int64, st *prodStats, target *atomic.Int64) {
	defer func() {
		if v := recover(); v != nil {
			st.errN.Add(1)
			st.eb.set(fmt.Errorf("producer panic: %v", v))
		}
	}()
	local := make([]time.Duration, 0, int(total)/r.cfg.Producers+16)
	defer func() { st.lat.addAll(local) }()
	buf := make([]byte, 0, r.cfg.Payload+128)
	for k := int64(0); k <= total; k++ {
		i := next.Add(1) - 1
		if i >= total || ctx.Err() != nil {
			return
		}
		node := r.node(g, 0, int(k))
		t0 := time.Now()
		buf = createBody(buf, stream, int64(t0.Sub(r.epoch)), i, r.cfg.Payload)
		j, err := r.a.create(ctx, node, buf)
		d := time.Since(t0)
		if err != nil {
			if ctx.Err() != nil {
				return // the phase was stopped; not this request's fault
			}
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("create via %s: %w", r.cfg.Addrs[node], err))
			if target != nil {
				target.Add(-1)
			}
			continue
		}
		st.ok.Add(1)
		st.noteIndex(j.CreateIndex)
		local = append(local, d)
	}
}

// ---------------------------------------------------------------- workers

type workStats struct {
	completed, gaveUp, errN, redeliv, empty, dup atomic.Int64
	hbOvertaken                                  atomic.Int64 // async heartbeats answered after the job's complete
	endNs                                        atomic.Int64
	claimL, hbL, compL, jobL, e2eL               lat
	eb                                           errBox
}

// work is one worker: claim (long-poll up to ClaimWait) → heartbeat →
// complete, until completed+gaveUp reaches *target or pctx ends. The
// heartbeat and complete of a claimed job run under ctx (the whole run), so
// a job claimed just before the phase ends is still finished.
func (r *runner) work(ctx, pctx context.Context, stop context.CancelFunc, g int, stream string, target *atomic.Int64,
	start time.Time, st *workStats) {
	defer func() {
		if v := recover(); v != nil {
			st.errN.Add(1)
			st.eb.set(fmt.Errorf("worker panic: %v", v))
		}
	}()
	var claimD, hbD, compD, jobD, e2eD []time.Duration
	// Async heartbeats still waiting for their answer: the worker returns
	// only once they have it, so a phase's summary counts every one.
	var hbs sync.WaitGroup
	defer hbs.Wait()
	defer func() {
		st.claimL.addAll(claimD)
		st.hbL.addAll(hbD)
		st.compL.addAll(compD)
		st.jobL.addAll(jobD)
		st.e2eL.addAll(e2eD)
	}()
	wid := fmt.Sprintf("%s-w%d", r.runID, g)
	done := func() bool { return st.completed.Load()+st.gaveUp.Load() >= target.Load() }
	// held is the job the last complete claimed as the next one (and
	// heldAt when that complete was sent): it is worked before anything
	// else, and completed even when the phase is over, so no job is left
	// running.
	var held *claim
	var heldAt time.Time
	maxIter := 10*target.Load() + 10000
	k := 0
	for iter := int64(0); iter < maxIter; iter++ {
		if held == nil && (pctx.Err() != nil || done()) {
			return
		}
		var c *claim
		var t0 time.Time
		if held != nil {
			c, t0, held = held, heldAt, nil
		} else {
			node := r.node(g, 1, k)
			k++
			t0 = time.Now()
			var err error
			c, err = r.a.claim(pctx, node, wid, stream, r.cfg.ClaimWait)
			t1 := time.Now()
			if err != nil {
				if pctx.Err() != nil {
					return // the phase ended while the claim waited
				}
				r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("claim via %s: %w", r.cfg.Addrs[node], err))
				sleepCtx(pctx, 10*time.Millisecond)
				continue
			}
			if !c.Claimed {
				st.empty.Add(1)
				continue
			}
			claimD = append(claimD, t1.Sub(t0))
		}
		if c.Attempt > 1 {
			st.redeliv.Add(1)
		}
		var completed chan<- bool // async heartbeat: told whether the complete succeeded
		switch r.cfg.Heartbeat {
		case "sync":
			node := r.node(g, 1, k)
			k++
			th := time.Now()
			err := r.a.heartbeat(ctx, node, wid, c)
			if err != nil {
				r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("heartbeat via %s: %w", r.cfg.Addrs[node], err))
			} else {
				hbD = append(hbD, time.Since(th))
			}
		case "async":
			node := r.node(g, 1, k)
			k++
			ch := make(chan bool, 1)
			completed = ch
			hbs.Add(1)
			go func(node int) {
				defer hbs.Done()
				r.asyncHeartbeat(ctx, stop, node, wid, c, ch, st)
			}(node)
		}
		node := r.node(g, 1, k)
		k++
		// The next job is asked for only while the phase runs (the last
		// jobs' completes take none), and without a wait: with none ready
		// the worker long-polls with a claim, and a complete's time is
		// never a wait.
		askNext := pctx.Err() == nil && !done()
		tc := time.Now()
		dup, next, err := r.a.complete(ctx, node, wid, c, stream, askNext)
		td := time.Now()
		if completed != nil {
			completed <- err == nil
		}
		if err != nil {
			st.gaveUp.Add(1)
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("complete via %s: %w", r.cfg.Addrs[node], err))
			if done() {
				stop()
			}
			continue
		}
		if next != nil && next.Claimed {
			held, heldAt = next, tc
		} else if next != nil {
			st.empty.Add(1)
		}
		if dup {
			st.dup.Add(1)
			r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("complete of job %s answered duplicate", c.JobID))
		}
		compD = append(compD, td.Sub(tc))
		jobD = append(jobD, td.Sub(t0))
		if c.Payload.T > 0 {
			e2eD = append(e2eD, td.Sub(r.epoch.Add(time.Duration(c.Payload.T))))
		}
		n := st.completed.Add(1)
		if n+st.gaveUp.Load() >= target.Load() {
			if st.endNs.Load() == 0 {
				st.endNs.Store(int64(td.Sub(start)))
			}
			stop()
		}
	}
}

// asyncHeartbeat sends a heartbeat that the worker's complete does not wait
// for, as peerbench's default in-progress ack (-hb async) and a claw
// heartbeating beside its work. Its answer is still checked and timed. The
// complete may overtake it: a 409 that arrives for a job whose complete
// succeeded (completed receives true) is counted as overtaken, not as an
// error; any other failure is an error.
func (r *runner) asyncHeartbeat(ctx context.Context, stop context.CancelFunc, node int, wid string, c *claim,
	completed <-chan bool, st *workStats) {
	th := time.Now()
	err := r.a.heartbeat(ctx, node, wid, c)
	if err == nil {
		st.hbL.add(time.Since(th))
		return
	}
	var he *httpError
	if errors.As(err, &he) && he.Status == http.StatusConflict && <-completed {
		st.hbOvertaken.Add(1)
		return
	}
	r.countErr(&st.errN, &st.eb, stop, fmt.Errorf("heartbeat via %s: %w", r.cfg.Addrs[node], err))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// watchStall ends a phase whose remaining jobs can never be completed: once
// there were errors, producers are done and no job completed for 3 s, it
// asks the server whether the stream still has queued jobs, and stops the
// phase if not (the rest are stuck running under a lease; verification
// reports them). Bounded by pctx.
func (r *runner) watchStall(ctx, pctx context.Context, stop context.CancelFunc, stream string, errs func() int64,
	prodDone func() bool, completed func() int64) {
	last, lastAt := completed(), time.Now()
	for i := 0; i < 1_000_000 && pctx.Err() == nil; i++ { // 500 ms a round: bounded by pctx long before the count
		sleepCtx(pctx, 500*time.Millisecond)
		if c := completed(); c != last {
			last, lastAt = c, time.Now()
			continue
		}
		if errs() == 0 || !prodDone() || time.Since(lastAt) < 3*time.Second {
			continue
		}
		n, err := r.a.countJobs(ctx, stream, "queued", 0, 1000)
		if err == nil && n == 0 {
			r.printf("    no progress for %v and nothing queued: ending the phase early\n", time.Since(lastAt).Round(time.Millisecond))
			stop()
			return
		}
		lastAt = time.Now()
	}
}

// ---------------------------------------------------------------- verification

// verifyDone checks on the server that stream holds want done jobs and
// nothing queued or running; it returns how many of want are not done.
func (r *runner) verifyDone(ctx context.Context, stream string, minIndex uint64, want int) (notDone int, err error) {
	cursor := uint64(0)
	if minIndex > 0 {
		cursor = minIndex - 1
	}
	maxPages := want/1000 + 1000
	done, err := r.a.countJobs(ctx, stream, "done", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	q, err := r.a.countJobs(ctx, stream, "queued", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	run, err := r.a.countJobs(ctx, stream, "running", cursor, maxPages)
	if err != nil {
		return 0, err
	}
	if q != 0 || run != 0 || done != want {
		r.printf("    verify %s: %d done (want %d), %d queued, %d running\n", stream, done, want, q, run)
	}
	// Jobs of want that are not done (queued or running ones are among
	// them), more done jobs than created, and queued/running jobs beyond
	// the missing ones all count.
	notDone = want - done
	if notDone < 0 {
		notDone = -notDone
	}
	if extra := q + run - (want - done); extra > 0 {
		notDone += extra
	}
	return notDone, nil
}

// ---------------------------------------------------------------- phases
