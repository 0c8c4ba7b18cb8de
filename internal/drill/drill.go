package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// Run runs one drill and returns its report. The error is non-nil when the
// drill could not be carried out (the cluster did not start, a kill did not
// recover in time, ctx ended, the hard timeout passed); the report then
// holds what was measured so far. Violations of the guarantees are not
// errors: they are in the report (see [Report.OK]). Every process the drill
// started is stopped, by pid, before Run returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	began := time.Now()
	rep = &Report{Seed: cfg.Seed, Nodes: cfg.Nodes, KillsPlanned: cfg.Kills,
		Producers: cfg.Producers, Workers: cfg.Workers}
	defer func() {
		rep.Duration = time.Since(began)
		if err != nil {
			rep.Err = err.Error()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	dir, tmp := cfg.Dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "spine-drill-*"); err != nil {
			return rep, err
		}
		tmp = true
	}
	rep.Dir = dir
	defer func() {
		if tmp && !cfg.KeepDir && err == nil && rep.OK() {
			os.RemoveAll(dir)
			rep.Dir = ""
		}
	}()

	cfg.Logf("drill: seed %d, %d nodes, %d kills, %d producers, %d workers, data in %s",
		cfg.Seed, cfg.Nodes, cfg.Kills, cfg.Producers, cfg.Workers, dir)
	c, err := testcluster.Start(testcluster.Options{Binary: cfg.Binary, Dir: dir, Nodes: cfg.Nodes,
		Env: cfg.nodeEnv(), Logf: cfg.Logf})
	if err != nil {
		return rep, fmt.Errorf("start cluster: %w", err)
	}
	// Stops every node by pid, whatever happens below (ctx cancellation by
	// SIGINT/SIGTERM included).
	defer c.Stop()

	d := &drill{cfg: cfg, c: c, rep: rep, rec: newRecorder(),
		rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5e1e)), cs: clients{addrs: c.URLs()}, began: began}
	if cfg.ClientLog != nil {
		d.cs.log = slog.New(slog.NewTextHandler(cfg.ClientLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return rep, d.run(ctx)
}

type drill struct {
	cfg Config
	c   *testcluster.Cluster
	rep *Report
	rec *recorder
	rng *rand.Rand
	cs  clients

	began time.Time
}

func (d *drill) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(d.rng.Int64N(int64(hi-lo)))
}

func (d *drill) run(ctx context.Context) error {
	cfg := d.cfg
	// Producers and the probe stop when the kills are over; workers keep
	// going through the drain.
	loadCtx, stopLoad := context.WithCancel(ctx)
	workCtx, stopWork := context.WithCancel(ctx)
	var loadWG, workWG sync.WaitGroup
	defer func() { stopLoad(); stopWork(); loadWG.Wait(); workWG.Wait() }()

	for i := range cfg.Producers {
		c := d.cs.head(fmt.Sprintf("producer%d", i), 3*time.Second, loadRetry)
		loadWG.Go(func() { producer(loadCtx, c, d.rec, i, cfg.ProducerInterval, 20*time.Millisecond, false) })
	}
	probe := d.cs.head("probe", 2*time.Second, probeRetry)
	loadWG.Go(func() { producer(loadCtx, probe, d.rec, -1, cfg.ProbeInterval, cfg.ProbeInterval, true) })
	for i := range cfg.Workers {
		c := d.cs.claw(i, 3*time.Second, loadRetry)
		workWG.Go(func() { worker(workCtx, c, d.rec, i) })
	}

	if !testcluster.SleepCtx(ctx, cfg.WarmUp) {
		return ctx.Err()
	}
	if _, ok := d.rec.firstProbeAckAfter(time.Time{}); !ok {
		return errors.New("no write was acknowledged during the warm-up")
	}
	for k := 1; k <= cfg.Kills; k++ {
		if !testcluster.SleepCtx(ctx, d.between(cfg.KillGapMin, cfg.KillGapMax)) {
			return ctx.Err()
		}
		if err := d.killOnce(ctx, k); err != nil {
			return fmt.Errorf("kill %d: %w", k, err)
		}
	}
	if !testcluster.SleepCtx(ctx, cfg.CoolDown) {
		return ctx.Err()
	}
	stopLoad()
	loadWG.Wait()
	cfg.Logf("drill: load stopped after %d acknowledged creates; draining", d.rec.ackCount())

	drainStart := time.Now()
	derr := d.drain(ctx)
	d.rep.DrainTime = time.Since(drainStart)
	stopWork()
	workWG.Wait()
	if derr != nil && ctx.Err() != nil {
		return derr
	}
	if derr != nil {
		d.rep.violation("drain: %v", derr)
	}
	return d.verify(ctx)
}

// killOnce SIGKILLs the current leader, restarts it after a random delay,
// and waits for a new leader, the first acknowledged write and the killed
// node catching up.
func (d *drill) killOnce(ctx context.Context, k int) error {
	cfg := d.cfg
	leader, err := d.c.WaitLeader(cfg.RecoveryTimeout)
	if err != nil {
		return fmt.Errorf("find the leader: %w", err)
	}
	restartAfter := d.between(cfg.RestartDelayMin, cfg.RestartDelayMax)
	rec := KillRecord{N: k, Node: leader.ID, Pid: leader.Pid(), RestartDelay: restartAfter}
	killAt := time.Now()
	if err := d.c.Kill(leader); err != nil {
		return err
	}
	rec.At = killAt.Sub(d.began)

	restarted := make(chan error, 1)
	go func() {
		if !testcluster.SleepCtx(ctx, restartAfter-time.Since(killAt)) {
			restarted <- ctx.Err()
			return
		}
		restarted <- d.c.Restart(leader)
	}()
	restartErr := func() error {
		select {
		case err := <-restarted:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	// A new leader (the restarted node may win, if it is back in time).
	var nl *testcluster.Node
	err = testcluster.Eventually(cfg.RecoveryTimeout, 20*time.Millisecond, func() error {
		if ctx.Err() != nil {
			return nil
		}
		if nl = d.c.Leader(); nl == nil {
			return errors.New("no leader")
		}
		return nil
	})
	if ctx.Err() != nil {
		restartErr()
		return ctx.Err()
	}
	if err != nil {
		restartErr()
		return fmt.Errorf("no new leader after killing %s: %w", leader.ID, err)
	}
	rec.Election = time.Since(killAt)
	rec.NewLeader = nl.ID

	// The first acknowledged probe create sent after the kill.
	var first time.Time
	err = testcluster.Eventually(cfg.RecoveryTimeout, 5*time.Millisecond, func() error {
		var ok bool
		if first, ok = d.rec.firstProbeAckAfter(killAt); !ok && ctx.Err() == nil {
			return errors.New("no write acknowledged yet")
		}
		return nil
	})
	if ctx.Err() != nil {
		restartErr()
		return ctx.Err()
	}
	if err != nil {
		restartErr()
		return fmt.Errorf("writes unavailable after killing %s: %w", leader.ID, err)
	}
	rec.Unavailable = first.Sub(killAt)

	if err := restartErr(); err != nil {
		return fmt.Errorf("restart %s: %w", leader.ID, err)
	}
	// Let the restarted node catch up before the next kill, so that a kill
	// never leaves the cluster without a quorum of up-to-date nodes.
	h, err := d.c.Health(nl)
	if err != nil {
		if nl, err = d.c.WaitLeader(cfg.RecoveryTimeout); err == nil {
			h, err = d.c.Health(nl)
		}
		if err != nil {
			return fmt.Errorf("leader health: %w", err)
		}
	}
	if err := d.c.WaitCaughtUp(h.CommitIndex, cfg.RecoveryTimeout); err != nil {
		return fmt.Errorf("%s did not catch up after its restart: %w", leader.ID, err)
	}
	rec.Recovered = time.Since(killAt)
	rec.killAt = killAt
	d.rep.Kills = append(d.rep.Kills, rec)
	cfg.Logf("drill: kill %d/%d: SIGKILL leader %s (pid %d); new leader %s after %v; first write after %v; restarted after %v; caught up after %v",
		k, cfg.Kills, rec.Node, rec.Pid, rec.NewLeader, ms(rec.Election), ms(rec.Unavailable), ms(rec.RestartDelay), ms(rec.Recovered))
	return nil
}
