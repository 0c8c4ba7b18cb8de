package systemtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/chaos"
	"github.com/spine-queue/spine/internal/netns"
)

// chaosScenario is one fault scenario of TestChaos.
type chaosScenario struct {
	name   string
	nodes  int
	faults []chaos.FaultKind
	short  bool // in the short form (`make test`) too
}

var chaosScenarios = []chaosScenario{
	{"kills+pauses/3", 3, chaos.FaultKinds, true},
	{"partitions/3", 3, chaos.PartitionKinds, false},
	{"partitions/5", 5, chaos.PartitionKinds, true},
	{"all/5", 5, append(append([]chaos.FaultKind{}, chaos.FaultKinds...), chaos.PartitionKinds...), false},
}

// TestChaos runs the randomized fault workload (internal/chaos, docs/reliability.md)
// in each scenario: a dozen clients doing random operations on a small
// pool of jobs through random nodes while faults hit the cluster — the
// leader killed or paused, followers paused (kills+pauses/3), the network
// partitioned for real in network namespaces (the leader isolated, a
// minority cut off, a bridge, one-way cuts: partitions/3 and /5), or all
// of them (all/5). Then every node made leader in turn must answer the
// same state for every job, every job's history must be linearizable
// against the job model (porcupine), and the replicas' state hashes must
// agree. Each scenario logs one VERDICT line. The short form (kills+pauses/3
// and partitions/5, about 25 s of load each) runs in `make test`; `make
// chaos` runs every scenario for minutes.
//
// Env: CHAOS_DURATION (Go duration, load per run), CHAOS_SEED (replay a
// run; the first seed when CHAOS_RUNS > 1), CHAOS_RUNS (consecutive seeds),
// CHAOS_SCENARIOS (comma-separated names, or "all"; default: the short
// form, or every scenario when CHAOS_DURATION is set), CHAOS_KEEP=1 (keep
// the data directory of passing runs too), CHAOS_BINARY (run against
// another spine executable, e.g. an older build, instead of the one built
// from this tree). Partition scenarios need root (network namespaces):
// without, they are skipped, unless SPINE_REQUIRE_FAULTS=1.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: multi-process fault workload (skipped with -short)")
	}
	dur := 25 * time.Second
	long := false
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CHAOS_DURATION=%q: want a positive Go duration such as 3m", v)
		}
		dur, long = d, true
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
	var scenarios []chaosScenario
	want := os.Getenv("CHAOS_SCENARIOS")
	for _, sc := range chaosScenarios {
		switch {
		case want == "all", want == "" && (long || sc.short):
		case want != "" && slices.Contains(strings.Split(want, ","), sc.name):
		default:
			continue
		}
		scenarios = append(scenarios, sc)
	}
	if len(scenarios) == 0 {
		var names []string
		for _, sc := range chaosScenarios {
			names = append(names, sc.name)
		}
		t.Fatalf("CHAOS_SCENARIOS=%q names none of %s", want, strings.Join(names, ", "))
	}
	var verdicts []string
	t.Cleanup(func() {
		// Every scenario's verdict together, at the end of the output.
		for _, v := range verdicts {
			t.Log(v)
		}
	})
	for _, sc := range scenarios {
		netNeeded := false
		for _, k := range sc.faults {
			netNeeded = netNeeded || k.IsPartition()
		}
		for i := 0; i < runs; i++ {
			s := seed + int64(i)
			t.Run(fmt.Sprintf("%s/seed=%d", sc.name, s), func(t *testing.T) {
				if netNeeded {
					if err := netns.Available(); err != nil {
						if os.Getenv("SPINE_REQUIRE_FAULTS") == "1" {
							t.Fatalf("%s needs network namespaces: %v", sc.name, err)
						}
						t.Skipf("%s needs network namespaces: %v", sc.name, err)
					}
				}
				t.Logf("chaos %s: seed %d (CHAOS_SEED=%d CHAOS_SCENARIOS=%s replays this run), %v of load", sc.name, s, s, sc.name, dur)
				cfg := chaos.Config{Seed: s, Duration: dur, Binary: bin, KeepDir: os.Getenv("CHAOS_KEEP") == "1", Logf: t.Logf,
					Nodes: sc.nodes, Faults: sc.faults, Net: netNeeded}
				ctx, cancel := context.WithTimeout(context.Background(), dur+8*time.Minute)
				defer cancel()
				rep, err := chaos.Run(ctx, cfg)
				if rep != nil {
					t.Logf("chaos report:\n%s", rep)
					v := rep.Verdict(sc.name).String()
					verdicts = append(verdicts, v)
					t.Log(v)
				}
				if err != nil {
					t.Fatalf("chaos: the run could not be carried out: %v (CHAOS_SEED=%d)", err, s)
				}
				kinds := map[chaos.FaultKind]bool{}
				for _, f := range rep.Faults {
					kinds[f.Kind] = true
				}
				for _, k := range sc.faults {
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
}
