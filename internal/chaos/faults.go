package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// FaultKind names a fault.
type FaultKind string

// The faults.
const (
	// KillLeader SIGKILLs the leader and restarts it from its data after
	// RestartDelayMin..Max.
	KillLeader FaultKind = "kill-leader"
	// PauseLeader SIGSTOPs the leader for PauseMin..Max, then SIGCONTs it:
	// it wakes up believing it still leads.
	PauseLeader FaultKind = "pause-leader"
	// PauseFollower SIGSTOPs a follower for PauseMin..Max.
	PauseFollower FaultKind = "pause-follower"
)

// FaultKinds are all the kinds, in a fixed order.
var FaultKinds = []FaultKind{KillLeader, PauseLeader, PauseFollower}

// Fault is one injected fault.
type Fault struct {
	N    int // 1-based
	Kind FaultKind
	Node string
	Pid  int
	// Start and End are offsets from the start of the run: the signal, and
	// the restart or SIGCONT.
	Start, End time.Duration
}

// faultPlan returns the kind of fault number n (1-based): the first
// len(FaultKinds) faults are a seeded permutation of every kind, so that a
// short run has each at least once; the rest are drawn at random.
func faultPlan(rng *rand.Rand, n int) []FaultKind {
	plan := make([]FaultKind, 0, n)
	perm := rng.Perm(len(FaultKinds))
	for i := 0; i < n; i++ {
		if i < len(perm) {
			plan = append(plan, FaultKinds[perm[i]])
		} else {
			plan = append(plan, FaultKinds[rng.IntN(len(FaultKinds))])
		}
	}
	return plan
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// faults injects faults until load ends: a gap, then a fault, then the
// next gap. Each fault is undone (restart, SIGCONT) before the next gap,
// whether or not the load has ended meanwhile; only ctx (the hard bound)
// cuts it short, and then the final Stop wakes and stops everything.
// allKinds is closed once every kind has been injected.
func (r *runner) faults(ctx, load context.Context, allKinds chan<- struct{}) error {
	cfg := r.cfg
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xfa17))
	maxFaults := int(cfg.Timeout/cfg.FaultGapMin) + len(FaultKinds)
	plan := faultPlan(rng, maxFaults)
	seen := map[FaultKind]bool{}
	for i, kind := range plan {
		if !testcluster.SleepCtx(load, between(rng, cfg.FaultGapMin, cfg.FaultGapMax)) {
			return nil
		}
		f, err := r.inject(ctx, rng, i+1, kind)
		if err != nil {
			return fmt.Errorf("fault %d (%s): %w", i+1, kind, err)
		}
		r.mu.Lock()
		r.rep.Faults = append(r.rep.Faults, f)
		r.mu.Unlock()
		cfg.Logf("chaos: fault %d: %s %s (pid %d) %.1fs..%.1fs", f.N, f.Kind, f.Node, f.Pid, f.Start.Seconds(), f.End.Seconds())
		if !seen[kind] {
			seen[kind] = true
			if len(seen) == len(FaultKinds) {
				close(allKinds)
			}
		}
	}
	return nil
}

// inject carries out one fault and undoes it.
func (r *runner) inject(ctx context.Context, rng *rand.Rand, n int, kind FaultKind) (Fault, error) {
	cfg, c := r.cfg, r.c
	leader, err := c.WaitLeader(cfg.RecoveryTimeout)
	if err != nil {
		return Fault{}, fmt.Errorf("no leader to aim at: %w", err)
	}
	target := leader
	if kind == PauseFollower {
		var fs []*testcluster.Node
		for _, nd := range c.Nodes {
			if nd != leader && nd.Running() {
				fs = append(fs, nd)
			}
		}
		if len(fs) == 0 {
			return Fault{}, fmt.Errorf("no running follower")
		}
		target = fs[rng.IntN(len(fs))]
	}
	f := Fault{N: n, Kind: kind, Node: target.ID, Pid: target.Pid()}
	f.Start = time.Since(r.began)
	switch kind {
	case KillLeader:
		down := between(rng, cfg.RestartDelayMin, cfg.RestartDelayMax)
		if err := c.Kill(target); err != nil {
			return f, err
		}
		testcluster.SleepCtx(ctx, down-(time.Since(r.began)-f.Start))
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		if err := c.Restart(target); err != nil {
			return f, err
		}
	default:
		length := between(rng, cfg.PauseMin, cfg.PauseMax)
		if err := c.Pause(target); err != nil {
			return f, err
		}
		testcluster.SleepCtx(ctx, length)
		if err := c.Resume(target); err != nil {
			return f, err
		}
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
	}
	f.End = time.Since(r.began)
	return f, nil
}
