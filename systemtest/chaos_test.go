package systemtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/chaos"
)

// TestChaos runs the randomized fault workload (internal/chaos, docs/drill.md):
// a dozen clients doing random operations on a small pool of jobs through
// random nodes while the leader is killed or paused and followers are
// paused, then every node made leader in turn must answer the same state
// for every job, every job's history must be linearizable against the job
// model (porcupine), and the replicas' state hashes must agree. The short form
// (35 s of load, each kind of fault at least once) runs in `make test`;
// `make chaos` runs it for minutes.
//
// Env: CHAOS_DURATION (Go duration, load per run), CHAOS_SEED (replay a
// run; the first seed when CHAOS_RUNS > 1), CHAOS_RUNS (consecutive seeds),
// CHAOS_KEEP=1 (keep the data directory of passing runs too), CHAOS_BINARY
// (run against another spine executable, e.g. an older build, instead of
// the one built from this tree).
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: multi-process fault workload (skipped with -short)")
	}
	dur := 35 * time.Second
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive Go duration such as 3m", v)
		}
		dur = d
	}
	seed := time.Now().UnixNano()%1_000_000_000 + 1
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil || s == 0 {
			t.Fatalf("CHAOS_SEED=%q: want a non-zero integer", v)
		}
		seed = s
	}
	bin := binary
	if v := os.Getenv("CHAOS_BINARY"); v != "" {
		bin = v
	}
	runs := 1
	if v := os.Getenv("CHAOS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			t.Fatalf("CHAOS_RUNS=%q: want a number of runs from 1 to 1000", v)
		}
		runs = n
	}
	for i := 0; i < runs; i++ {
		s := seed + int64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Logf("chaos: seed %d (CHAOS_SEED=%d replays this run), %v of load", s, s, dur)
			cfg := chaos.Config{Seed: s, Duration: dur, Binary: bin, KeepDir: os.Getenv("CHAOS_KEEP") == "1", Logf: t.Logf}
			ctx, cancel := context.WithTimeout(context.Background(), dur+8*time.Minute)
			defer cancel()
			rep, err := chaos.Run(ctx, cfg)
			if rep != nil {
				t.Logf("chaos report:\n%s", rep)
			}
			if err != nil {
				t.Fatalf("chaos: the run could not be carried out: %v (CHAOS_SEED=%d)", err, s)
			}
			kinds := map[chaos.FaultKind]bool{}
			for _, f := range rep.Faults {
				kinds[f.Kind] = true
			}
			for _, k := range chaos.FaultKinds {
				if !kinds[k] {
					t.Errorf("no %s fault was injected", k)
				}
			}
			if rep.Acked == 0 {
				t.Error("no create was acknowledged")
			}
			for i, fj := range rep.FailingJobs {
				if i == 10 {
					t.Errorf("... and %d more failing jobs", len(rep.FailingJobs)-i)
					break
				}
				t.Errorf("job #%d %s: %v", fj.Number, fj.ID, fj.Problems)
			}
			if rep.Verified && !rep.HashesAgree {
				t.Error("the replicas' state hashes do not agree (see the violation)")
			}
			// The porcupine check of every job's history against the job
			// model: its failures are failing jobs (above); an undecided
			// check is not a pass, but not a failure of the server either.
			if l := rep.Linearizability; rep.Verified {
				if !l.Ran || l.Jobs == 0 {
					t.Errorf("the linearizability check did not run: %+v", l)
				}
				if len(l.Illegal) > 0 {
					t.Errorf("%d jobs not linearizable (porcupine); visualization: %s", len(l.Illegal), l.Visualization)
				}
				if len(l.Unknown) > 0 {
					t.Logf("WARNING: the linearizability check did not decide %d jobs in time (not a pass): %v", len(l.Unknown), l.Unknown)
				}
			}
			if !rep.OK() {
				t.Errorf("chaos run failed: CHAOS_SEED=%d replays it; data, node logs and histories in %s", s, rep.Dir)
			}
		})
	}
}
