// Package drill is Spine's failover drill: it starts a real multi-process
// cluster (internal/testcluster), runs a mixed load of producers and workers
// ("claws") through the Go client against every node, SIGKILLs the current
// leader a number of times at seeded random moments (restarting each killed
// node), then drains the queue and verifies that
//
//   - every acknowledged create exists (lost == 0);
//   - no job was acknowledged complete for two different attempts
//     (double completions == 0);
//   - every job ends done, with exactly one `completed` event;
//   - all nodes agree on the final state (id, status, attempts, modifyIndex);
//   - all nodes reach the same applied index with the same state hash, and
//     none saw a peer report another hash (testcluster.CheckConverged).
//
// It also measures write unavailability per kill: the time from the SIGKILL
// to the first acknowledged create that was sent after it.
//
// cmd/spine-drill and scripts/failover-drill.sh drive it; systemtest runs a
// short version.
package drill

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spine-queue/spine/internal/testcluster"
)

// Config configures one drill. Zero fields take the defaults in
// [Config.withDefaults].
type Config struct {
	// Binary is the spine executable (required).
	Binary string
	// Dir holds the nodes' data and logs; a fresh temporary directory when
	// empty (removed after a passing run unless KeepDir).
	Dir     string
	KeepDir bool

	// Nodes is the cluster size (3).
	Nodes int
	// Kills is how many times the leader is SIGKILLed (10).
	Kills int
	// Producers and Workers are the load goroutines (4 and 4).
	Producers int
	Workers   int
	// ProducerInterval is each producer's pause between creates (20ms); the
	// probe's is ProbeInterval (5ms).
	ProducerInterval time.Duration
	ProbeInterval    time.Duration
	// Seed drives every random choice of the drill (0: time-based; the
	// report prints the seed used, pass it back to replay).
	Seed int64

	// KillGapMin/Max bound the random wait between "the cluster has
	// recovered from the last kill" and the next kill (1s, 3s).
	KillGapMin, KillGapMax time.Duration
	// RestartDelayMin/Max bound the random delay between a kill and the
	// restart of the killed node (100ms, 1.5s).
	RestartDelayMin, RestartDelayMax time.Duration
	// WarmUp is how long the load runs before the first kill (2s); CoolDown
	// how long it runs after the last recovery (1s).
	WarmUp, CoolDown time.Duration
	// RecoveryTimeout bounds the wait for a new leader, the first write
	// after a kill, and the restarted node catching up (30s).
	RecoveryTimeout time.Duration
	// DrainTimeout bounds the drain (90s).
	DrainTimeout time.Duration
	// EventsCheckMax is how many jobs get their event history checked; all
	// of them when there are no more than this (5000), otherwise a seeded
	// sample plus every job with an unusual history.
	EventsCheckMax int
	// Timeout is the hard bound of the whole drill (10m).
	Timeout time.Duration

	// LeaseSeconds, ReaperIntervalMS, LeaseGraceMS go into the nodes' env
	// (3, 200, 1000): short, so jobs whose claim answer was lost in a kill
	// are reaped and redone during the drain.
	LeaseSeconds     int
	ReaperIntervalMS int
	LeaseGraceMS     int
	// Env is added to every node's environment last (wins).
	Env map[string]string

	// ClientLog, when set, receives the debug log of every client the drill
	// uses (retries with their waits and errors, leader changes).
	ClientLog io.Writer

	// Logf receives progress lines (nil: silent).
	Logf func(format string, args ...any)
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
	def(&c.Nodes, 3)
	def(&c.Kills, 10)
	def(&c.Producers, 4)
	def(&c.Workers, 4)
	defd(&c.ProducerInterval, 20*time.Millisecond)
	defd(&c.ProbeInterval, 5*time.Millisecond)
	defd(&c.KillGapMin, time.Second)
	defd(&c.KillGapMax, 3*time.Second)
	if c.KillGapMax < c.KillGapMin {
		c.KillGapMax = c.KillGapMin
	}
	defd(&c.RestartDelayMin, 100*time.Millisecond)
	defd(&c.RestartDelayMax, 1500*time.Millisecond)
	if c.RestartDelayMax < c.RestartDelayMin {
		c.RestartDelayMax = c.RestartDelayMin
	}
	defd(&c.WarmUp, 2*time.Second)
	defd(&c.CoolDown, time.Second)
	defd(&c.RecoveryTimeout, 30*time.Second)
	defd(&c.DrainTimeout, 90*time.Second)
	def(&c.EventsCheckMax, 5000)
	defd(&c.Timeout, 10*time.Minute)
	def(&c.LeaseSeconds, 3)
	def(&c.ReaperIntervalMS, 200)
	def(&c.LeaseGraceMS, 1000)
	if c.Seed == 0 {
		c.Seed = time.Now().UnixNano() % 1_000_000_000
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
		return fmt.Errorf("drill: Binary (the spine executable) is required")
	}
	if _, err := os.Stat(c.Binary); err != nil {
		return fmt.Errorf("drill: binary: %w", err)
	}
	if c.Nodes < 3 {
		return fmt.Errorf("drill: need at least 3 nodes to survive a leader kill, got %d", c.Nodes)
	}
	return nil
}
