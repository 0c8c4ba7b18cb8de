// Package chaos is Spine's randomized fault workload. It starts a real
// 3-node cluster (internal/testcluster), runs a dozen clients that do random
// operations on a small pool of live jobs — create, claim by id, worker
// claim-next, heartbeat, complete, fail, release, redrive, consistent reads —
// each through a node picked at random, and meanwhile injects a fault every
// few seconds, chosen by a seed: SIGKILL of the leader (restarted after a
// while), SIGSTOP of the leader, or SIGSTOP of a follower (resumed after a
// while). Every operation is recorded (start, end, node, arguments, answer).
//
// At the end it resumes everything, makes each node leader in turn and reads
// every job it ever saw through it with ?consistent, and fails when the
// nodes hold different states for a job, when an acknowledged create is
// missing, when a job whose complete was acknowledged is later seen queued
// or running, or when the replicas' state hashes differ
// (testcluster.CheckConverged). It also checks every job's history, the
// final reads included, for linearizability with porcupine against a model
// of one job (linmodel.go, linfsm.go, linearize.go). A failing run keeps its data
// directories, node logs and the operation history (and porcupine's
// visualization of the histories that are not linearizable), and the
// report quotes the history of each failing job. The seed replays the
// schedule of faults and the clients' choices (the interleaving still
// depends on timing).
//
// systemtest.TestChaos runs it (`make test` a short form, `make chaos` for
// minutes); docs/drill.md describes it.
package chaos

import (
	"fmt"
	"os"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// Config configures one run. Zero fields take the defaults of
// [Config.withDefaults].
type Config struct {
	// Seed drives every random choice (0: time-based; the report prints
	// the seed used, pass it back to replay).
	Seed int64
	// Duration is how long the load runs (3m). The load goes on past it
	// until every kind of fault has been injected once (bounded by
	// Duration + 1m).
	Duration time.Duration
	// Clients is the number of client goroutines (12), Jobs the number of
	// live jobs they keep in their pool (40).
	Clients int
	Jobs    int
	// Binary is the spine executable (required).
	Binary string
	// Dir holds the nodes' data, their logs and, after a failing run, the
	// operation history; a fresh temporary directory when empty. It is
	// removed after a passing run unless KeepDir.
	Dir     string
	KeepDir bool
	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)

	// RequestTimeout bounds each request (2s); a worker claim-next waits
	// up to MaxWait (300ms) on top of it.
	RequestTimeout time.Duration
	MaxWait        time.Duration
	// Think is the most a client pauses between two operations (40ms).
	Think time.Duration
	// FaultGapMin/Max bound the random time between the end of a fault and
	// the next one (3s, 6s).
	FaultGapMin, FaultGapMax time.Duration
	// RestartDelayMin/Max bound how long a killed leader stays down (1s, 3s).
	RestartDelayMin, RestartDelayMax time.Duration
	// PauseMin/Max bound how long a node stays SIGSTOPped (2s, 4s).
	PauseMin, PauseMax time.Duration
	// PartitionMin/Max bound how long a partition lasts (3s, 6s).
	PartitionMin, PartitionMax time.Duration

	// Nodes is the size of the cluster (3).
	Nodes int
	// Faults are the kinds of fault injected (FaultKinds: kills and
	// pauses). Partitions (PartitionKinds) need Net.
	Faults []FaultKind
	// Net, when set, runs every node in a network namespace of its own
	// (internal/netns) so that partitions can cut their links; it needs
	// root. Run makes and removes it.
	Net bool
	// RecoveryTimeout bounds each wait for a leader, a leadership
	// transfer, the final reads and the convergence check (30s).
	RecoveryTimeout time.Duration
	// Timeout is the hard bound of the whole run (Duration + 5m).
	Timeout time.Duration
	// LinearizeTimeout bounds each porcupine call of the linearizability
	// check (5s); the rechecks of failing jobs take at most four times it
	// together. A check cut short is reported as unknown, not as a pass.
	LinearizeTimeout time.Duration

	// LeaseSeconds, ReaperIntervalMS and LeaseGraceMS go into the nodes'
	// env (2, 200, 1000): leases expire and get reaped during the run.
	LeaseSeconds     int
	ReaperIntervalMS int
	LeaseGraceMS     int
	// Env is added to every node's environment last (wins).
	Env map[string]string
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	defd := func(p *time.Duration, v time.Duration) {
		if *p <= 0 {
			*p = v
		}
	}
	orderd := func(lo, hi *time.Duration) {
		if *hi < *lo {
			*hi = *lo
		}
	}
	defd(&c.Duration, 3*time.Minute)
	def(&c.Clients, 12)
	def(&c.Jobs, 40)
	defd(&c.RequestTimeout, 2*time.Second)
	defd(&c.MaxWait, 300*time.Millisecond)
	defd(&c.Think, 40*time.Millisecond)
	defd(&c.FaultGapMin, 3*time.Second)
	defd(&c.FaultGapMax, 6*time.Second)
	orderd(&c.FaultGapMin, &c.FaultGapMax)
	defd(&c.RestartDelayMin, time.Second)
	defd(&c.RestartDelayMax, 3*time.Second)
	orderd(&c.RestartDelayMin, &c.RestartDelayMax)
	defd(&c.PauseMin, 2*time.Second)
	defd(&c.PauseMax, 4*time.Second)
	orderd(&c.PauseMin, &c.PauseMax)
	defd(&c.PartitionMin, 3*time.Second)
	defd(&c.PartitionMax, 6*time.Second)
	orderd(&c.PartitionMin, &c.PartitionMax)
	def(&c.Nodes, 3)
	if len(c.Faults) == 0 {
		c.Faults = FaultKinds
	}
	defd(&c.RecoveryTimeout, 30*time.Second)
	defd(&c.Timeout, c.Duration+5*time.Minute)
	defd(&c.LinearizeTimeout, 5*time.Second)
	def(&c.LeaseSeconds, 2)
	def(&c.ReaperIntervalMS, 200)
	def(&c.LeaseGraceMS, 1000)
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano()%1_000_000_000 + 1
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

func (c Config) nodeEnv() map[string]string {
	return testcluster.LoadEnv(c.LeaseSeconds, c.ReaperIntervalMS, c.LeaseGraceMS, c.Env)
}

func (c Config) validate() error {
	if c.Binary == "" {
		return fmt.Errorf("chaos: Binary (the spine executable) is required")
	}
	if _, err := os.Stat(c.Binary); err != nil {
		return fmt.Errorf("chaos: binary: %w", err)
	}
	for _, k := range c.Faults {
		if k.IsPartition() && !c.Net {
			return fmt.Errorf("chaos: %s needs Net (network namespaces)", k)
		}
	}
	return nil
}
