package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A heartbeat recorded on one node reaches the others by gossip, a newer
// time replaces an older one and never the reverse, and a node that starts
// late gets the whole map (push/pull) without any new broadcast.
func TestLivenessIsGossiped(t *testing.T) {
	ctx := context.Background()
	cfgs := []Config{newTCPConfig(t, "l0"), newTCPConfig(t, "l1"), newTCPConfig(t, "l2")}
	cfgs[0].Bootstrap = true
	nodes := []*tcpNode{startTCP(t, cfgs[0]), startTCP(t, cfgs[1])}
	leader := waitLeader(t, []*Node{nodes[0].Node})
	m := Member{ID: "l1", RaftAddr: cfgs[1].RaftAddr, HTTPAddr: cfgs[1].HTTPAddr, GossipAddr: cfgs[1].GossipAddr}
	if err := leader.AddVoter(ctx, m); err != nil {
		t.Fatal(err)
	}
	const n = 200
	base := time.Now().UnixNano()
	for i := range n {
		nodes[i%2].RecordHeartbeat(fmt.Sprintf("w:%d", i), base+int64(i))
	}
	nodes[1].RecordHeartbeat("w:0", base-1) // older: ignored
	seenAll := func(node *tcpNode) func() bool {
		return func() bool {
			for i := range n {
				if at, ok := node.LastSeen(fmt.Sprintf("w:%d", i)); !ok || at != base+int64(i) {
					return false
				}
			}
			return true
		}
	}
	for _, node := range nodes {
		waitFor(t, 10*time.Second, node.ID()+" to have every heartbeat", seenAll(node))
	}
	late := startTCP(t, cfgs[2])
	m = Member{ID: "l2", RaftAddr: cfgs[2].RaftAddr, HTTPAddr: cfgs[2].HTTPAddr, GossipAddr: cfgs[2].GossipAddr}
	if err := leader.AddVoter(ctx, m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the late node to get the map by push/pull", seenAll(late))
}

func TestSeenCodec(t *testing.T) {
	key, at, rest, ok := decodeSeen(encodeSeen("g:gw-1", -42)[1:])
	if !ok || key != "g:gw-1" || at != -42 || len(rest) != 0 {
		t.Fatalf("round trip: %q %d %v %v", key, at, rest, ok)
	}
	for _, bad := range [][]byte{{}, {5, 'a'}, {1, 'a'}} {
		if _, _, _, ok := decodeSeen(bad); ok {
			t.Fatalf("decoded %v", bad)
		}
	}
	l := newLiveness()
	l.mergeState(append(newLivenessWith("a", 5).localState(), 0xff)) // trailing garbage stops the merge
	if at, ok := l.get("a"); !ok || at != 5 {
		t.Fatalf("merge: %d %v", at, ok)
	}
}

func newLivenessWith(key string, at int64) *liveness {
	l := newLiveness()
	l.record(key, at)
	return l
}
