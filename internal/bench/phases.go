package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func (r *runner) phaseCreate(ctx context.Context) error {
	cfg := r.cfg
	stream := r.runID + "-a"
	pctx, pcancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer pcancel()
	var st prodStats
	var next atomic.Int64
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < cfg.Producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.produce(pctx, pcancel, g, stream, &next, int64(cfg.Jobs), &st, nil)
		}(g)
	}
	wg.Wait()
	el := time.Since(start)
	timedOut := pctx.Err() == context.DeadlineExceeded
	res := r.res
	cost := costDone()
	res.CreateServerCPU = cost.cpu
	s := st.lat.summary()
	res.CreateOK, res.CreateErrors = st.ok.Load(), st.errN.Load()
	if miss := int64(cfg.Jobs) - res.CreateOK - res.CreateErrors; miss > 0 {
		res.CreateErrors += miss // not attempted before the phase timeout
	}
	res.CreateSeconds = round3(el.Seconds())
	res.CreateJobsPerS = perSec(res.CreateOK, el)
	res.CreateP50, res.CreateP99, res.CreateMean, res.CreateMax = s.P50, s.P99, s.Mean, s.Max
	res.CreateCPUPerJob = perJobMs(res.CreateServerCPU, res.CreateOK)
	cursor := st.minIdx.Load()
	if cursor > 0 {
		cursor--
	}
	q, err := r.a.countJobs(ctx, stream, "queued", cursor, cfg.Jobs/1000+1000)
	if err != nil {
		return fmt.Errorf("after create: %w", err)
	}
	res.QueuedAfterA = q
	if int64(q) != res.CreateOK {
		r.printf("    verify: %d jobs queued in %s, but %d creates were acknowledged\n", q, stream, res.CreateOK)
		res.VerifyErrors += abs64(int64(q) - res.CreateOK)
	}
	res.CreateBatch = cost.perBatch()
	res.CreateAppendMs = cost.appendMs()
	r.printf("[A create]    %d jobs (%d errors) in %.3fs => %.0f jobs/s | create ms p50 %.3f p99 %.3f mean %.3f max %.3f | server CPU %.2fs (%.3f ms/job) | queued %d\n%s",
		res.CreateOK, res.CreateErrors, el.Seconds(), res.CreateJobsPerS, s.P50, s.P99, s.Mean, s.Max,
		res.CreateServerCPU, res.CreateCPUPerJob, q, cost.raft(res.CreateOK))
	if st.eb.err != nil {
		r.printf("    first create error: %v\n", st.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("phase A timed out after %v with %d/%d created", cfg.PhaseTimeout, res.CreateOK, cfg.Jobs)
	}
	if res.CreateOK == 0 {
		return fmt.Errorf("phase A created no jobs: %v", st.eb.err)
	}
	r.minA = st.minIdx.Load()
	return nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// phaseLifecycle processes the jobs phase A created. With cleanupOnly (phase
// "create") it only drains them and reports nothing but errors.
func (r *runner) phaseLifecycle(ctx context.Context, cleanupOnly bool) error {
	cfg := r.cfg
	stream := r.runID + "-a"
	res := r.res
	var target atomic.Int64
	target.Store(int64(res.QueuedAfterA))
	pctx, pcancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer pcancel()
	var st workStats
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < cfg.Workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.work(ctx, pctx, pcancel, g, stream, &target, start, &st)
		}(g)
	}
	go r.watchStall(ctx, pctx, pcancel, stream, st.errN.Load, func() bool { return true }, st.completed.Load)
	wg.Wait()
	timedOut := pctx.Err() == context.DeadlineExceeded
	pcancel()
	el := time.Since(start)
	if e := st.endNs.Load(); e > 0 {
		el = time.Duration(e)
	}
	cost := costDone()
	cpu := cost.cpu
	left, verr := r.verifyDone(ctx, stream, r.minA, int(target.Load()))
	if verr != nil {
		return fmt.Errorf("after lifecycle: %w", verr)
	}
	if cleanupOnly {
		r.printf("[cleanup]     %d jobs of phase A completed (not measured; %d errors, %d not done)\n", st.completed.Load(), st.errN.Load(), left)
		res.CreateErrors += st.errN.Load() // reported with the phase that ran
		res.VerifyErrors += int64(left)
		if st.eb.err != nil {
			r.printf("    first cleanup error: %v\n", st.eb.err)
		}
		return ctx.Err()
	}
	res.LifecycleServerCPU = cpu
	res.LifecycleCompleted, res.LifecycleErrors = st.completed.Load(), st.errN.Load()
	res.LifecycleRedeliv, res.LifecycleEmpty = st.redeliv.Load(), st.empty.Load()
	res.LifecycleSeconds = round3(el.Seconds())
	res.LifecycleJobsPerS = perSec(res.LifecycleCompleted, el)
	c, h, p, j := st.claimL.summary(), st.hbL.summary(), st.compL.summary(), st.jobL.summary()
	res.ClaimP50, res.ClaimP99, res.ClaimMax = c.P50, c.P99, c.Max
	res.HeartbeatP50, res.HeartbeatP99, res.HeartbeatMax = h.P50, h.P99, h.Max
	res.CompleteP50, res.CompleteP99, res.CompleteMax = p.P50, p.P99, p.Max
	res.LifecycleJobP50, res.LifecycleJobP99 = j.P50, j.P99
	res.LifecycleCPUPerJob = perJobMs(cpu, res.LifecycleCompleted)
	res.LifecycleBatch = cost.perBatch()
	res.LifecycleAppendMs = cost.appendMs()
	res.HeartbeatsOvertaken = st.hbOvertaken.Load()
	hbNote := ""
	if n := int64(h.N) + res.HeartbeatsOvertaken; n > 0 {
		res.HeartbeatsLocal = round3(float64(cost.localHB) / float64(n))
		hbNote = fmt.Sprintf(" (%.0f%% answered by the node reached", 100*res.HeartbeatsLocal)
		if res.HeartbeatsOvertaken > 0 {
			hbNote += fmt.Sprintf("; %d overtaken by their job's complete", res.HeartbeatsOvertaken)
		}
		hbNote += ")"
	}
	res.LeftAfterB = left
	res.VerifyErrors += int64(left)
	r.printf("[B lifecycle] %d/%d jobs completed (%d errors, %d redeliveries, %d empty claims) in %.3fs => %.0f jobs/s\n"+
		"              claim ms p50 %.3f p99 %.3f max %.3f | heartbeat (%s) ms p50 %.3f p99 %.3f max %.3f%s | complete ms p50 %.3f p99 %.3f max %.3f\n"+
		"              per job (claim start->complete ack) ms p50 %.3f p99 %.3f | server CPU %.2fs (%.3f ms/job) | not done %d\n%s",
		res.LifecycleCompleted, target.Load(), res.LifecycleErrors, res.LifecycleRedeliv, res.LifecycleEmpty, el.Seconds(), res.LifecycleJobsPerS,
		c.P50, c.P99, c.Max, cfg.Heartbeat, h.P50, h.P99, h.Max, hbNote, p.P50, p.P99, p.Max, j.P50, j.P99, cpu, res.LifecycleCPUPerJob, left, cost.raft(res.LifecycleCompleted))
	if st.eb.err != nil {
		r.printf("    first lifecycle error: %v\n", st.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if timedOut {
		return fmt.Errorf("phase B timed out after %v with %d/%d completed", cfg.PhaseTimeout, res.LifecycleCompleted, target.Load())
	}
	return nil
}

// mixedStats is what one mixed round (phase C or the warm-up) measured.
type mixedStats struct {
	p        prodStats
	w        workStats
	el       time.Duration
	timedOut bool
	target   int64
}

func (m *mixedStats) errors() int64    { return m.p.errN.Load() + m.w.errN.Load() }
func (m *mixedStats) minIndex() uint64 { return m.p.minIdx.Load() }

// mixedRound runs producers and workers at once for n jobs on stream.
func (r *runner) mixedRound(ctx, bound context.Context, stream string, n int) *mixedStats {
	cfg := r.cfg
	pctx, pcancel := context.WithTimeout(bound, cfg.PhaseTimeout)
	defer pcancel()
	m := &mixedStats{}
	var target, next atomic.Int64
	target.Store(int64(n))
	var prodsDone atomic.Bool
	start := time.Now()
	var wg, pwg sync.WaitGroup
	for g := 0; g < cfg.Workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r.work(ctx, pctx, pcancel, g, stream, &target, start, &m.w)
		}(g)
	}
	for g := 0; g < cfg.Producers; g++ {
		pwg.Add(1)
		go func(g int) {
			defer pwg.Done()
			r.produce(pctx, pcancel, g, stream, &next, int64(n), &m.p, &target)
		}(g)
	}
	go r.watchStall(ctx, pctx, pcancel, stream, m.errors, prodsDone.Load, m.w.completed.Load)
	pwg.Wait()
	prodsDone.Store(true)
	if m.w.completed.Load()+m.w.gaveUp.Load() >= target.Load() {
		pcancel() // every create failed, or all is done already
	}
	wg.Wait()
	m.timedOut = pctx.Err() == context.DeadlineExceeded && bound.Err() == nil
	pcancel()
	m.el = time.Since(start)
	if e := m.w.endNs.Load(); e > 0 {
		m.el = time.Duration(e)
	}
	m.target = target.Load()
	return m
}

