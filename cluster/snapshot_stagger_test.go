package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// Restoring a backup makes every follower install the new snapshot, and a
// follower installing one answers nothing else until it has restored it.
// Sent to both followers of three nodes at once, the leader would hear from
// neither for longer than its lease, step down, and leave the restore's
// outcome unknown. Sent one at a time, the restore is confirmed, the
// leader keeps its term, and every node ends with the restored state.
func TestRestoreSendsSnapshotsOneAtATime(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1"), newTCPConfig(t, "n2")}
	cfgs[0].Bootstrap = true
	for i := range cfgs {
		// The default timings: a loaded test machine must not cost the
		// leader its lease by itself.
		cfgs[i].HeartbeatTimeout, cfgs[i].ElectionTimeout, cfgs[i].LeaderLeaseTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	}
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1]), startTCP(t, cfgs[2])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	for _, n := range nodes[1:] {
		if err := leader.AddVoter(ctx, n.self()); err != nil {
			t.Fatalf("add %s: %v", n.ID(), err)
		}
	}
	waitLeader(t, []*Node{nodes[0].Node, nodes[1].Node, nodes[2].Node})
	var want []string
	for i := 0; i < 5; i++ {
		want = append(want, fmt.Sprintf("a%d", i))
		applyOK(t, leader, want[i])
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, want)
	}

	// Each follower's install takes four leader leases.
	for _, n := range nodes[1:] {
		n.fsm.restoreDelay.Store(int64(4 * cfgs[0].LeaderLeaseTimeout))
	}
	term := leader.raft.CurrentTerm()
	backup := []byte(`["r0","r1"]`)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := leader.RestoreSnapshot(bytes.NewReader(backup), int64(len(backup)), 1, 20*time.Second); err != nil {
		t.Fatalf("restore: %v", err)
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, []string{"r0", "r1"})
	}
	if !leader.IsLeader() || leader.raft.CurrentTerm() != term {
		t.Errorf("leadership moved during the restore: leader %v, term %d → %d", leader.IsLeader(), term, leader.raft.CurrentTerm())
	}
	if _, _, err := leader.Apply(rctx, []byte("after")); err != nil {
		t.Fatalf("write after the restore: %v", err)
	}
	for _, n := range nodes {
		waitFSM(t, n.fsm, []string{"r0", "r1", "after"})
	}
}
