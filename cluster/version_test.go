package cluster

import (
	"context"
	"testing"
	"time"
)

// A command type added in a rolling upgrade is proposed only once every
// server gossips that it applies it: the gate is shut while one node runs
// the older version, and opens when that node comes back upgraded.
func TestAllServersApplyFollowsTheOldestNode(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1"), newTCPConfig(t, "n2")}
	cfgs[0].Bootstrap = true
	cfgs[0].Commands, cfgs[1].Commands, cfgs[2].Commands = 13, 13, 12
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1]), startTCP(t, cfgs[2])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	for _, n := range nodes[1:] {
		m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr}
		if err := leader.AddVoter(ctx, m); err != nil {
			t.Fatalf("add %s: %v", m.ID, err)
		}
	}
	waitFor(t, 10*time.Second, "every node to gossip applying type 12", func() bool { return leader.AllServersApply(12) })
	if leader.AllServersApply(13) {
		t.Fatal("the gate for type 13 is open while n2 applies only up to 12")
	}

	// n2 is upgraded: stopped, and started again on its data with 13.
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	up := cfgs[2]
	up.Bootstrap, up.Commands = false, 13
	startTCP(t, up)
	waitFor(t, 10*time.Second, "the gate for type 13 to open", func() bool { return leader.AllServersApply(13) })
	if leader.AllServersApply(14) {
		t.Fatal("the gate is open for a type no node applies")
	}
}
