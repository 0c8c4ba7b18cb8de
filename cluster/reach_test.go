package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The leader's view of which followers answer: none is known before any
// follower has answered in the term; one that has not answered for the
// threshold is unreachable, and so is one that never answered in the term
// once the term's first answer is half that old.
func TestReadLeaseUnreachable(t *testing.T) {
	l := newReadLease(time.Second)
	ids := []raft.ServerID{"a", "b", "c"}
	t0 := time.Unix(1000, 0)
	if got := l.unreachable(3, ids, t0.Add(time.Hour), time.Second); got != nil {
		t.Fatalf("no answer in the term yet: %v, want nothing known", got)
	}
	ok := &raft.AppendEntriesResponse{Term: 3, Success: true}
	l.answered("a", 3, t0, ok)
	l.answered("b", 3, t0.Add(800*time.Millisecond), ok)
	l.answered("c", 3, t0.Add(900*time.Millisecond), &raft.AppendEntriesResponse{Term: 3, Success: false})
	cases := []struct {
		at   time.Duration
		want []string
	}{
		{400 * time.Millisecond, nil},
		{500 * time.Millisecond, []string{"c"}}, // c never accepted one
		{time.Second, []string{"a", "c"}},
		{1700 * time.Millisecond, []string{"a", "c"}},
		{1800 * time.Millisecond, []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		if got := l.unreachable(3, ids, t0.Add(tc.at), time.Second); !slices.Equal(got, tc.want) {
			t.Errorf("at +%v: %v, want %v", tc.at, got, tc.want)
		}
	}
	if got := l.unreachable(4, ids, t0.Add(time.Hour), time.Second); got != nil {
		t.Errorf("another term: %v, want nothing known", got)
	}
}

// A follower whose Raft stops answering while its memberlist keeps
// running (so gossip alone would call it alive for ever) is shown not
// alive by the leader, from its own AppendEntries, and by the other
// follower, from the list the leader gossips, while both still show each
// other alive.
func TestStatusShowsAFollowerRaftCannotReachAsNotAlive(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "r0"), newTCPConfig(t, "r1"), newTCPConfig(t, "r2")}
	cfgs[0].Bootstrap = true
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1]), startTCP(t, cfgs[2])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	for _, n := range nodes[1:] {
		m := Member{ID: n.cfg.NodeID, RaftAddr: n.cfg.RaftAddr, HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.cfg.GossipAddr}
		if err := leader.AddVoter(ctx, m); err != nil {
			t.Fatalf("add %s: %v", m.ID, err)
		}
	}
	waitLeader(t, []*Node{nodes[0].Node, nodes[1].Node, nodes[2].Node})
	alive := func(n *Node, id string) (alive, known bool) {
		st, err := n.Status(ctx)
		if err != nil {
			return false, false
		}
		for _, ns := range st.Nodes {
			if ns.ID == id {
				return ns.Alive, true
			}
		}
		return false, false
	}
	for _, n := range nodes {
		for _, m := range nodes {
			waitFor(t, 10*time.Second, n.ID()+" sees "+m.ID()+" alive", func() bool { a, _ := alive(n.Node, m.ID()); return a })
		}
	}

	// r2's Raft stops (its transport no longer answers), its memberlist
	// does not.
	doomed, other := nodes[2], nodes[1]
	if err := doomed.raft.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*tcpNode{nodes[0], other} {
		waitFor(t, 10*time.Second, n.ID()+" to show r2 not alive", func() bool {
			a, known := alive(n.Node, "r2")
			return known && !a
		})
	}
	if p, _ := other.peer("r2"); !p.alive {
		t.Fatal("memberlist declared r2 dead: the test no longer isolates Raft's view")
	}
	for _, id := range []string{"r0", "r1"} {
		if a, _ := alive(other.Node, id); !a {
			t.Errorf("r1 shows %s not alive", id)
		}
	}
}
