package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
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
	// PauseWorker stalls a client (most hold leases) for 2-3 lease
	// lengths: its leases expire and are reaped (and the jobs claimed by
	// others) while it is away; then it heartbeats, completes, fails and
	// releases with the leases it held, which must all be refused.
	PauseWorker FaultKind = "pause-worker"

	// The partitions (they need Config.Net) last PartitionMin..Max, then
	// every link is restored. Clients go on reaching every node.

	// PartitionLeader cuts the leader off from every other node, both ways.
	PartitionLeader FaultKind = "partition-leader"
	// PartitionMinority cuts a random minority ((n-1)/2 nodes, holding the
	// leader half of the time) off from the majority, both ways.
	PartitionMinority FaultKind = "partition-minority"
	// PartitionBridge splits the nodes into two sides that cannot talk,
	// with one node that talks to both (Jepsen's bridge): on 5 nodes 2 | 1
	// | 2, on 3 nodes 1 | 1 | 1; the leader is on a side.
	PartitionBridge FaultKind = "partition-bridge"
	// OneWay drops, one way only, either everything the leader sends to
	// the others (it hears them, they do not hear it) or everything they
	// send to it, at random.
	OneWay FaultKind = "one-way"
)

// FaultKinds are the process faults, the default of Config.Faults.
var FaultKinds = []FaultKind{KillLeader, PauseLeader, PauseFollower, PauseWorker}

// PartitionKinds are the network faults.
var PartitionKinds = []FaultKind{PartitionLeader, PartitionMinority, PartitionBridge, OneWay}

// IsPartition reports whether k is a network fault (it needs Config.Net).
func (k FaultKind) IsPartition() bool {
	for _, p := range PartitionKinds {
		if k == p {
			return true
		}
	}
	return false
}

// Fault is one injected fault.
type Fault struct {
	N    int // 1-based
	Kind FaultKind
	Node string
	Pid  int
	// Start and End are offsets from the start of the run: the signal, and
	// the restart or SIGCONT; for a partition, the cut and the heal.
	Start, End time.Duration
	// Cut lists, for a partition, the links cut, as "n1->n2"; Leaders the
	// nodes that reported themselves leader just before the heal.
	Cut     []string
	Leaders string
}

// faultPlan returns n faults of the given kinds: the first len(kinds) are
// a seeded permutation of every kind, so that a short run has each at
// least once; the rest are drawn at random.
func faultPlan(rng *rand.Rand, kinds []FaultKind, n int) []FaultKind {
	plan := make([]FaultKind, 0, n)
	perm := rng.Perm(len(kinds))
	for i := 0; i < n; i++ {
		if i < len(perm) {
			plan = append(plan, kinds[perm[i]])
		} else {
			plan = append(plan, kinds[rng.IntN(len(kinds))])
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
	maxFaults := int(cfg.Timeout/cfg.FaultGapMin) + len(cfg.Faults)
	plan := faultPlan(rng, cfg.Faults, maxFaults)
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
		cfg.Logf("chaos: fault %d: %s %s (pid %d) %.1fs..%.1fs %s", f.N, f.Kind, f.Node, f.Pid, f.Start.Seconds(), f.End.Seconds(), strings.Join(f.Cut, " "))
		if !seen[kind] {
			seen[kind] = true
			if len(seen) == len(cfg.Faults) {
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
	if kind.IsPartition() {
		return r.partition(ctx, rng, f, leader)
	}
	if kind == PauseWorker {
		lease := time.Duration(cfg.LeaseSeconds) * time.Second
		d := between(rng, 2*lease, 3*lease)
		i := rng.IntN(len(r.stalled))
		f.Node, f.Pid = fmt.Sprintf("client c%d", i), 0
		select {
		case r.stalled[i] <- d:
		default: // already told to stall
		}
		testcluster.SleepCtx(ctx, d)
		f.End = time.Since(r.began)
		return f, ctx.Err()
	}
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

// partition cuts links as kind says, around the leader, waits
// PartitionMin..Max and heals every link. The clients keep reaching every
// node: the isolated ones answer what a node cut off from its peers can.
func (r *runner) partition(ctx context.Context, rng *rand.Rand, f Fault, leader *testcluster.Node) (Fault, error) {
	cfg, c, nt := r.cfg, r.c, r.net
	f.Pid = 0
	if nt == nil {
		return f, fmt.Errorf("%s needs Config.Net (network namespaces)", f.Kind)
	}
	li := leader.Host
	var others []int
	for _, n := range c.Nodes {
		if n.Host != li {
			others = append(others, n.Host)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	var err error
	switch f.Kind {
	case PartitionLeader:
		err = nt.Partition([]int{li}, others)
	case PartitionMinority:
		size := (len(c.Nodes) - 1) / 2
		all := append([]int{li}, others...)
		if rng.IntN(2) == 0 { // the minority without the leader
			all = append(others, li)
		}
		err = nt.Partition(all[:size], all[size:])
		var ids []string
		for _, h := range all[:size] {
			ids = append(ids, c.Nodes[h].ID)
		}
		f.Node = strings.Join(ids, ",") + " cut off"
	case PartitionBridge:
		side := (len(c.Nodes) - 1) / 2
		// The leader and side-1 others | the bridge | the rest.
		err = nt.Partition(append([]int{li}, others[:side-1]...), others[side:])
		f.Node = c.Nodes[others[side-1]].ID + " bridges"
	case OneWay:
		deaf := rng.IntN(2) == 0
		for _, o := range others {
			from, to := li, o
			if deaf {
				from, to = o, li
			}
			if err = nt.Cut(from, to); err != nil {
				break
			}
		}
		f.Node = leader.ID + " unheard"
		if deaf {
			f.Node = leader.ID + " deaf"
		}
	}
	for _, cut := range nt.Cuts() {
		var a, b int
		if _, serr := fmt.Sscanf(cut, "%d->%d", &a, &b); serr == nil {
			f.Cut = append(f.Cut, c.Nodes[a].ID+"->"+c.Nodes[b].ID)
		}
	}
	if err != nil {
		_ = nt.Heal()
		return f, err
	}
	testcluster.SleepCtx(ctx, between(rng, cfg.PartitionMin, cfg.PartitionMax))
	// Who leads, in the nodes' own eyes, just before the heal (a cut-off
	// leader may still think it does; the majority should have elected
	// one of its own).
	var leaders []string
	for _, n := range c.Nodes {
		if h, herr := c.Health(n); herr == nil && h.Role == "leader" {
			leaders = append(leaders, n.ID)
		}
	}
	f.Leaders = strings.Join(leaders, ",")
	if f.Leaders == "" {
		f.Leaders = "none"
	}
	if err := nt.Heal(); err != nil {
		return f, err
	}
	f.End = time.Since(r.began)
	return f, ctx.Err()
}
