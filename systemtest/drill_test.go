package systemtest

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spine-queue/spine/internal/drill"
)

// TestDrillFailover runs a short failover drill (3 leader kills on a
// 3-node cluster, scripts/failover-drill.sh does 10): nothing acknowledged
// may be lost or completed twice, every job must end done with one
// completed event, and every node must agree, state hash included.
// Unavailability is reported, not asserted (it depends on the machine's
// load). SEED replays a run.
func TestDrillFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("drill: skipped in -short mode")
	}
	seed, _ := strconv.ParseInt(os.Getenv("SEED"), 10, 64)
	cfg := drill.Config{
		Binary: binary, Dir: t.TempDir(), Nodes: 3, Kills: 3, Seed: seed,
		Producers: 3, Workers: 3,
		WarmUp: time.Second, CoolDown: 500 * time.Millisecond,
		KillGapMin: 500 * time.Millisecond, KillGapMax: 1500 * time.Millisecond,
		RestartDelayMin: 100 * time.Millisecond, RestartDelayMax: time.Second,
		DrainTimeout: 40 * time.Second, Timeout: 80 * time.Second,
		Logf: t.Logf,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 85*time.Second)
	defer cancel()
	rep, err := drill.Run(ctx, cfg)
	if rep != nil {
		t.Logf("drill report:\n%s", rep)
	}
	if err != nil {
		t.Fatalf("drill could not run: %v", err)
	}
	dCheck(t, rep)
}

// dCheck asserts the drill's guarantees one by one, so that a failure names
// the broken one.
func dCheck(t *testing.T, rep *drill.Report) {
	t.Helper()
	if len(rep.Kills) != rep.KillsPlanned {
		t.Errorf("kills: %d of %d", len(rep.Kills), rep.KillsPlanned)
	}
	if rep.Jobs == 0 {
		t.Error("no create was acknowledged")
	}
	if rep.Lost != 0 {
		t.Errorf("lost: %d acknowledged creates missing", rep.Lost)
	}
	if rep.DoubleCompletions != 0 {
		t.Errorf("double completions: %d", rep.DoubleCompletions)
	}
	if rep.NotDone != 0 {
		t.Errorf("not done: %d jobs", rep.NotDone)
	}
	if rep.EventViolations != 0 {
		t.Errorf("bad event histories: %d of %d", rep.EventViolations, rep.EventsChecked)
	}
	if !rep.NodesAgree {
		t.Errorf("nodes disagree on %d jobs", rep.Disagreements)
	}
	if rep.Verified && !rep.HashesAgree {
		t.Error("state hashes: the replicas did not converge (see the violation)")
	}
	if !rep.Verified {
		t.Error("final state not verified")
	}
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	med, mx := rep.Unavailability()
	t.Logf("write unavailability per kill: median %v, max %v", med, mx)
}