func (r *runner) phaseMixed(ctx context.Context) error {
	cfg := r.cfg
	stream := r.runID + "-c"
	res := r.res
	costDone, err := r.sampleCost(ctx)
	if err != nil {
		return err
	}
	m := r.mixedRound(ctx, ctx, stream, cfg.MixedJobs)
	cost := costDone()
	cpu := cost.cpu
	res.MixedServerCPU = cpu
	res.MixedCreated, res.MixedCompleted = m.p.ok.Load(), m.w.completed.Load()
	res.MixedErrors, res.MixedRedeliv = m.errors(), m.w.redeliv.Load()
	if miss := int64(cfg.MixedJobs) - res.MixedCreated - m.p.errN.Load(); miss > 0 {
		res.MixedErrors += miss
	}
	res.MixedSeconds = round3(m.el.Seconds())
	res.MixedJobsPerS = perSec(res.MixedCompleted, m.el)
	e, c, cl, p := m.w.e2eL.summary(), m.p.lat.summary(), m.w.claimL.summary(), m.w.compL.summary()
	res.MixedE2EP50, res.MixedE2EP99, res.MixedE2EMax = e.P50, e.P99, e.Max
	res.MixedCreateP50, res.MixedCreateP99 = c.P50, c.P99
	res.MixedClaimP50, res.MixedClaimP99 = cl.P50, cl.P99
	res.MixedCompleteP50, res.MixedCompleteP99 = p.P50, p.P99
	res.MixedCPUPerJob = perJobMs(cpu, res.MixedCompleted)
	res.MixedBatch = cost.perBatch()
	res.MixedAppendMs = cost.appendMs()
	left, verr := r.verifyDone(ctx, stream, m.minIndex(), int(res.MixedCreated))
	if verr != nil {
		return fmt.Errorf("after mixed: %w", verr)
	}
	res.LeftAfterC = left
	res.VerifyErrors += int64(left)
	r.printf("[C mixed]     %d created, %d completed (%d errors, %d redeliveries) in %.3fs => %.0f jobs/s end-to-end\n"+
		"              e2e (create sent->complete ack) ms p50 %.3f p99 %.3f max %.3f | create ms p50 %.3f p99 %.3f | claim ms p50 %.3f p99 %.3f | complete ms p50 %.3f p99 %.3f\n"+
		"              server CPU %.2fs (%.3f ms/job) | not done %d\n%s",
		res.MixedCreated, res.MixedCompleted, res.MixedErrors, res.MixedRedeliv, m.el.Seconds(), res.MixedJobsPerS,
		e.P50, e.P99, e.Max, c.P50, c.P99, cl.P50, cl.P99, p.P50, p.P99, cpu, res.MixedCPUPerJob, left, cost.raft(res.MixedCompleted))
	if m.p.eb.err != nil {
		r.printf("    first mixed create error: %v\n", m.p.eb.err)
	}
	if m.w.eb.err != nil {
		r.printf("    first mixed worker error: %v\n", m.w.eb.err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.timedOut {
		return fmt.Errorf("phase C timed out after %v with %d/%d completed", cfg.PhaseTimeout, res.MixedCompleted, m.target)
	}
	return nil
}

// ownTimerSlack is this process's timer slack in nanoseconds, from
// /proc/self/timerslack_ns, or 0 where that file does not exist.
func ownTimerSlack() int64 {
	b, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
