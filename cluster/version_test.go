package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A build tells the highest cluster level it supports by gossiping it; a
// build from before that is known by its highest command type.
func TestLevelOfABuild(t *testing.T) {
	for _, c := range []struct {
		level    int
		commands uint8
		want     int
	}{
		{0, 0, 0}, {0, 13, 0}, {0, commandLevel - 1, 0}, {0, commandLevel, 1}, {0, commandDispatch, 2}, {0, 200, 2},
		{1, commandDispatch, 1}, {2, commandLevel, 2}, {3, commandDispatch, 3},
	} {
		if got := levelOf(c.level, c.commands); got != c.want {
			t.Errorf("levelOf(%d, %d) = %d, want %d", c.level, c.commands, got, c.want)
		}
	}
}

// The cluster's level may rise only as far as every server of the raft
// configuration supports: the oldest node holds it back (a node that
// gossips no level counts by its command type, one not heard from at all
// as supporting none), and its upgrade lets it rise. The status names
// each member's supported level.
func TestMinSupportedLevelFollowsTheOldestNode(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "n0"), newTCPConfig(t, "n1"), newTCPConfig(t, "n2")}
	cfgs[0].Bootstrap = true
	cfgs[0].Commands, cfgs[0].Level = commandDispatch+1, 3
	cfgs[1].Commands, cfgs[1].Level = commandDispatch+1, 3
	cfgs[2].Commands = commandLevel // a build from before levels were gossiped
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1]), startTCP(t, cfgs[2])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	if got := leader.MinSupportedLevel(); got != 3 {
		t.Fatalf("a cluster of one node of level 3: MinSupportedLevel = %d", got)
	}
	for _, n := range nodes[1:] {
		m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr}
		if err := leader.AddVoter(ctx, m); err != nil {
			t.Fatalf("add %s: %v", m.ID, err)
		}
	}
	waitFor(t, 10*time.Second, "every node to gossip its build", func() bool { return leader.MinSupportedLevel() == 1 })
	st, err := leader.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"n0": 3, "n1": 3, "n2": 1}
	for _, ns := range st.Nodes {
		if ns.SupportedLevel == nil || *ns.SupportedLevel != want[ns.ID] {
			t.Errorf("status of %s: supported level %v, want %d", ns.ID, ns.SupportedLevel, want[ns.ID])
		}
	}

	// n2 is upgraded: stopped, and started again on its data with level 3.
	if err := nodes[2].Shutdown(); err != nil {
		t.Fatal(err)
	}
	up := cfgs[2]
	up.Bootstrap, up.Commands, up.Level = false, commandDispatch+1, 3
	startTCP(t, up)
	waitFor(t, 10*time.Second, "the upgraded node's level", func() bool { return leader.MinSupportedLevel() == 3 })
}

// Every server of the configuration counts, voter or not; one the node has
// no gossip from (or knows only by address, from a join or peers.json)
// counts as supporting no level.
func TestMinSupportedCountsEveryServer(t *testing.T) {
	servers := []raft.Server{{ID: "n0", Suffrage: raft.Voter}, {ID: "n1", Suffrage: raft.Voter}, {ID: "n2", Suffrage: raft.Nonvoter}}
	peers := map[string]peerInfo{"n1": {level: 3, commands: commandDispatch + 1}, "n2": {commands: commandDispatch}}
	if got := minSupported(3, "n0", servers, peers); got != 2 {
		t.Errorf("with a non-voter of an older build: %d, want 2", got)
	}
	peers["n2"] = peerInfo{level: 3}
	if got := minSupported(3, "n0", servers, peers); got != 3 {
		t.Errorf("every server at 3: %d", got)
	}
	if got := minSupported(2, "n0", servers, peers); got != 2 {
		t.Errorf("the node itself at 2: %d", got)
	}
	peers["n2"] = peerInfo{} // known by address only
	if got := minSupported(3, "n0", servers, peers); got != 0 {
		t.Errorf("a server known by address only: %d, want 0", got)
	}
	delete(peers, "n2")
	if got := minSupported(3, "n0", servers, peers); got != 0 {
		t.Errorf("a server never heard from: %d, want 0", got)
	}
}
